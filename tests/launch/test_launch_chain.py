"""The launch chain, run for real: every MPIJob of every example stack (planned at 2 and 3
nodes) on a local cluster of pods (network, UTS, mount and PID namespaces) with real sshd,
Open MPI's mpirun and torchrun over gloo; only the framework entry points are stand-ins.
See tests/launch/README.md for what is modelled and what is not.

Scenarios: the health check passes and gates training, which completes (every workload); per
recipe, a failing per-node check stops the run at once naming the node, a worker killed mid-run
fails the launcher and the restarted launcher resumes from the latest checkpoint (the README's
failure drill), and a worker that never comes up makes the launcher give up naming it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launch import plans
from tests.launch.harness import RANKS_PER_NODE, Faults, WorkloadRun, checkpoint_step
from tests.launch.pods import namespaces_available

_why_not = namespaces_available() or (
    None if importlib.util.find_spec("torch") else "no PyTorch (pip install -r requirements-launch.txt)"
)
if _why_not:
    if os.environ.get("LAUNCH_HARNESS_REQUIRED"):  # .ci/run: root on a fresh machine, so it must run
        raise RuntimeError(f"launch-chain harness cannot run: {_why_not}")
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)

PER_RECIPE = list({recipe: (stack, wl) for stack, wl, recipe in reversed(plans.workloads())}.values())
NODES = (2, 3)
# Every MPIJob of every example stack at 2 nodes; each recipe at 3 nodes too.
EVERY_JOB = [(stack, wl, 2) for stack, wl, _ in plans.workloads()] + [(stack, wl, 3) for stack, wl in PER_RECIPE]
LOST_DAEMON = r"ORTE has lost communication with a remote daemon|ORTE was unable to reliably start one or more daemons"

# Defects of the rendered workloads that issue 12 fixes. A scenario they break is an expected
# failure only when the log shows that very cause; any other failure fails, and once the cause
# is gone the test fails until its entry here is removed.
KNOWN = {
    ("gate", "neuron"): (
        "issue 12 defect 5: the multi-node nccom-test runs without NEURON_RT_ROOT_COMM_ID",
        r"nccom-test: NEURON_RT_ROOT_COMM_ID=.* must be set",
    ),
    ("kill", "custom"): (
        "issue 12 defect 10: the BERT command never passes --resume_ckpt, so the restart starts over",
        r"^LOG .* - \(0, 1\) step_loss",
    ),
}


def recipe_of(stack: str, workload: str) -> str:
    return next(r for s, w, r in plans.workloads() if (s, w) == (stack, workload))


def accelerator(job: dict[str, Any]) -> str:
    limits = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    return next(r for r in ("aws.amazon.com/neuron", "nvidia.com/gpu") if r in limits)


def known_defect(scenario: str, stack: str, workload: str) -> tuple[str, str] | None:
    job = plans.mpijobs(stack, workload, 2)[-1]
    keys = (recipe_of(stack, workload), "neuron" if "neuron" in accelerator(job) else "nvidia")
    return next((KNOWN[(scenario, k)] for k in keys if (scenario, k) in KNOWN), None)


def expect_known(defect: tuple[str, str] | None, log: str, passed: bool) -> None:
    """xfail when the known defect's own message is in the log; fail if it is fixed."""
    if defect is None:
        return
    reason, cause = defect
    if re.search(cause, log, re.M):
        pytest.xfail(reason)
    if passed:
        pytest.fail(f"fixed, remove it from KNOWN: {reason}")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    runs: list[WorkloadRun] = []

    def make(stack: str, workload: str, nodes: int) -> WorkloadRun:
        run = WorkloadRun(tmp_path / f"{workload}-{nodes}", stack, workload, nodes)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(line for line in text.splitlines() if "NumPy" not in line and "_conversion_method" not in line)[
        -6000:
    ]


def training_job(run: WorkloadRun) -> dict[str, Any]:
    return next(j for j in reversed(run.jobs) if plans.component(j) == "train")


def assert_trained(run: WorkloadRun, job: dict[str, Any], resumed_from: int | None = None) -> None:
    """Every rank joined (right rank and world size, checked inside) and training finished."""
    name = job["metadata"]["name"]
    kind = "megatron" if "megatron_gpt_pretraining.py" in plans.launcher_script(job) else "bert"
    ranks = run.records(name, kind)
    world = run.nodes * int(RANKS_PER_NODE)
    assert sorted(r["rank"] for r in ranks) == list(range(world)), f"ranks that joined: {ranks and len(ranks)}"
    assert {r["world"] for r in ranks} == {world}
    assert run.records(name, f"{kind}-done"), "training did not finish"
    if resumed_from is not None:
        assert {r["resumedFrom"] for r in ranks} == {resumed_from}


@pytest.mark.parametrize(("stack", "workload", "nodes"), EVERY_JOB)
def test_health_check_gates_training_which_completes(launch: Any, stack: str, workload: str, nodes: int) -> None:
    run = launch(stack, workload, nodes)
    results = run.pipeline(Faults())
    log = "\n".join(r.log() for r in results)
    expect_known(known_defect("gate", stack, workload), log, all(r.succeeded for r in results))
    assert [r.name for r in results] == [j["metadata"]["name"] for j in run.jobs], tail(log)
    assert all(r.succeeded for r in results), tail(log)
    for job, result in zip(run.jobs, results, strict=True):
        if plans.component(job) == "health-check":
            for i in range(nodes):
                assert re.search(rf"^OK {job['metadata']['name']}-worker-{i}: ", result.log(), re.M), tail(result.log())
            assert "OK: all-reduce bus bandwidth" in result.log()
        if plans.component(job) == "precompile":
            assert run.records(job["metadata"]["name"], "neuron_parallel_compile"), tail(result.log())
            assert list((run.shared).rglob("model.neff")), "no compiled graph in the cache on /shared"
    assert_trained(run, training_job(run))


@pytest.mark.parametrize("nodes", NODES)
@pytest.mark.parametrize(("stack", "workload"), PER_RECIPE)
def test_failing_node_check_stops_training_at_once(launch: Any, stack: str, workload: str, nodes: int) -> None:
    run = launch(stack, workload, nodes)
    bad = nodes - 1
    # The compile cache is not part of the gate: start at the first job after it.
    faults = Faults(missing_device={accelerator(run.jobs[-1]): bad})
    results = run.pipeline(faults, only=lambda job: plans.component(job) != "precompile")
    failed = next((r for r in results if not r.succeeded), None)
    assert failed is not None, "every job passed with a device missing"
    worker = f"{failed.name}-worker-{bad}"
    assert re.search(rf"^FAIL {worker}: \d+ of \d+ ", failed.attempts[0].log, re.M), tail(failed.log())
    assert failed.attempts[0].seconds < 20, f"the check took {failed.attempts[0].seconds:.0f}s"
    train = training_job(run)["metadata"]["name"]
    assert not run.records(train, "megatron") and not run.records(train, "bert"), "training ran"


@pytest.mark.parametrize("nodes", NODES)
@pytest.mark.parametrize(("stack", "workload"), PER_RECIPE)
def test_killed_worker_fails_the_launcher_and_the_restart_resumes(
    launch: Any, stack: str, workload: str, nodes: int
) -> None:
    """The README's failure drill, step by step."""
    run = launch(stack, workload, nodes)
    job = training_job(run)
    killed = nodes - 1
    result = run.run(job, Faults(kill=killed))
    first, *later = result.attempts
    host = f"{job['metadata']['name']}-worker-{killed}"
    # 2. mpirun loses the worker (its ssh session to the worker ends; Open MPI 4.1 reports
    # the lost daemon, or, when the ssh end comes first, a daemon it could not keep) and the
    # launcher fails.
    assert first.exit_code not in (0, None), tail(first.log)
    assert re.search(rf"^Connection to {host}\.\S+ closed by remote host", first.log, re.M), tail(first.log)
    assert re.search(LOST_DAEMON, first.log), tail(first.log)
    # 4. The launcher comes back, waits for the recreated worker, and training resumes.
    assert later, "the launcher was not restarted"
    assert re.search(rf"^waiting for worker {host}\.", later[0].log, re.M), tail(later[0].log)
    assert result.succeeded, tail(result.log())
    expect_known(known_defect("kill", stack, workload), "".join(a.log for a in later), False)
    assert run.killed_checkpoints, "the worker was killed before any checkpoint"
    assert_trained(run, job, resumed_from=max(checkpoint_step(n) for n in run.killed_checkpoints))
    expect_known(known_defect("kill", stack, workload), "", True)


@pytest.mark.parametrize("nodes", NODES)
@pytest.mark.parametrize(("stack", "workload"), PER_RECIPE)
def test_worker_that_never_comes_up_is_named(launch: Any, stack: str, workload: str, nodes: int) -> None:
    run = launch(stack, workload, nodes)
    job = training_job(run)
    missing = nodes - 1
    result = run.run(job, Faults(never_up=(missing,)), wait_seconds=3, max_attempts=1)
    attempt = result.attempts[0]
    host = f"{job['metadata']['name']}-worker-{missing}.{job['metadata']['name']}.{job['metadata']['namespace']}.svc"
    assert attempt.exit_code not in (0, None), tail(attempt.log)
    assert f"FAIL: worker {host} did not answer within 3s" in attempt.log, tail(attempt.log)
    assert attempt.seconds < 12, f"gave up after {attempt.seconds:.0f}s"
