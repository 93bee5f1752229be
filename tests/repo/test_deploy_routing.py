"""Merges never silently skip a deploy: each run deploys every stack changed since that stack's
last successful deploy (GitHub deployments of its environment), and no pending run is cancelled.

The routing step of deploy.yml runs here for real (bash, git, `python -m tools.ci`) in a scratch
repository, against a stand-in of GitHub's deployments API on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests import upstream
from tests.conftest import ROOT, example_file
from tests.repo.test_delivery import DEPLOY, PR
from tools.delivery import deploys

STACKS = ["trn1-llama2-aws", "trn1-llama2-cluster", "trn1-llama2-runs"]
REPO = "example-org/llm-training-eks"
LIMITS = upstream.facts("github-actions-limits-2026-11")


class FakeDeployments:
    """GitHub's "List deployments" (newest first) and "List deployment statuses" on loopback."""

    def __init__(self) -> None:
        self.deployments: list[dict[str, Any]] = []  # newest last here; served newest first

    def record(self, stack: str, sha: str, state: str | None) -> None:
        statuses = [{"state": "in_progress"}] + ([{"state": state}] if state else [])
        self.deployments.append(
            {"id": len(self.deployments) + 1, "environment": stack, "sha": sha, "statuses": statuses}
        )

    def answer(self, path: str) -> Any:
        url = urlparse(path)
        parts = url.path.strip("/").split("/")
        if parts[-1] == "deployments":
            env = parse_qs(url.query)["environment"][0]
            found = [d for d in reversed(self.deployments) if d["environment"] == env]
            return [{"id": d["id"], "sha": d["sha"], "environment": env} for d in found]
        (d,) = [d for d in self.deployments if d["id"] == int(parts[-2])]
        return list(reversed(d["statuses"]))


@pytest.fixture
def github() -> Iterator[tuple[FakeDeployments, str]]:
    fake = FakeDeployments()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            assert self.headers["Authorization"] == "Bearer test-token"
            body = json.dumps(fake.answer(self.path)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, stack: str | None, line: str) -> str:
    if stack:
        path = repo / f"Pulumi.{stack}.yaml"
        path.write_text(path.read_text() + f"# {line}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", line)
    return _git(repo, "rev-parse", "HEAD")


def _step(doc: dict[str, Any], job: str, step_id: str) -> dict[str, Any]:
    (step,) = [s for s in doc["jobs"][job]["steps"] if s.get("id") == step_id]
    return step


def route_like_the_workflow(repo: Path, api: str, sha: str, before: str) -> dict[str, list[str]]:
    """Run deploy.yml's routing step as the runner would; the stacks of each phase."""
    step = _step(DEPLOY, "test", "stacks")
    out = repo / "github-output.txt"
    out.write_text("")
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(out),
        "GITHUB_SHA": sha,
        "GITHUB_API_URL": api,
        "GH_TOKEN": "test-token",
        "REPO": REPO,
        "BEFORE": before,  # what github.event.before was: the previous push
        "STACKS": json.dumps(STACKS),
        "PYTHONPATH": str(ROOT),
    }
    subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env, check=True
    )
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return {phase: [e["stack"] for e in json.loads(lines[phase])] for phase in ("aws", "cluster", "runs")}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for stack in STACKS:
        shutil.copy(example_file(stack), tmp_path / f"Pulumi.{stack}.yaml")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    wrapper = tmp_path / ".venv" / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / ".gitignore").write_text(".venv/\ngithub-output.txt\ndeployed.json\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    return tmp_path


def test_a_cancelled_merge_is_deployed_by_the_next_run(repo: Path, github: tuple[FakeDeployments, str]) -> None:
    fake, api = github
    first = _commit(repo, None, "everything deployed")
    for stack in STACKS:
        fake.record(stack, first, "success")
    merge1 = _commit(repo, "trn1-llama2-runs", "merge 1: a new run")
    # Run 1 is cancelled before its runs job finishes: GitHub records no success for it.
    fake.record("trn1-llama2-runs", merge1, None)
    merge2 = _commit(repo, "trn1-llama2-cluster", "merge 2: a queue")
    routed = route_like_the_workflow(repo, api, merge2, before=merge1)
    assert routed == {"aws": [], "cluster": ["trn1-llama2-cluster"], "runs": ["trn1-llama2-runs"]}
    # Once run 2 deployed both, a third merge that changes nothing deploys nothing.
    fake.record("trn1-llama2-cluster", merge2, "success")
    fake.record("trn1-llama2-runs", merge2, "success")
    merge3 = _commit(repo, None, "merge 3: docs only")
    assert route_like_the_workflow(repo, api, merge3, before=merge2) == {"aws": [], "cluster": [], "runs": []}


def test_a_stack_never_deployed_is_deployed(repo: Path, github: tuple[FakeDeployments, str]) -> None:
    fake, api = github
    sha = _commit(repo, None, "first")
    fake.record("trn1-llama2-aws", sha, "failure")
    routed = route_like_the_workflow(repo, api, sha, before=sha)
    assert routed == {"aws": ["trn1-llama2-aws"], "cluster": ["trn1-llama2-cluster"], "runs": ["trn1-llama2-runs"]}


def test_the_newest_success_wins_and_failures_do_not_count() -> None:
    fake = FakeDeployments()
    fake.record("s", "a", "success")
    fake.record("s", "b", "success")
    fake.record("s", "c", "failure")
    assert deploys.last_deployed(fake.answer, REPO, "s") == "b"
    assert deploys.last_deployed(fake.answer, REPO, "other") is None


def test_pull_requests_preview_what_the_deploy_will_deploy() -> None:
    """The preview saves a plan for every stack the deploy after the merge routes (the same
    `--since` routing), so the deploy of a stack left behind by a cancelled run has its plan."""
    pr = _step(PR, "test", "stacks")["run"]
    deploy = _step(DEPLOY, "test", "stacks")["run"]
    for script in (pr, deploy):
        assert "tools.ci deployed" in script and "--since deployed.json" in script
    assert PR["jobs"]["test"]["permissions"]["deployments"] == "read"
    assert DEPLOY["jobs"]["test"]["permissions"]["deployments"] == "read"


def test_no_pending_deploy_is_cancelled() -> None:
    """`queue: single` (the default) cancels a pending run when another is queued; `max` runs
    them all in order (the GitHub workflow schema check-jsonschema vendors)."""
    assert "max" in LIMITS["concurrency_queue"]
    schema = json.loads(
        (Path(sys.executable).parent.parent / "lib")
        .glob("python*/site-packages/check_jsonschema/builtin_schemas/vendor/github-workflows.json")
        .__next__()
        .read_text()
    )
    assert "max" in schema["definitions"]["concurrency"]["properties"]["queue"]["enum"]
    groups = [DEPLOY["concurrency"], *(j["concurrency"] for j in DEPLOY["jobs"].values() if "concurrency" in j)]
    assert len(groups) == 4
    for group in groups:
        assert group["cancel-in-progress"] is False and group["queue"] == "max", group
