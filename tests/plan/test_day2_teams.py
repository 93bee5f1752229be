"""Day 2: adding the first team never takes over a running run. Before, teams
replaced the `training` namespace: it was deleted with its claim and every run moved to a team's
namespace and directory, so running training was killed and restarted from step 0. Now a stack
that adds teams says whether the default queue stays (`queueing.defaultQueue`); kept, runs that
name no team stay where they run."""

from __future__ import annotations

import copy
from typing import Any

from tests import upstream
from tests.conftest import plan_exit, run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "trn1-llama2"
TEAMS = {"research": {"nodeGroup": "trn1", "nodes": 2, "borrowingLimitNodes": 2}}
NAMESPACE = "kubernetes:core/v1:Namespace"


def with_teams(queueing: dict[str, Any] | None, move_runs_to: str | None = None) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:teams"] = TEAMS
    if queueing is not None:
        values["llm-training-eks:queueing"] = queueing
    if move_runs_to:
        for run in values["llm-training-eks:workloads"].values():
            run["team"] = move_runs_to
    return values


def run_objects(plan: dict[str, Any]) -> set[str]:
    """URNs of the objects of the stack's runs and of the `training` namespace's claim and policies."""
    return {
        r["urn"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:") and r["inputs"].get("metadata", {}).get("namespace") == "training"
    }


def test_the_first_team_leaves_running_runs_where_they_are() -> None:
    before = stack_plan(STACK)
    after = run_plan(with_teams({"defaultQueue": True}), STACK)
    update = day2.diff(before, after)
    objects = run_objects(before)
    assert objects and {update.steps[u].op for u in objects} == {"same"}
    (training,) = [
        r["urn"]
        for r in before["resources"]
        if r["type"] == NAMESPACE and r["inputs"]["metadata"]["name"] == "training"
    ]
    assert update.steps[training].op == "same"
    assert not update.of("delete") and not update.of("replace"), sorted(update.of("delete") | update.of("replace"))
    # The default queue is guaranteed what no team is, and may borrow the rest; the data bucket's
    # lifecycle gains the team's run-output expiry rule (tests/plan/test_team_run_expiry.py).
    updated = {s.type.rsplit(":", 1)[1] for s in update.of("update").values()}
    assert updated <= {"ClusterQueue", "BucketLifecycleConfiguration"}, updated


def test_teams_must_say_whether_the_default_queue_stays(tmp_path: Any) -> None:
    code, err = plan_exit(with_teams(None), tmp_path)
    assert code == 2 and err.startswith("queueing.defaultQueue: required once teams are defined"), err


def test_without_the_default_queue_a_run_must_name_a_team_and_is_told_what_moving_costs(tmp_path: Any) -> None:
    code, err = plan_exit(with_teams({"defaultQueue": False}), tmp_path)
    assert code == 2 and "workloads.llama2.team: required when teams are defined" in err, err
    assert "starts again from step 0" in err


def test_moving_a_run_into_a_team_on_purpose_replaces_it_in_the_team_namespace() -> None:
    """What naming a team does to a run that ran without one: its objects are made anew in the
    team's namespace (the old ones deleted), and the `training` namespace stays with the default
    queue for other runs."""
    before = stack_plan(STACK)
    after = run_plan(with_teams({"defaultQueue": True}, move_runs_to="research"), STACK)
    update = day2.diff(before, after)
    (training,) = [
        r["urn"]
        for r in before["resources"]
        if r["type"] == NAMESPACE and r["inputs"]["metadata"]["name"] == "training"
    ]
    assert update.steps[training].op == "same"
    moved = {
        u for u in run_objects(before) if ":workloads:Workload" in u or "mpijob" in u.lower() or "job" in u.lower()
    }
    assert moved and all(update.steps[u].op in ("delete", "replace") for u in moved if u in update.steps)


def test_beside_teams_the_default_queue_is_guaranteed_what_no_team_is() -> None:
    """Kueue (tests/upstream/kueue-cohort-reclaim-v0.19.2.yaml): the default queue's runs keep
    running; what they use beyond the nodes no team is guaranteed is borrowed, and a team's pending
    run reclaims it by preemption (the run resumes from its checkpoint when readmitted)."""
    facts = upstream.facts("kueue-cohort-reclaim-v0.19.2")
    plan = run_plan(with_teams({"defaultQueue": True}), STACK)
    queues = {
        o["metadata"]["name"]: o["spec"]
        for o in (r["inputs"] for r in plan["resources"])
        if o.get("kind") == "ClusterQueue"
    }
    assert set(queues) == {"default", "research"}
    assert queues["default"]["cohortName"] == queues["research"]["cohortName"]
    (trn1,) = [f for f in queues["default"]["resourceGroups"][0]["flavors"] if f["name"] == "trn1"]
    neuron = {r["name"]: r for r in trn1["resources"]}["aws.amazon.com/neuron"]
    assert neuron == {"name": "aws.amazon.com/neuron", "nominalQuota": str(16 * (4 - 2))}  # 4 nodes, 2 the team's
    reclaim = queues["research"]["preemption"]["reclaimWithinCohort"]
    assert reclaim in facts["reclaim_within_cohort_values"] and reclaim != facts["reclaim_within_cohort_default"]
