"""The Makefile: `make` alone is `make help`, which lists every target and every command under
tools/; `make plan` on a fresh machine says on stderr what it installs and keeps pip's output out
of sight (`FORMAT=json`: only the plan's JSON on stdout); the launch-chain harness's host
packages are installed only when asked (LAUNCH_HARNESS=1)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

STUB = """#!/bin/bash
# Stands in for the venv's python: pip makes noise on both streams, the plan prints JSON.
if [ "$1 $2" = "-m pip" ]; then echo "Collecting pulumi==3.272.0"; echo "pip args: $*"; echo "WARNING: pip noise" >&2; exit ${PIP_RC:-0}; fi
if [ "$1 $2" = "-m tools.plan" ]; then echo '{"stack": "dev", "args": "'"$*"'"}'; exit 0; fi
exit 3
"""
FAKE_PYTHON = """#!/bin/bash
# Stands in for python3: `-m venv DIR` makes DIR/bin/python the stub.
[ "$1 $2" = "-m venv" ] || exit 3
mkdir -p "$3/bin" && cp "$(dirname "$0")/stub" "$3/bin/python" && chmod +x "$3/bin/python"
"""


def _run(argv: list[str], drop: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """A command in the repository, with `env` added to this environment and `drop` taken out."""
    environ = {k: v for k, v in {**os.environ, **env}.items() if k not in ("MAKEFLAGS", drop)}
    return subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300, check=False)


def _make(*args: str, prefix: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
    """`make` in the repository (`prefix`: a command that runs it, e.g. as another user)."""
    return _run([*prefix, "make", "--no-print-directory", *args], **env)


def _fresh(tmp: Path, *args: str, pip_rc: int = 0) -> subprocess.CompletedProcess[str]:
    """`make` on a machine without .venv: the venv and pip are stubs in `tmp`."""
    for name, text in (("stub", STUB), ("python3", FAKE_PYTHON)):
        (tmp / name).write_text(text)
        (tmp / name).chmod((tmp / name).stat().st_mode | stat.S_IEXEC)
    return _make(*args, f"VENV={tmp}/venv", f"PYTHON={tmp}/python3", PIP_RC=str(pip_rc))


pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def test_first_plan_installs_quietly_and_prints_only_json(tmp_path: Path) -> None:
    result = _fresh(tmp_path, "plan", "STACK=dev", "FORMAT=json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "dev"  # stdout is the plan alone
    assert "setting up" in result.stderr and "installing the pinned requirements" in result.stderr
    assert "Collecting" not in result.stdout + result.stderr and "pip noise" not in result.stderr
    assert "Collecting pulumi" in (tmp_path / "venv" / "install.log").read_text()
    # The second run installs nothing and says nothing.
    again = _fresh(tmp_path, "plan", "STACK=dev", "FORMAT=json", "OUT=out-dir")
    assert again.returncode == 0 and again.stderr == ""
    assert json.loads(again.stdout)["args"].endswith("--stack dev --format json --out out-dir")


def test_a_failed_install_shows_pips_output(tmp_path: Path) -> None:
    result = _fresh(tmp_path, "plan", "STACK=dev", pip_rc=1)
    assert result.returncode != 0
    assert "Collecting pulumi" in result.stderr and "pip install failed" in result.stderr
    assert result.stdout == ""


def test_make_plan_json_of_the_real_venv_is_json_only() -> None:
    """The real thing, once the requirements are installed (`make test` installs them first)."""
    venv = ROOT / ".venv" / ".installed"
    if not venv.exists():
        pytest.skip("no installed .venv")
    result = _make("plan", "STACK=dev", "FORMAT=json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "dev"


def _as_user(uid: int, tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`make` on a fresh machine as `uid` (root only can switch to another user). `apt-get` and `ip`
    are stand-ins that record their arguments: nothing is installed on this machine."""
    for name, text in (("stub", STUB), ("python3", FAKE_PYTHON), ("bin/apt-get", HOST_TOOL), ("bin/ip", HOST_TOOL)):
        (tmp / name).parent.mkdir(exist_ok=True)
        (tmp / name).write_text(text)
        (tmp / name).chmod(0o755)
    tmp.chmod(0o777)
    (tmp / "bin").chmod(0o777)
    prefix = () if uid == os.geteuid() else ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--")
    path = f"{tmp}/bin:{os.environ['PATH']}"
    return _make(*args, f"VENV={tmp}/venv", f"PYTHON={tmp}/python3", prefix=prefix, PATH=path, **env)


HOST_TOOL = """#!/bin/bash
echo "$(basename "$0") $*" >> "$(dirname "$0")/calls"
"""
SKIPPED = (
    "launch-chain harness: skipped, nothing installed (LAUNCH_HARNESS=1 make test, as root, installs openssh-server,"
    " Open MPI and PyTorch CPU and runs it)"
)


def test_the_harness_installs_host_packages_only_when_asked() -> None:
    """Without LAUNCH_HARNESS=1 `make launch-deps` (a step of `make test`) installs nothing, even
    as root, and says so in one line; with it, as root, it installs the harness's tools (when
    missing) and its PyTorch (requirements-launch.txt, a large download); as another user it fails."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to run make as another user too)")
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        tmp = Path(d)
        venv = _as_user(0, tmp, "venv")
        assert venv.returncode == 0, venv.stderr
        assert not (tmp / "venv" / ".launch").exists() and "PyTorch" not in venv.stderr
        assert "requirements-launch.txt" not in (tmp / "venv" / "install.log").read_text()
        (tmp / "venv").chmod(0o777)
        for uid in (0, 65534):
            unasked = _as_user(uid, tmp, "launch-deps", LAUNCH_HARNESS="")
            assert (unasked.returncode, unasked.stderr) == (0, SKIPPED + "\n")
        assert not (tmp / "bin" / "calls").exists() and not (tmp / "venv" / ".launch").exists()
        user = _as_user(65534, tmp, "launch-deps", LAUNCH_HARNESS="1")
        assert user.returncode != 0
        assert "launch-chain harness: LAUNCH_HARNESS=1 needs root (it installs Debian packages" in user.stderr
        root = _as_user(0, tmp, "launch-deps", LAUNCH_HARNESS="1")
        assert root.returncode == 0, root.stderr
        calls = (tmp / "bin" / "calls").read_text()
        assert re.search(r"^ip netns add ltprobe\d+$", calls, re.M), calls
        if "installing the launch-chain harness's tools" in root.stderr:
            assert "apt-get install -y -qq openssh-server openmpi-bin iproute2 util-linux" in calls
        assert "installing the launch-chain harness's PyTorch (requirements-launch.txt)" in root.stderr
        assert (tmp / "venv" / ".launch").exists()
        assert "-r requirements-launch.txt" in (tmp / "venv" / "install-launch.log").read_text()


def test_ci_asks_for_the_harness_and_nothing_else_does() -> None:
    """`.ci/run` (root, a fresh machine) sets LAUNCH_HARNESS=1, under which a harness that cannot
    run is an error; `make test` reaches launch-deps through pytest; the GitHub workflow runs
    `make test` unprivileged and without it."""
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^export LAUNCH_HARNESS=1$", ci_run, re.M) and "LAUNCH_HARNESS_REQUIRED" not in ci_run
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^pytest: .*\blaunch-deps\b", make, re.M)
    assert "requirements-launch" not in make.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    workflow = (ROOT / ".github" / "workflows" / "pull-request.yml").read_text()
    assert "run: make test" in workflow and "sudo" not in workflow and "LAUNCH_HARNESS" not in workflow
    chain = (ROOT / "tests" / "launch" / "test_launch_chain.py").read_text()
    assert 'os.environ.get("LAUNCH_HARNESS") != "1"' in chain and "raise RuntimeError" in chain


CHAIN = "tests/launch/test_launch_chain.py"


def test_unasked_the_harness_skips_in_one_line() -> None:
    python = str(ROOT / ".venv" / "bin" / "python")
    result = _run([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", CHAIN], drop="LAUNCH_HARNESS")
    assert result.returncode == 5, result.stdout + result.stderr  # pytest: no tests ran, the module skipped
    assert "launch-chain harness skipped: LAUNCH_HARNESS=1 make test (as root) installs and runs it" in result.stdout, (
        result.stdout
    )


# --------------------------------------------------------------------------- make help


def _targets() -> list[str]:
    """Every target the Makefile defines (not the files it makes, not variables)."""
    found = re.findall(r"^([a-z][a-z-]*)\s*:(?![:=])", (ROOT / "Makefile").read_text(), re.M)
    return sorted(set(found))


def _commands() -> list[str]:
    """Every module under tools/ that runs as a command: a top-level `if __name__ == "__main__":`."""
    commands = []
    for path in sorted((ROOT / "tools").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            test = node.test if isinstance(node, ast.If) else None
            if (
                isinstance(test, ast.Compare)
                and isinstance(test.left, ast.Name)
                and test.left.id == "__name__"
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value == "__main__"
            ):
                commands.append(path.stem)
    return commands


def test_make_alone_is_help_listing_every_target_and_command(tmp_path: Path) -> None:
    """A bare `make` prints the help and builds nothing (not even the virtualenv: with PYTHON=false
    an attempt fails at once)."""
    bare = _make(f"VENV={tmp_path}/venv", "PYTHON=false")
    assert bare.returncode == 0 and bare.stderr == "" and not (tmp_path / "venv").exists()
    assert bare.stdout == _make("help").stdout
    lines = bare.stdout.splitlines()
    listed = [m[1] for line in lines if (m := re.match(r"  make (\S+) +\S", line))]
    tools = [m[1] for line in lines if (m := re.match(r"  python -m tools\.(\S+) +\S", line))]
    assert sorted(listed) == _targets(), "a target without a `## ` line in the Makefile"
    assert sorted(tools) == _commands(), "a command under tools/ without a first docstring line"
    assert {"plan", "cost", "preflight", "snapshot", "new-stack", "test", "test-fast"} <= set(listed)
    assert len(lines) == len(listed) + len(tools) + 2 and all(len(line) <= 125 for line in lines)


def test_targets_for_a_stack_of_yours_ask_for_its_name_before_installing(tmp_path: Path) -> None:
    for args, line in [
        (["snapshot"], "make snapshot needs STACK=<name> (your stack: Pulumi.<name>.yaml at the root).  Stop."),
        (
            ["diff", "STACK=x"],
            "make diff needs FILE=<edited stack file> or BASE=<git ref> (the deployed file is STACK's own, or it at"
            " BASE).  Stop.",
        ),
        (
            ["new-stack", "STACK=x"],
            "make new-stack needs FROM=<example> (examples/Pulumi.<example>.yaml, or dev), e.g. FROM=dev.  Stop.",
        ),
    ]:
        result = _make(*args, f"VENV={tmp_path}/venv", "PYTHON=false")
        assert result.returncode == 2 and result.stderr.strip().endswith(line), result.stderr
        assert not (tmp_path / "venv").exists()


def test_stack_targets_pass_the_stack_on(tmp_path: Path) -> None:
    """cost, preflight, snapshot, diff, timeline and new-stack hand their variables to the command (stub venv)."""
    _fresh(tmp_path, "venv")
    stub = tmp_path / "venv" / "bin" / "python"
    stub.write_text('#!/bin/bash\necho "$*"\n')
    for args, command in [
        (["cost", "STACK=p", "LIVE=1"], "-m tools.cost --stack p --live"),
        (["preflight", "STACK=p"], "-m tools.preflight --stack p"),
        (["snapshot", "STACK=p"], "-m tools.snapshot --stack p"),
        (["diff", "STACK=p", "FILE=e.yaml"], "-m tools.diff --stack p --file e.yaml --format table"),
        (["diff", "STACK=p", "BASE=main", "FORMAT=json"], "-m tools.diff --stack p --base main --format json"),
        (
            ["timeline", "STACK=p", "OUT=o", "FROM=2027-01-04T08:00Z"],
            "-m tools.timeline --stack p --out o --from 2027-01-04T08:00Z --format table",
        ),
        (
            ["new-stack", "STACK=p-cluster", "FROM=e-cluster", "LOWER=p-aws"],
            "-m tools.newstack p-cluster --from e-cluster --lower-stack p-aws",
        ),
    ]:
        result = _make(*args, f"VENV={tmp_path}/venv")
        assert (result.returncode, result.stdout.strip()) == (0, command), result.stderr


def test_test_fast_runs_the_unit_and_repository_tests_and_leaves_out_only_what_exists() -> None:
    """What `make test-fast` leaves out is named by path; a renamed file must not slip back in."""
    dry = _make("-n", "test-fast")
    assert dry.returncode == 0, dry.stderr
    commands = dry.stdout.replace("\\\n", " ").splitlines()  # a continued line is one command
    (pytest_line,) = [line for line in commands if "/pytest " in line]
    assert " tests/unit tests/repo " in pytest_line + " "
    ignored = re.findall(r"--ignore=(\S+)", pytest_line)
    assert ignored and all((ROOT / path).is_file() for path in ignored), ignored
    assert set(ignored) == set(re.findall(r"--ignore=(\S+)", (ROOT / "Makefile").read_text())), "the whole command"


def test_the_readme_shows_make_help_as_it_prints() -> None:
    """README "Commands": the block between the make-help markers is `make help`'s output."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- make-help:start[^\n]*-->\n```text\n(.*?)```\n<!-- make-help:end -->", readme, re.S)
    assert block, "README.md: no make-help block"
    assert block[1] == _make("help").stdout, "paste the output of `make help` between the make-help markers"
