"""A newcomer's path, run: the README's offline commands in a fresh copy of the repository, a stack
of one's own from an example and from the README's minimal stack file, and the refusals the README
shows printed as it shows them. (In tests/plan, not in `make test-fast`: each step plans a stack.)"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"


def readme_block(after: str, lang: str) -> str:
    """The first ```lang block after the heading `after` in the README."""
    text = README.read_text()
    rest = text[text.index(after) :]
    start = rest.index(f"```{lang}\n") + len(lang) + 4
    return rest[start : rest.index("```", start)]


# Each refusal the README shows, and the one edit of its minimal stack that makes it.
README_MISTAKES = {
    "nodeGroups[0].availabilityZone:": ("availabilityZone: us-east-1f            #", "availabilityZone: us-east-1g #"),
    "workloads.bert.nodeGroup:": ("nodeGroup: trn1", "nodeGroup: trn"),
    "workloads.bert.nodes:": ("nodes: 2", "nodes: 3"),
}


def test_the_readmes_own_stack_plans_and_its_mistakes_print_what_it_shows(tmp_path: Path) -> None:
    """A newcomer copies the README's minimal stack: it plans, and each mistake the README shows
    is refused (exit 2) with the line it prints there."""
    import subprocess
    import sys

    stack = readme_block("## Your own stack", "yaml")
    shown = [ln for ln in readme_block("## Your own stack", "text").splitlines() if ln.strip()]
    assert sorted(ln.split(" ", 1)[0] for ln in shown) == sorted(README_MISTAKES)

    def plan(text: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "Pulumi.mine.yaml"
        path.write_text(text)
        cmd = [sys.executable, "-m", "tools.plan", "--config-file", str(path)]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)

    ok = plan(stack)
    assert ok.returncode == 0, ok.stderr[-2000:]
    for line in shown:
        old, new = README_MISTAKES[line.split(" ", 1)[0]]
        assert old in stack, f"the README's stack no longer has {old!r}"
        refused = plan(stack.replace(old, new, 1))
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert line.removesuffix("...").rstrip(", ") in refused.stderr, refused.stderr[-2000:]


def test_a_newcomers_path_in_a_fresh_copy(tmp_path: Path) -> None:
    """The README's path in a copy of the repository's files: its offline commands in order (the
    plan printing what the README shows of it), then a stack of one's own from an example and from
    the README's minimal stack file, each planned."""
    import shutil
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    copy = tmp_path / "llm-training-eks"
    for name in files.splitlines():
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)

    def run(command: str) -> subprocess.CompletedProcess[str]:
        argv = command.split("#", 1)[0].split()
        if argv[0] == "make":  # the virtualenv the suite runs in, not a second install
            argv.insert(1, f"VENV={ROOT / '.venv'}")
        # As a newcomer's shell runs it: not inside another make (`make test` sets MAKEFLAGS and
        # MAKELEVEL, and a nested make then prints "Entering directory" on stdout).
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        return subprocess.run(argv, cwd=copy, capture_output=True, text=True, timeout=300, check=False, env=env)

    offline = [c for c in readme_block("## Try it offline", "sh").splitlines() if c.startswith("make ")]
    assert offline[:2] == ["make help                 # every target and command", offline[1]]
    shown = readme_block("## Try it offline", "text").splitlines()
    for command in offline:
        done = run(command)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
        if "make plan" in command:
            printed = done.stdout.splitlines()
            assert printed[0] == shown[0], "the README shows another first line of the plan"
            assert [ln for ln in printed if ln.startswith("Cost:")] == [ln for ln in shown if ln.startswith("Cost:")]

    # The project's dev is at the root, where `pulumi stack init dev` reads it: no copy to make.
    assert (copy / "Pulumi.dev.yaml").is_file() and not (copy / "examples" / "Pulumi.dev.yaml").exists()
    refused = run("make new-stack STACK=dev FROM=dev")
    assert refused.returncode == 2 and "the project's own dev stack" in refused.stderr, refused.stderr
    # A stack of one's own from an example with a Hub recipe, as the README shows it.
    own_commands = [c for c in readme_block("## Your own stack", "sh").splitlines() if c.startswith("make ")]
    assert [c.split()[1] for c in own_commands] == ["new-stack", "plan"]
    for command in own_commands:
        done = run(command)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    assert "pulumi config set --secret huggingFaceToken" in done.stderr, done.stderr[-2000:]
    (copy / "Pulumi.mine.yaml").write_text(readme_block("## Your own stack", "yaml"))
    own = run("make plan STACK=mine")
    assert own.returncode == 0 and own.stdout.startswith("Offline plan of stack 'mine'"), own.stderr[-2000:]
