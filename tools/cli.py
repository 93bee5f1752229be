"""The command line every tool shares: `--stack NAME | --config-file PATH`, and exit 2 for bad input.

The project's own stacks are its dev environment, `Pulumi.dev.yaml` at the root (where `pulumi
stack init dev` reads it), and the examples in `examples/`: committed, planned by the tests, and
the starting points of `make new-stack`. A team's stacks are the other `Pulumi.NAME.yaml` files at
the root (Pulumi.yaml sets no `stackConfigDir`). `--stack NAME` reads the team's file of that name,
else the project's; when a team's file hides an example of its name, stderr says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import ConfigError, StackConfig, offline_warnings, parse_stack_values
from config.checks import capacity as capacity_checks
from config.problems import Problem
from config.stackfile import UsageError, read_stack_file

ROOT = Path(__file__).resolve().parent.parent
"""The project directory."""
TEAM_DIR = ROOT
"""A team's own stack files: `Pulumi.<stack>.yaml` beside Pulumi.yaml, where `pulumi up --stack`
reads them. Never test subjects unless the team keeps snapshots of them (tools.snapshot)."""
EXAMPLES_DIR = ROOT / "examples"
"""The example stacks: starting points for a team's own, and the subjects of the test suite."""
PROJECT_DEV = ROOT / "Pulumi.dev.yaml"
"""The project's own dev environment: at the root, not in examples/, because `pulumi stack init dev`
and `pulumi stack select dev` read it only there; otherwise a project stack like the examples."""
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}", re.ASCII)
"""A Pulumi stack name (pulumi/pulumi v3.259.0 sdk/go/common/tokens/stack_name.go;
tests/upstream/pulumi-cli-3.259.0.yaml `stack_name_pattern`)."""


def check_stack_name(name: str, what: str) -> str:
    """`name` if it is a stack name, else UsageError naming `what` (the option that gave it)."""
    if not STACK_NAME.fullmatch(name):
        raise UsageError(f"{what} {name[:120]!r}: not a stack name (1-100 letters, digits, '-', '_' or '.')")
    return name


def stacks_in(folder: Path) -> list[str]:
    """The names of the stack files `Pulumi.<name>.yaml` in a folder."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))


def project_stacks() -> dict[str, Path]:
    """The project's stack files by name: the examples and its dev at the root (the test suite's
    subjects, the documented stacks, what `make new-stack FROM=` starts from)."""
    found = {name: EXAMPLES_DIR / f"Pulumi.{name}.yaml" for name in stacks_in(EXAMPLES_DIR)}
    if PROJECT_DEV.is_file():
        found[PROJECT_DEV.name.removeprefix("Pulumi.").removesuffix(".yaml")] = PROJECT_DEV
    return dict(sorted(found.items()))


def team_stacks() -> list[str]:
    """A team's own stacks: the stack files at the root that are not the project's."""
    return [name for name in stacks_in(TEAM_DIR) if TEAM_DIR / f"Pulumi.{name}.yaml" != PROJECT_DEV]


def start_hint(name: str) -> str:
    """How to start a stack that has no file yet (the same words wherever one is missing)."""
    return f"start it from an example with `make new-stack STACK={name} FROM=dev` (or FROM= another example)"


@dataclass(frozen=True)
class FoundStack:
    """The stack file `--stack NAME` means, and the example it hides when a team's file has the name too."""

    path: Path
    hidden_example: Path | None = None

    def note(self) -> str | None:
        """One line for stderr when the name is both a team's stack and an example."""
        if self.hidden_example is None:
            return None
        example = shown(self.hidden_example)
        return (
            f"stack {self.path.name.removeprefix('Pulumi.').removesuffix('.yaml')}: using your {shown(self.path)}"
            f" (the root), not the example {example}; for the example: --config-file {example}"
        )


def shown(path: Path) -> str:
    """A path as the user would type it from the project directory."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def find_stack(name: str) -> FoundStack:
    """A team's `Pulumi.NAME.yaml` at the root, else the project's stack of that name; UsageError
    naming both and saying how to start the stack."""
    check_stack_name(name, "--stack")
    team, project = TEAM_DIR / f"Pulumi.{name}.yaml", project_stacks().get(name)
    if team.is_file() and team != project:
        return FoundStack(team, project)
    if project is not None:
        return FoundStack(project)
    raise UsageError(
        f"--stack {name}: no Pulumi.{name}.yaml at the root (your stacks: {_listed(team_stacks())}) nor among"
        f" the examples ({_listed(list(project_stacks()))}); {start_hint(name)}, or pass --config-file PATH"
    )


def _listed(stacks: list[str]) -> str:
    return ", ".join(stacks) or "none"


def add_stack_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """`--stack NAME | --config-file PATH`, the same for every command of the project."""
    source = parser.add_mutually_exclusive_group(required=required)
    source.add_argument("--stack", help="stack name: your Pulumi.NAME.yaml at the root, else the example of that name")
    source.add_argument("--config-file", type=Path, help="any file in the stack-file format")


def stack_file(args: argparse.Namespace, stderr: Any = None) -> Path:
    """The stack file the arguments name; with `stderr`, says there which one when a name is ambiguous."""
    if args.config_file:
        return Path(args.config_file)
    found = find_stack(args.stack)
    note = found.note()
    if note and stderr is not None:
        print(note, file=stderr)
    return found.path


def is_example(path: Path) -> bool:
    """A stack file of the project's examples (examples/Pulumi.<name>.yaml): judged at the example
    clock (config.checks.capacity.EXAMPLE_CLOCK), so its dated Capacity Blocks plan on any date."""
    return path.resolve().parent == EXAMPLES_DIR.resolve()


def judged_clock(path: Path) -> contextlib.AbstractContextManager[None]:
    """The clock a stack file's config is judged at: the example clock for an example, else the real one."""
    return capacity_checks.example_clock() if is_example(path) else contextlib.nullcontext()


def stack_name(args: argparse.Namespace) -> str:
    """`--stack`, or the stack part of the config file's name."""
    if args.stack:
        return str(args.stack)
    return Path(args.config_file).name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")


def problems_of(e: Exception) -> list[Problem]:
    """The typed problems of an unusable stack file or invalid config: a ConfigError's own
    (bounded), else one `error: ...` line of kind invalid naming no key."""
    return e.problems if isinstance(e, ConfigError) else [Problem("", "invalid", f"error: {e}")]


def problems_json(problems: list[Problem]) -> str:
    """`{"problems": [{"path", "kind", "value", "allowed", "hint", "message"}, ...]}`, one JSON
    object for CI to annotate each key (docs/guardrails.md lists the kinds)."""
    return json.dumps({"problems": [p.as_dict() for p in problems]}, indent=2) + "\n"


def bad_input(e: Exception, stderr: Any, json_out: Any = None) -> int:
    """Report an unusable stack file or invalid config, one line per problem on stderr; exit code 2.

    With `json_out` (a command's `--format json`: its stdout), the same problems also go there
    as one `problems_json` object, so stdout stays JSON whatever the outcome."""
    problems = problems_of(e)
    for line in problems:
        print(line, file=stderr)
    if json_out is not None:
        json_out.write(problems_json(problems))
    return 2


def load_stack_config(args: argparse.Namespace, stderr: Any) -> StackConfig | None:
    """The validated config of the stack the arguments name, or None after reporting why not;
    what only deploying needs is a warning on stderr (config.offline_warnings)."""
    try:
        path = stack_file(args, stderr)
        with judged_clock(path):
            cfg = parse_stack_values(read_stack_file(path))
    except (UsageError, ConfigError) as e:
        bad_input(e, stderr)
        return None
    for line in offline_warnings(cfg):
        print(line, file=stderr)
    return cfg
