"""Where `--stack NAME` looks: a team's `Pulumi.NAME.yaml` at the root first, else the project's
stack of that name (an example in examples/, or its dev at the root), the same in every command; a
layered stack's `lowerStack` beside its own file; and `tools.newstack`, which starts a team's stack
from an example. Runs in folders of its own (cli.TEAM_DIR, cli.EXAMPLES_DIR, cli.PROJECT_DEV),
never on the project's files."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import API_PATH, ROOT, example_file, stack_yaml
from tools import cli, cost, diagram, images, newstack, plan, preflight

NS = "llm-training-eks:"


def _bad(name: str) -> str:
    """A stack file whose one problem names whose file it is."""
    return stack_yaml({"config": {"aws:region": "us-west-2", NS + "cluster": {**API_PATH, "name": name}}})


def _plan(args: list[str], err: io.StringIO) -> int:
    return plan.main(args, stdout=io.StringIO(), stderr=err)


def _cost(args: list[str], err: io.StringIO) -> int:
    return cost.main(args, stdout=io.StringIO(), stderr=err)


def _preflight(args: list[str], err: io.StringIO) -> int:
    return preflight.main(args, stdout=io.StringIO(), stderr=err, session=object())


def _images(args: list[str], err: io.StringIO) -> int:
    return images.main(["check", *args], stdout=io.StringIO(), stderr=err, session=object())


def _diagram(args: list[str], err: io.StringIO) -> int:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        return diagram.main(args)


COMMANDS: dict[str, Callable[[list[str], io.StringIO], int]] = {
    "plan": _plan,
    "cost": _cost,
    "preflight": _preflight,
    "diagram": _diagram,
    "images": _images,
}


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    team, examples = tmp_path / "team", tmp_path / "team" / "examples"
    examples.mkdir(parents=True)
    monkeypatch.setattr(cli, "TEAM_DIR", team)
    monkeypatch.setattr(cli, "EXAMPLES_DIR", examples)
    monkeypatch.setattr(cli, "PROJECT_DEV", team / "Pulumi.dev.yaml")
    return team, examples


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reads_the_teams_file_first_then_the_example(command: str, dirs: tuple[Path, Path]) -> None:
    team, examples = dirs
    (examples / "Pulumi.prod.yaml").write_text(_bad("Example Copy"))
    err = io.StringIO()
    assert COMMANDS[command](["--stack", "prod"], err) == 2
    assert "'Example Copy'" in err.getvalue() and "using your" not in err.getvalue()

    (team / "Pulumi.prod.yaml").write_text(_bad("Team Copy"))
    err = io.StringIO()
    assert COMMANDS[command](["--stack", "prod"], err) == 2
    first, *rest = err.getvalue().splitlines()
    assert first == (
        f"stack prod: using your {team}/Pulumi.prod.yaml (the root), not the example {examples}/Pulumi.prod.yaml;"
        f" for the example: --config-file {examples}/Pulumi.prod.yaml"
    )
    assert "'Team Copy'" in rest[0] and "Example Copy" not in err.getvalue()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_empty_or_missing_stack_says_how_to_start_one(command: str, dirs: tuple[Path, Path]) -> None:
    """A stack never started (no file, an empty one, one without aws:region) gets one line, exit 2,
    with the command that starts it from an example, in every command."""
    team, _ = dirs
    for text in (None, "", "config: {}\n", "config:\n  llm-training-eks:cluster:\n    name: llm-mine\n"):
        path = team / "Pulumi.mine.yaml"
        path.unlink(missing_ok=True)
        if text is not None:
            path.write_text(text)
        err = io.StringIO()
        assert COMMANDS[command](["--stack", "mine"], err) == 2, (text, err.getvalue())
        (line,) = err.getvalue().splitlines()
        assert "`make new-stack STACK=" in line and "FROM=dev`" in line, line


def test_a_name_in_neither_place_lists_both(dirs: tuple[Path, Path]) -> None:
    """The project's dev at the root is an example, not one of your stacks."""
    team, examples = dirs
    (team / "Pulumi.prod-aws.yaml").write_text(_bad("A"))
    (team / "Pulumi.dev.yaml").write_text(_bad("B"))
    (examples / "Pulumi.p5en.yaml").write_text(_bad("C"))
    for args, line in [
        (
            ["--stack", "prod"],
            "error: --stack prod: no Pulumi.prod.yaml at the root (your stacks: prod-aws) nor among the examples"
            " (dev, p5en); start it from an example with `make new-stack STACK=prod FROM=dev` (or FROM= another example),"
            " or pass --config-file PATH",
        ),
        (["--stack", "../dev"], "error: --stack '../dev': not a stack name (1-100 letters, digits, '-', '_' or '.')"),
    ]:
        err = io.StringIO()
        assert (_plan(args, err), err.getvalue().splitlines()) == (2, [line])


def test_the_stack_name_rule_is_pulumis() -> None:
    from tests import upstream

    assert cli.STACK_NAME.pattern == upstream.facts("pulumi-cli-3.259.0")["stack_name_pattern"].strip("^$")


def test_new_stack_copies_an_example_with_the_schema_line_from_the_root(dirs: tuple[Path, Path]) -> None:
    team, examples = dirs
    p5en = example_file("p5en").read_text()
    (examples / "Pulumi.p5en.yaml").write_text(p5en)
    err = io.StringIO()
    assert newstack.main(["mine", "--from", "p5en"], stderr=err) == 0
    assert err.getvalue().startswith(f"wrote {team}/Pulumi.mine.yaml from {examples}/Pulumi.p5en.yaml; ")
    written = (team / "Pulumi.mine.yaml").read_text().splitlines()
    assert written[0] == "# yaml-language-server: $schema=./schema/stack-config.schema.json"
    assert written[1:] == p5en.splitlines()[1:]
    # The project's dev, at the root already, is an example too: copied as it is.
    dev = example_file("dev").read_text()
    (team / "Pulumi.dev.yaml").write_text(dev)
    assert newstack.main(["mine-dev", "--from", "dev"], stderr=io.StringIO()) == 0
    assert (team / "Pulumi.mine-dev.yaml").read_text() == dev
    for args, line in [
        (["mine", "--from", "dev"], f"error: {team}/Pulumi.mine.yaml exists already; not overwritten"),
        (
            ["dev", "--from", "p5en"],
            f"error: {team}/Pulumi.dev.yaml is the project's own dev stack, there already: use it as it is"
            " (`pulumi stack init dev` reads it), or start a stack under another name",
        ),
        (["other", "--from", "nope"], "error: --from nope: no such example; examples: dev, p5en"),
        (
            ["other", "--from", "dev", "--lower-stack", "x"],
            f"error: --lower-stack x: {team}/Pulumi.dev.yaml is not a layered stack; it reads no stack below",
        ),
    ]:
        err = io.StringIO()
        assert (newstack.main(args, stderr=err), err.getvalue().splitlines()) == (2, [line])


def test_a_layered_stack_reads_the_stack_beside_it(dirs: tuple[Path, Path]) -> None:
    """A team's layered stacks made from the examples plan on each other at the root, not on an
    example of the same name; an example's lowerStack stays in examples/."""
    team, examples = dirs
    for layer in ("aws", "cluster"):
        name = f"trn1-llama2-{layer}"
        (examples / f"Pulumi.{name}.yaml").write_text(example_file(name).read_text())
    err = io.StringIO()
    assert newstack.main(["prod-cluster", "--from", "trn1-llama2-cluster"], stderr=err) == 2
    assert err.getvalue() == (
        f"error: {examples}/Pulumi.trn1-llama2-cluster.yaml is a layered stack reading"
        " organization/llm-training-eks/trn1-llama2-aws: name your stack of the layer below with"
        " --lower-stack NAME (make new-stack ... LOWER=NAME)\n"
    )
    assert newstack.main(["prod-aws", "--from", "trn1-llama2-aws"], stderr=io.StringIO()) == 0
    args = ["prod-cluster", "--from", "trn1-llama2-cluster", "--lower-stack", "prod-aws"]
    assert newstack.main(args, stderr=io.StringIO()) == 0
    assert (
        "  llm-training-eks:lowerStack: organization/llm-training-eks/prod-aws\n"
        in (team / "Pulumi.prod-cluster.yaml").read_text()
    )
    # An example of the team's lower stack's name must not be read in its place, nor the other way round.
    (examples / "Pulumi.prod-aws.yaml").write_text(_bad("Example Copy"))
    (team / "Pulumi.trn1-llama2-aws.yaml").write_text(_bad("Team Copy"))
    for stack in ("prod-cluster", "trn1-llama2-cluster"):
        out = io.StringIO()
        assert plan.main(["--stack", stack, "--format", "json"], stdout=out, stderr=io.StringIO()) == 0, stack
        assert json.loads(out.getvalue())["stack"] == stack
    (team / "Pulumi.prod-aws.yaml").unlink()
    err = io.StringIO()
    assert _plan(["--stack", "prod-cluster"], err) == 2
    assert err.getvalue() == (
        f"error: lowerStack organization/llm-training-eks/prod-aws: no Pulumi.prod-aws.yaml beside it in {team} to"
        " plan it from; pass --lower-outputs FILE (the JSON of `pulumi stack output --json`)\n"
    )


def test_no_test_or_tool_reads_a_stack_file_from_the_root() -> None:
    """The tests' subjects (and the docs' tables) are the examples; a team's files at the root are
    reached only through tools.cli (`--stack`, TEAM_DIR) and tools.snapshot, never through a path
    or glob of the project directory. The project's dev at the root is named once, as
    cli.PROJECT_DEV, and reached through cli.project_stacks like the other examples."""
    root_stack_file = re.compile(r"""\bROOT\s*/\s*f?["']Pulumi\.(?!yaml["'])|\bROOT\.r?glob\(\s*["']Pulumi""")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "tools").rglob("*.py")])
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if root_stack_file.search(line) and path.name != Path(__file__).name
    ]
    named_once = [f.split(":", 2)[::2] for f in found]
    assert named_once == [["tools/cli.py", ' PROJECT_DEV = ROOT / "Pulumi.dev.yaml"']], found
