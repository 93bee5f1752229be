"""Day 2 on the shared file system: growing it is an update in place, and the claims' storage
request does not follow it (the PersistentVolumeClaimResize admission refuses to resize a claim
whose StorageClass does not allow expansion)."""

from __future__ import annotations

import copy
from typing import Any

from tests import upstream
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "trn1-shared"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
PVC, PV = "kubernetes:core/v1:PersistentVolumeClaim", "kubernetes:core/v1:PersistentVolume"


def with_storage(**storage: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:storage"] = {**values.get("llm-training-eks:storage", {}), **storage}
    return run_plan(values, STACK)


def test_growing_the_file_system_patches_no_claims_request() -> None:
    """1200 -> 2400 GiB: FSx grows in place; each team's volume shows the new capacity; no claim's
    storage request changes, which the API server would refuse for a static volume's claim."""
    before, after = stack_plan(STACK), with_storage(storageCapacityGib=2400)
    update = day2.diff(before, after)
    # Components (a run's checkpoint plan follows the new throughput) are no cloud resources.
    touched = {u: s for u, s in update.touched().items() if not s.type.startswith("llm-training-eks:")}
    assert {s.type for s in touched.values()} == {FSX, PV}, {u: s.op for u, s in touched.items()}
    assert all(s.op == "update" for s in touched.values())
    (fs,) = [s for s in touched.values() if s.type == FSX]
    assert fs.changed == ("storageCapacity",)
    claims = [r for r in after["resources"] if r["type"] == PVC]
    assert claims and all(r["ignoreChanges"] == ["spec.resources.requests.storage"] for r in claims)
    refused = upstream.facts("kubernetes-pvc-resize-admission")["refuses_growth_of"]
    assert all(r["inputs"]["spec"]["storageClassName"] == "" for r in claims), refused


def test_a_new_stack_requests_what_its_file_system_holds() -> None:
    plan = with_storage(storageCapacityGib=4800)
    claims = [r for r in plan["resources"] if r["type"] == PVC]
    assert {r["inputs"]["spec"]["resources"]["requests"]["storage"] for r in claims} == {"4800Gi"}


def test_a_team_named_default_is_refused(tmp_path: Any) -> None:
    """A first team `default` would take over the volume of the stack without
    teams (its URN and name), still bound to the old `training` claim: the team's claim would
    never bind. Refused, naming the key."""
    from tests.conftest import plan_exit

    values = copy.deepcopy(stack_values(STACK))
    values["llm-training-eks:teams"] = {"default": {"nodeGroup": "trn1", "nodes": 4, "priority": 10}}
    for run in values["llm-training-eks:workloads"].values():
        run["team"] = "default"
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and err.startswith("teams.default: 'default' names the queue and the shared volume"), err


def test_shrinking_or_a_new_lustre_version_would_stop_mid_update_so_preflight_refuses_it() -> None:
    """Item 21: 2400 -> 1200 GiB, or Lustre 2.15 -> 2.12, replaces the file system, and protect
    stops the update there (after everything before it has changed). The offline plan knows no
    deployed value; preflight reads the live one and refuses the edit before anything changes."""
    import config
    from tools.aws import storage_checks
    from tools.aws.account import DeployedFileSystem

    before = with_storage(storageCapacityGib=2400)
    for edit in ({"storageCapacityGib": 1200}, {"storageCapacityGib": 2400, "lustreVersion": "2.12"}):
        update = day2.diff(before, with_storage(**edit))
        (fs,) = [s for s in update.steps.values() if s.type == FSX]
        assert (fs.op, fs.blocked) == ("replace", True), edit
        assert update.blocked == [fs.urn]

        class Deployed:
            def file_system(self, cluster: str) -> DeployedFileSystem:
                return DeployedFileSystem("fs-0123456789abcdef0", 2400, "2.15", "PERSISTENT_2")

        values = copy.deepcopy(stack_values(STACK))
        values["llm-training-eks:storage"] = {**values.get("llm-training-eks:storage", {}), **edit}
        cfg = config.parse_stack_values(values)
        (refused,) = [f for f in storage_checks.check_file_system(Deployed(), cfg) if not f.ok]  # type: ignore[arg-type]
        assert refused.message.startswith(f"storage.{next(iter(edit)) if len(edit) == 1 else 'lustreVersion'}:")
