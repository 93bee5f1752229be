"""Recipe fsx-read (the shared file system's read acceptance) in example stack p4d, over time: its
pass line follows the file system it is held to, its files leave /shared at every end, it runs
after the fabric acceptance on the same nodes, and its modeled length is on the plan and the
timeline. Upstream: fio 3.42 (axboe/fio tag fio-3.42, tests/upstream/fio-3.42.yaml)."""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any

import pytest

import config
from config import ConfigError
from config.workloads.fsx_read import RAMP_SECONDS
from estimates.fsx_read import read_time
from tests import upstream
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2
from tests.plan.test_acceptance_gate import _children
from tests.upstream.arguments import invocations
from tools.offline.plan_table import render_table

NS = "llm-training-eks:"
FIO = upstream.facts("fio-3.42")


def _mpijob(plan: dict[str, Any], workload: str = "fsx") -> dict[str, Any]:
    (job,) = [r for r in _children(plan, workload) if r["type"].endswith(":MPIJob")]
    return job


def _launcher(job: dict[str, Any]) -> str:
    spec = job["inputs"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    return str(spec["containers"][0]["command"][-1])


def _provisioned(values: dict[str, Any]) -> float:
    """The file system's provisioned MB/s as the stack file states it (FSx: TiB x MB/s per TiB)."""
    return config.parse_stack_values(values).storage.file_system.mb_per_second


def _pass_line(script: str) -> int:
    return int(re.search(r'\[ "\$mb" -ge ([0-9]+) \]', script).group(1))


def test_the_pass_line_is_the_share_of_what_the_file_system_is_provisioned_for() -> None:
    values = stack_values("p4d")
    run = values[NS + "workloads"]["fsx"]
    script = _launcher(_mpijob(stack_plan("p4d")))
    assert _pass_line(script) == round(round(_provisioned(values)) * run.get("minShare", 0.8))
    (fio,) = [w for w in invocations(script, FIO["binary"]) if w]
    given = dict(w[2:].partition("=")[::2] for w in fio)
    assert given["rw"] == "read" and given["direct"] == "1" and "time_based" in given
    assert f'[ "$n" -eq {run["nodes"]} ]' in script  # every node reported, or it fails


def test_raising_the_throughput_later_reruns_it_against_the_new_figure() -> None:
    before_values = stack_values("p4d")
    after_values = copy.deepcopy(before_values)
    after_values[NS + "storage"] = {**after_values[NS + "storage"], "throughputPerTib": 500}
    before, after = stack_plan("p4d"), run_plan(after_values, "p4d")
    share = after_values[NS + "workloads"]["fsx"].get("minShare", 0.8)
    assert _provisioned(after_values) == 2 * _provisioned(before_values)
    assert _pass_line(_launcher(_mpijob(after))) == round(round(_provisioned(after_values)) * share)
    update = day2.diff(before, after, strict=False)
    replaced = {s.urn for s in update.of("replace").values()}
    assert _mpijob(after)["urn"] in replaced  # a new MPIJob: the run plays again, not an edit of a finished one
    changed = replaced | {s.urn for s in update.of("update").values()}
    assert _mpijob(after, "fabric")["urn"] not in changed  # the fabric's figures are not the file system's


def test_its_files_leave_shared_however_fio_ends_and_a_replay_starts_clean() -> None:
    script = _launcher(_mpijob(stack_plan("p4d")))
    (line,) = [ln for ln in script.splitlines() if ln.startswith("$MPIRUN bash -c ")]
    per_node = shlex.split(line)[3]
    assert re.search(r"fio .* \|\| rc=\$\?; rm -rf \"\$d\"; exit \$rc$", per_node), per_node
    # A replaced MPIJob plays in the same directory: it starts without the earlier play's JSON.
    cleared = script.index('rm -rf "$RUN_DIR/reads"')
    assert cleared < script.index("$MPIRUN bash -c ") < script.index("sums=$(")


def test_it_runs_after_the_fabric_acceptance_on_the_same_nodes() -> None:
    plan = stack_plan("p4d")
    fabric = _mpijob(plan, "fabric")["urn"]
    assert all(fabric in r["dependencies"] for r in _children(plan, "fsx"))


def test_its_modeled_length_is_priced_and_too_long_a_run_is_refused() -> None:
    run = config.parse_stack_values(stack_values("p4d")).workloads["fsx"]
    length = read_time(run.nodes, run.jobs_per_node, run.file_size_gib, RAMP_SECONDS, run.read_seconds)
    assert f"acceptance run fsx: 2 x p4d.24xlarge for ~{length.seconds} s" in render_table(stack_plan("p4d"))
    values = copy.deepcopy(stack_values("p4d"))
    values[NS + "workloads"]["fsx"].update(fileSizeGib=64, jobsPerNode=64)
    with pytest.raises(ConfigError, match=r"workloads\.fsx\.fileSizeGib: .* more than the 1,800 s"):
        config.parse_stack_values(values)
