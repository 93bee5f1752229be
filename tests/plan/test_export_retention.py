"""Exported run outputs expire from S3; the file system keeps them.

The file system is linked to the data bucket at its root, so each file of `/shared` is exported
under the same key (infra/storage.py). Run outputs now live under `runs/`, so one
lifecycle rule expires them, whatever run or workload comes next,
beside datasets, Hub caches and compile caches that never expire. Sources, at the pinned
botocore's models: S3 PutBucketLifecycleConfiguration (Expiration.Days >= 1;
tests/upstream/botocore-s3-lifecycle.yaml) and FSx AutoImportPolicy (an S3 delete deletes the
file with DELETED imported; tests/upstream/botocore-fsx-auto-import-1.44.18.yaml).
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from pydantic import ValidationError

from config import aws
from config.storage import EXPIRATION_DAYS, EXPORT_RETENTION_DAYS, StorageConfig
from infra.buckets import EXPIRY_RULE_ID, LIFECYCLE_RULE_ID
from tests import upstream
from tests.conftest import resources, run_plan, stack_plan, stack_values
from tests.plan import day2

LIFECYCLE = "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
JOB = "kubernetes:batch/v1:Job"
SHARED = "/shared"
RUNS = "runs"


def data_rules(plan: dict[str, Any]) -> list[dict[str, Any]]:
    (lifecycle,) = [r for r in resources(plan, LIFECYCLE) if r["name"] == "storage-data"]
    return lifecycle["inputs"]["rules"]


def expiring(plan: dict[str, Any]) -> dict[str, int]:
    return {r["filter"]["prefix"]: r["expiration"]["days"] for r in data_rules(plan) if "days" in r["expiration"]}


def edited(stack: str, edit: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    edit(values)
    return run_plan(values, stack)


def scripts(plan: dict[str, Any]) -> list[str]:
    """Every shell script of the plan's Jobs and MPIJobs."""
    text = str([r["inputs"] for r in plan["resources"] if r["type"] in (JOB, MPIJOB)])
    return text.split("set -euo pipefail")


def test_run_outputs_expire_under_one_prefix() -> None:
    """dev: `runs/`, 30 days after export, in a rule of its own beside bounded-versions; it names
    no workload, run, dataset or cache."""
    plan = stack_plan("dev")
    rules = data_rules(plan)
    assert rules[0]["id"] == LIFECYCLE_RULE_ID and rules[0]["filter"] == {"prefix": ""}
    assert expiring(plan) == {"runs/": EXPORT_RETENTION_DAYS}
    assert [r["id"] for r in rules[1:]] == [EXPIRY_RULE_ID]


def test_the_layers_expire_the_same_prefixes() -> None:
    """trn1-shared (teams) and its layered aws stack declare the same rules: `runs/` and each
    team's `teams/<team>/runs/` (tests/plan/test_team_run_expiry.py holds the teams over time)."""
    assert expiring(stack_plan("trn1-shared")) == expiring(stack_plan("trn1-shared-aws"))
    assert expiring(stack_plan("trn1-shared"))["runs/"] == 30


@pytest.mark.parametrize("stack", ["trn1-llama2", "trn1-shared", "p5-train-serve"])
def test_every_run_writes_under_the_expiring_prefix(stack: str) -> None:
    """Checkpoints and the finished marker of every run sit under /shared/runs/ (the prefix the
    rule names); the data and compile caches stay outside it."""
    text = "".join(scripts(stack_plan(stack)))
    written = set(re.findall(r"/shared/(?:[\w.-]+/)+?checkpoints\b", text))
    assert written and all(p.startswith(f"{SHARED}/runs/") for p in written), written
    markers = re.findall(r"touch (\S+/\.trained)", text)
    assert markers and all(p.startswith(f"{SHARED}/runs/") for p in markers), markers
    caches = re.findall(r"/shared/(?:runs/)?[\w.-]+/(?:data|neuron-cache)\b", text)
    assert caches and not any(c.startswith(f"{SHARED}/runs/") for c in caches)


def test_a_next_run_and_a_removed_workload_keep_the_rules() -> None:
    """Day 2: a new runId and a workload removed leave the lifecycle as it is (no rule per run)."""
    before = stack_plan("trn1-shared")
    names = list(stack_values("trn1-shared")["llm-training-eks:workloads"])

    def next_run(v: dict[str, Any]) -> None:
        v["llm-training-eks:workloads"][names[0]]["runId"] = "run-next"

    def removed(v: dict[str, Any]) -> None:
        del v["llm-training-eks:workloads"][names[-1]]

    for edit in (next_run, removed):
        update = day2.diff(before, edited("trn1-shared", edit))
        steps = [s for s in update.steps.values() if s.type == LIFECYCLE]
        assert steps and {s.op for s in steps} == {"same"}, [(s.urn, s.op) for s in steps]


def test_a_new_retention_is_an_update_in_place() -> None:
    """30 -> 60 days, then null: the lifecycle configuration updates in place; the bucket, the
    file system and its link stay."""
    before = stack_plan("dev")
    for days, want in ((60, {"runs/": 60}), (None, {})):

        def retention(v: dict[str, Any], days: int | None = days) -> None:
            v["llm-training-eks:storage"] = {**v.get("llm-training-eks:storage", {}), "exportRetentionDays": days}

        after = edited("dev", retention)
        assert expiring(after) == want
        update = day2.diff(before, after)
        touched = {s.type: s.op for s in update.touched().values() if not s.type.startswith("llm-training-eks:")}
        assert touched == {LIFECYCLE: "update"}, touched
        assert update.blocked == []


def test_the_plan_states_the_retention() -> None:
    from tools.offline.plan_table import _export_retention
    from tools.offline.plan_view import PlanView

    plan = stack_plan("dev")
    view = PlanView(plan)
    (storage,) = [r for r in plan["resources"] if r["type"].endswith(":SharedStorage")]
    line = _export_retention(view, view.children(storage["urn"]))
    assert line.startswith("run outputs in S3 (runs/) expire 30 days after export; the /shared copy stays")


def test_the_retention_is_one_s3_accepts() -> None:
    """Days >= 1, as botocore's s3 model documents it (and config.aws reads it)."""
    facts = upstream.facts("botocore-s3-lifecycle")
    assert facts["expiration_days"] in aws.shape(EXPIRATION_DAYS).documentation
    with pytest.raises(ValidationError, match=r"0 is below the minimum 1 .*Expiration\.Days"):
        StorageConfig.model_validate({"exportRetentionDays": 0})
    assert StorageConfig.model_validate({"exportRetentionDays": 1}).exports_expire_after == 1


def test_an_expiry_never_reaches_the_file_system() -> None:
    """With DELETED imported (syncDeletes), FSx deletes the file when S3 deletes its object, so
    an expiry would delete the /shared copy: the default is then none, and a retention refused."""
    facts = upstream.facts("botocore-fsx-auto-import-1.44.18")
    fsx = botocore.session.get_session().get_service_model("fsx")
    assert facts["import_deleted"] in fsx.shape_for("AutoImportPolicy").members["Events"].documentation
    assert facts["export_deleted"] in fsx.shape_for("AutoExportPolicy").members["Events"].documentation
    assert StorageConfig.model_validate({"syncDeletes": True}).exports_expire_after is None
    with pytest.raises(ValidationError, match="exportRetentionDays: 30 days with syncDeletes"):
        StorageConfig.model_validate({"syncDeletes": True, "exportRetentionDays": 30})
    plan = stack_plan("dev")
    (dra,) = resources(plan, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert dra["inputs"]["s3"]["autoImportPolicy"]["events"] == facts["events_used"]


def launcher_adopt(plan: dict[str, Any], job_name: str) -> str:
    """The line of a training launcher that moves its run's former directory."""
    (job,) = [r for r in plan["resources"] if r["type"] == MPIJOB and r["name"] == job_name]
    text = str(job["inputs"]).replace("\\n", "\n")
    (line,) = [x for x in text.splitlines() if " mv " in x and "if [ -d" in x]
    return line


def bash(script: str, root: Path) -> None:
    subprocess.run(["bash", "-c", "set -euo pipefail\n" + script.replace(SHARED, str(root))], check=True)


def test_a_run_from_before_the_move_keeps_its_outputs(tmp_path: Path) -> None:
    """Over time: a stack deployed before this change has llama2's run-001 in
    /shared/llama2/run-001 with checkpoints. The upgrade replaces the run's MPIJob (its launcher
    script is new), and the new launcher first moves the directory (a rename) and leaves a
    symlink: the new paths find the checkpoints, the old path reaches the same place, data and
    compile cache stay, an older run stays where it is, and the next start changes nothing."""
    plan = stack_plan("trn1-llama2")
    move = launcher_adopt(plan, "llama2-run-001-train")
    root = tmp_path / "fs"
    bash(move, root)  # a new stack: nothing there yet, nothing to move
    assert not (root / RUNS).exists()
    old = root / "llama2"
    (old / "run-000" / "checkpoints").mkdir(parents=True)  # an earlier run, finished
    (old / "run-001" / "checkpoints" / "step_100").mkdir(parents=True)
    (old / "run-001" / "checkpoints" / "step_100" / "model.pt").write_text("weights")
    (old / "data").mkdir()
    (old / "neuron-cache").mkdir()
    new = root / RUNS / "llama2"
    for _ in range(2):
        bash(move, root)
        assert (new / "run-001" / "checkpoints" / "step_100" / "model.pt").read_text() == "weights"
        assert (old / "run-001").is_symlink() and (old / "run-001").resolve() == (new / "run-001").resolve()
        assert sorted(p.name for p in new.iterdir()) == ["run-001"]
        assert all((old / d).is_dir() and not (old / d).is_symlink() for d in ("run-000", "data", "neuron-cache"))
    (old / "run-001" / "checkpoints" / "step_200").mkdir()  # through the old path
    assert (new / "run-001" / "checkpoints" / "step_200").is_dir()
    # No Job writes the run's directory before its launcher (it would make the new place exist
    # first and leave the checkpoints behind): no Job of the stack names it at all.
    jobs = [r for r in plan["resources"] if r["type"] == JOB]
    assert jobs and not [r["name"] for r in jobs if f"{SHARED}/{RUNS}/" in str(r["inputs"])]


def test_every_training_launcher_moves_its_run_first(tmp_path: Path) -> None:
    """ddp-cpu's launcher (dev) moves its run's former directory too, before anything else."""
    plan = stack_plan("dev")
    (job,) = [r for r in plan["resources"] if r["type"] == MPIJOB]
    text = str(job["inputs"]).replace("\\n", "\n")
    (line,) = [x for x in text.splitlines() if " mv " in x and "if [ -d" in x]
    old_dir = line.split("if [ -d ")[1].split(" ]")[0]
    root = tmp_path / "fs"
    local_old = Path(old_dir.replace(SHARED, str(root)))
    (local_old / "checkpoints").mkdir(parents=True)
    bash(line, root)
    assert local_old.is_symlink() and (local_old.resolve() / "checkpoints").is_dir()
    assert local_old.resolve() == (root / RUNS / local_old.relative_to(root)).resolve()
