"""The plan (and the state, which records the same dependencies) grows with runs + teams, not runs x
teams: a run's objects wait for the platform's shared parts (the MPI operator, the charts, the Kueue
flavors) and their own team's namespace, NetworkPolicies, claim and queues, never another team's.
200 runs of 50 teams once planned 581,561 dependencies, 90 MB of plan, in about a minute."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.conftest import BASE, placed_values, run_plan

NS = "llm-training-eks:"
MAX_PLAN_MB = 15
MAX_CPU_SECONDS = 45
"""CPU seconds of the plan (a loaded machine stretches wall time, not this): about 17 here."""
MAX_DEPENDENCIES_PER_RESOURCE = 16


def teams_and_runs(teams: int, runs: int) -> dict[str, Any]:
    """`teams` teams of one trn1 node each, `runs` BERT runs spread over them."""
    return {
        **BASE,
        NS + "nodeGroups": [
            {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": teams, "availabilityZone": "us-west-2d"}
        ],
        NS + "teams": {f"t{i}": {"nodeGroup": "trn1", "nodes": 1} for i in range(teams)},
        NS + "queueing": {"defaultQueue": False},
        **placed_values("us-west-2d"),
        NS + "workloads": {
            f"r{i}": {
                "recipe": "bert-neuron",
                "nodeGroup": "trn1",
                "nodes": 1,
                "runId": "run-001",
                "stepSeconds": 2.0,
                "team": f"t{i % teams}",
            }
            for i in range(runs)
        },
    }


def _team_urns(plan: dict[str, Any]) -> dict[str, set[str]]:
    """Team -> the URNs of its own platform objects (namespace, policies, claim, queues)."""
    out: dict[str, set[str]] = {}
    for r in plan["resources"]:
        meta = r["inputs"].get("metadata") if isinstance(r["inputs"].get("metadata"), dict) else {}
        ns, name = meta.get("namespace") or "", meta.get("name") or ""
        team = None
        if r["type"] == "kubernetes:core/v1:Namespace" and name.startswith("team-"):
            team = name.removeprefix("team-")
        elif ns.startswith("team-") and r["type"] != "kubernetes:kubeflow.org/v2beta1:MPIJob":
            team = ns.removeprefix("team-") if not r["parent"].endswith(":Workload") else None
        elif r["type"].startswith("kubernetes:kueue.x-k8s.io/") and r["inputs"]["kind"] != "ResourceFlavor":
            team = name.removeprefix("team-")
        if team is not None and ":workloads:Workload" not in r["urn"]:
            out.setdefault(team, set()).add(r["urn"])
    return out


def test_a_run_waits_for_its_own_team_only() -> None:
    plan = run_plan(teams_and_runs(3, 6))
    teams = _team_urns(plan)
    assert set(teams) == {"t0", "t1", "t2"} and all(len(u) >= 6 for u in teams.values()), teams
    runs = [r for r in plan["resources"] if ":workloads:Workload" in r["urn"] and r["custom"]]
    assert runs
    for r in runs:
        team = r["inputs"]["metadata"]["namespace"].removeprefix("team-")
        deps = set(r["dependencies"])
        assert teams[team] <= deps, r["name"]
        assert not any(deps & urns for other, urns in teams.items() if other != team), r["name"]


def test_200_runs_of_50_teams_plan_linearly() -> None:
    start = time.process_time()
    plan = run_plan(teams_and_runs(50, 200))
    seconds = time.process_time() - start
    size_mb = len(json.dumps(plan)) / 1e6
    dependencies = sum(len(r["dependencies"]) for r in plan["resources"])
    assert dependencies <= MAX_DEPENDENCIES_PER_RESOURCE * len(plan["resources"]), dependencies
    assert size_mb < MAX_PLAN_MB, f"{size_mb:.1f} MB"
    assert seconds < MAX_CPU_SECONDS, f"{seconds:.0f} CPU s"
