"""checkov's Kubernetes checks over every object of every example stack and every pod they make
(the MPIJobs' launcher and worker pods as mpi-operator creates them): every failure is one the
docs/security.md lists as deliberate for training, with its reason, and every listed one still happens.

checkov runs from its own virtualenv (`make checkov`, requirements-checkov.txt): its pins clash
with requirements.txt. Without it this test skips with one line; `make test` installs it.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE_STACKS, ROOT
from tests.pods import VARIANT, plan_of, pods
from tools import plan as plan_mod

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
PINNED = re.search(r"^checkov==(\S+)$", (ROOT / "requirements-checkov.txt").read_text(), re.M)
SECTION = "## Checks skipped deliberately for training"
PAGE = ROOT / "docs" / "security.md"


def readme_exceptions() -> dict[str, set[str]]:
    """Check ID -> the pods (by role) docs/security.md says fail it on purpose."""
    text = PAGE.read_text()
    body = text.split(SECTION, 1)[1].split("\n#", 1)[0]
    out: dict[str, set[str]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(CKV2?_K8S_\d+)`", cells[0]) if len(cells) == 3 else None
        if m:
            assert cells[2], f"{m.group(1)}: the docs row needs its reason"
            out[m.group(1)] = {role.strip() for role in cells[1].split(",")}
    return out


def rendered(tmp: Path) -> dict[str, str]:
    """Write every object (and every MPIJob's and LeaderWorkerSet's pods as Pods) to `tmp`, one per file; return
    file name -> what it is (a pod's role, or the object's kind)."""
    what: dict[str, str] = {}
    for stack in [*EXAMPLE_STACKS, VARIANT]:
        plan = plan_of(stack)
        # An MPIJob's and a LeaderWorkerSet's pods are checked as the Pods their controllers make.
        made = ("MPIJob", "LeaderWorkerSet")
        by_owner = {(p.namespace, p.owner["metadata"]["name"]): p for p in pods(plan) if p.owner["kind"] not in made}
        objects = [(o, None) for o in plan_mod.kubernetes_objects(plan) if o["kind"] not in made]
        objects += [(p.as_object(), p.role) for p in pods(plan) if p.owner["kind"] in made]
        for obj, role in objects:
            meta = obj["metadata"]
            name = f"{stack}--{obj['kind'].lower()}--{meta.get('namespace', 'cluster')}--{meta['name']}.yaml"
            (tmp / name).write_text(yaml.safe_dump(obj))
            owned = by_owner.get((meta.get("namespace"), meta["name"]))
            what[name] = role or (owned.role if owned and obj["kind"] in ("Job", "Deployment") else obj["kind"])
    return what


def run_checkov(directory: Path) -> list[dict[str, Any]]:
    # --skip-download: nothing from the vendor's platform (no network needed, same checks).
    options = ["--framework", "kubernetes", "-o", "json", "--compact", "--quiet", "--skip-download"]
    done = subprocess.run(
        [str(CHECKOV), "-d", str(directory), *options],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports), done.stderr[-2000:]
    return [f for r in reports for f in r["results"]["failed_checks"]]


@pytest.mark.skipif(not CHECKOV.is_file(), reason="checkov is not installed here: run `make checkov`")
def test_checkov_finds_only_the_failures_the_readme_lists(tmp_path: Path) -> None:
    version = subprocess.run([str(CHECKOV), "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert PINNED and version == PINNED.group(1), f"checkov {version}, requirements-checkov.txt pins {PINNED}"
    what = rendered(tmp_path)
    found: dict[str, set[str]] = defaultdict(set)
    examples: dict[tuple[str, str], str] = {}
    for failure in run_checkov(tmp_path):
        role = what[Path(failure["file_path"]).name]
        found[failure["check_id"]].add(role)
        examples.setdefault((failure["check_id"], role), f"{failure['resource']}: {failure['check_name']}")
    allowed = readme_exceptions()
    unexpected = sorted(
        f"{check} {role} ({examples[(check, role)]})"
        for check, roles in found.items()
        for role in roles - allowed.get(check, set())
    )
    assert not unexpected, "checkov failures docs/security.md does not list as deliberate:\n" + "\n".join(unexpected)
    stale = sorted(f"{check} {role}" for check, roles in allowed.items() for role in roles - found.get(check, set()))
    assert not stale, "docs/security.md rows for failures checkov no longer finds:\n" + "\n".join(stale)
