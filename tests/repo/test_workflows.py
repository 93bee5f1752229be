"""The CI workflows pass the same checks `make lint` runs, and those checks catch breakage.

check-jsonschema validates structure against the GitHub workflow schema it vendors;
zizmor audits security offline. Each runs on the real workflows (must pass) and on a
deliberately broken copy (must fail), so a check that silently stopped working shows up.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _tool(name: str) -> str:
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: run `make venv` (it is pinned in requirements-dev.txt)")
    return found


def schema_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    cmd = [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def zizmor(*paths: Path) -> subprocess.CompletedProcess[str]:
    cmd = [_tool("zizmor"), "--offline", "--no-progress", "--color", "never", *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _load(path: Path) -> dict[Any, Any]:
    doc = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the `on:` key as True.
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def _steps(doc: dict[Any, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(name, job, step) for name, job in doc["jobs"].items() for step in job.get("steps", [])]


def test_there_are_pull_request_and_deploy_workflows() -> None:
    triggers = {p.name: _load(p)["on"] for p in WORKFLOWS}
    assert any("pull_request" in t for t in triggers.values()), triggers
    assert any("push" in t for t in triggers.values()), triggers


def test_real_workflows_pass_the_schema() -> None:
    result = schema_check(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_real_workflows_pass_zizmor() -> None:
    result = zizmor(WORKFLOW_DIR)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_structurally_broken_workflow_fails_the_schema(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    # `runs-on` misspelled and a job without steps: both are schema errors.
    text = WORKFLOWS[0].read_text().replace("runs-on:", "run-on:", 1)
    broken.write_text(text)
    result = schema_check(broken)
    assert result.returncode != 0, result.stdout
    assert "run-on" in result.stdout + result.stderr or "runs-on" in result.stdout + result.stderr


def test_an_unsafe_workflow_fails_zizmor(tmp_path: Path) -> None:
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    unsafe = workflows / "unsafe.yml"
    unsafe.write_text(
        """name: unsafe
on:
  pull_request_target:
jobs:
  greet:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
"""
    )
    assert schema_check(unsafe).returncode == 0, "the unsafe copy is valid structure; only zizmor should catch it"
    result = zizmor(unsafe)
    assert result.returncode != 0, result.stdout + result.stderr
    report = result.stdout + result.stderr
    for audit in ("template-injection", "unpinned-uses", "dangerous-triggers"):
        assert audit in report, f"zizmor did not report {audit}:\n{report}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_with_a_version_comment(path: Path) -> None:
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip().startswith(("uses:", "- uses:"))]
    assert lines
    for line in lines:
        ref, _, comment = line.removeprefix("- ").removeprefix("uses:").strip().partition("#")
        assert PINNED.match(ref.strip()), f"{path.name}: {line!r} is not pinned to a full commit SHA"
        assert re.match(r"\s*v\d", comment), f"{path.name}: {line!r} has no `# vX.Y.Z` comment"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_least_privilege(path: Path) -> None:
    doc = _load(path)
    assert doc.get("permissions") == {}, "workflow-level permissions must be empty; jobs ask for what they need"
    for name, job in doc["jobs"].items():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{name}: no job-level permissions"
        uses = [s.get("uses", "") for s in job.get("steps", [])]
        with_ = [s.get("with", {}) for s in job.get("steps", [])]
        oidc = any(u.startswith("aws-actions/configure-aws-credentials@") for u in uses)
        comments = any(w.get("comment-on-pr") for w in with_)
        assert (perms.get("id-token") == "write") == oidc, f"{name}: id-token: write only where OIDC is used"
        assert (perms.get("pull-requests") == "write") == comments, f"{name}: pull-requests: write only to comment"
        assert not any("aws-access-key-id" in w for w in with_), f"{name}: no long-lived AWS keys; use OIDC"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_checkout_does_not_persist_credentials(path: Path) -> None:
    for name, _job, step in _steps(_load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, name
