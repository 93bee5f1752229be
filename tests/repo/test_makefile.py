"""`make plan` on a fresh machine: the first install says what it is doing, on stderr, and keeps
pip's output out of sight; `FORMAT=json` prints only the plan's JSON on stdout."""

from __future__ import annotations

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


def _make(*args: str, prefix: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess[str]:
    """`make` in the repository (`prefix`: a command that runs it, e.g. as another user)."""
    environ = {k: v for k, v in {**os.environ, **env}.items() if k != "MAKEFLAGS"}
    return subprocess.run(
        [*prefix, "make", "--no-print-directory", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


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


def _as_user(uid: int, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`make` on a fresh machine as `uid` (root only can switch to another user)."""
    for name, text in (("stub", STUB), ("python3", FAKE_PYTHON)):
        (tmp / name).write_text(text)
        (tmp / name).chmod(0o755)
    tmp.chmod(0o777)
    prefix = () if uid == os.geteuid() else ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--")
    return _make(*args, f"VENV={tmp}/venv", f"PYTHON={tmp}/python3", prefix=prefix)


def test_the_harness_pytorch_is_installed_only_where_the_harness_runs() -> None:
    """requirements-launch.txt (torch, a large download) joins the venv only as root where a
    network namespace can be made (`.ci/run`); `make venv`, and `make test` for any other user
    (a GitHub-hosted runner), install the project's requirements only."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to run make as another user too)")
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        tmp = Path(d)
        venv = _as_user(0, tmp, "venv")
        assert venv.returncode == 0, venv.stderr
        assert not (tmp / "venv" / ".launch").exists() and "PyTorch" not in venv.stderr
        assert "requirements-launch.txt" not in (tmp / "venv" / "install.log").read_text()
        (tmp / "venv").chmod(0o777)
        user = _as_user(65534, tmp, "launch-deps")
        assert user.returncode == 0, user.stderr
        assert "not root, not installed (tests/launch will skip)" in user.stderr
        assert not (tmp / "venv" / ".launch").exists()
        root = _as_user(0, tmp, "launch-deps")
        assert root.returncode == 0, root.stderr
        if "no network namespaces here" not in root.stderr:
            assert "installing the launch-chain harness's PyTorch (requirements-launch.txt)" in root.stderr
            assert (tmp / "venv" / ".launch").exists()
            assert "-r requirements-launch.txt" in (tmp / "venv" / "install-launch.log").read_text()


def test_ci_requires_the_harness_and_make_test_installs_it() -> None:
    """`.ci/run` (root, a fresh machine) makes a skipped harness an error; `make test` reaches
    launch-deps through pytest; the GitHub workflow runs `make test` unprivileged."""
    assert "export LAUNCH_HARNESS_REQUIRED=1" in (ROOT / ".ci" / "run").read_text()
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^pytest: .*\blaunch-deps\b", make, re.M)
    assert "requirements-launch" not in make.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    workflow = (ROOT / ".github" / "workflows" / "pull-request.yml").read_text()
    assert "run: make test" in workflow and "sudo" not in workflow
