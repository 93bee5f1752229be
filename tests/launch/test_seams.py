"""The seams the launch chain crosses, each broken alone on an example stack whose recipes meet
it: a program's run-time need against what its pod, image and node give it, enforced here as the
real systems enforce it (tests/launch/README.md, "Seams"). That each need is met is held on every
launch of every workload by the gate test (test_launch_chain.py, tests/launch/seams.py
`assert_held`); here the harness shows it would catch each one unmet.

- The Hub (items 1 and 2): the BERT script's from_pretrained('bert-large-uncased'), NeMo's
  GPT2BPETokenizer (AutoTokenizer "gpt2") and Megatron Bridge's recipes (AutoBridge.from_hf_pretrained
  of the model repository, its tokenizer) read Hub files in every rank. Only pods whose
  NetworkPolicies allow it reach the stand-in internet; without egress a Hub call falls back to
  the cache and fails without one.
- Open MPI's daemons (item 3): in the NeMo image Open MPI lives only in /opt/amazon/openmpi, so
  a bare `mpirun` (found on the image's PATH) asks sshd's PATH for `orted` on the workers.
- The Neuron driver (item 4): each node shows its AMI release's driver in
  /sys/module/neuron/version, and the Neuron stand-ins refuse one the image's runtime library
  cannot use, as nrt_init does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launch import plans
from tests.launch.harness import Faults, WorkloadRun
from tests.launch.mpioperator import JobController
from tests.launch.seams import first_nodes, image_of, open_mpi_off_sshd_path, reads_hub
from tests.launch.test_launch_chain import _why_not, tail, twin

if _why_not:
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)


WORKLOADS = [(s, w) for s, w, _ in plans.workloads() if not twin(s, w, first_nodes(s, w))]
HUB_READERS = [(s, w) for s, w in WORKLOADS if reads_hub(image_of(s, w))]
"""Workloads whose training program reads the Hub (the BERT script, NeMo's tokenizer, Megatron Bridge's
recipe and tokenizer)."""
NEURON = [(s, w) for s, w in WORKLOADS if image_of(s, w).neuron_runtime]
"""Workloads on Neuron nodes whose image's runtime library is known (the Neuron DLC's)."""
CUDA = [(s, w) for s, w in WORKLOADS if image_of(s, w).cuda_major and image_of(s, w).framework == "megatron-bridge"]
"""Workloads of the CUDA 13 image (Megatron Bridge's NGC nemo:26.08), whose driver floor is the highest."""
OPEN_MPI_OFF_SSHD_PATH = [(s, w) for s, w in WORKLOADS if open_mpi_off_sshd_path(image_of(s, w))]
"""Workloads whose image has Open MPI only outside sshd's PATH (/opt/amazon/openmpi)."""


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    runs: list[WorkloadRun] = []

    def make(stack: str, workload: str) -> WorkloadRun:
        nodes = first_nodes(stack, workload)
        run = WorkloadRun(tmp_path / f"{workload}-{nodes}", stack, workload, nodes, faults=True)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


@pytest.mark.parametrize(("stack", "workload"), OPEN_MPI_OFF_SSHD_PATH)
def test_a_bare_mpirun_cannot_start_orted_there(launch: Any, stack: str, workload: str) -> None:
    """The harness holds the need: the same launcher with `mpirun` by name fails as Open MPI does."""
    run = launch(stack, workload)
    launcher = run.training["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    script = launcher["command"][-1]
    launcher["command"][-1] = re.sub(r"MPIRUN='\S+/bin/mpirun ", "MPIRUN='mpirun ", script)
    assert launcher["command"][-1] != script, "the launcher does not call mpirun by path"
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert "orted: command not found" in log and "ORTE was unable to reliably start" in log, tail(log)


def test_a_driver_the_runtime_cannot_use_fails_the_node_check(launch: Any) -> None:
    """The gate names the driver and the range the image's runtime needs, before nrt_init would."""
    stack, workload = NEURON[0]
    run = launch(stack, workload)
    run.driver_override = "2.29.0.0"
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert result.attempts[0].exit_code not in (0, None), tail(log)
    runtime = image_of(stack, workload).neuron_runtime
    expected = rf"^FAIL \S+: Neuron driver 2\.29\.0\.0, but the image's Neuron runtime {re.escape(runtime)} needs driver < 2\.29"
    assert re.search(expected, log, re.M), tail(log)
    assert "== training" not in log


@pytest.mark.parametrize(("stack", "workload"), CUDA[:1])
def test_an_nvidia_driver_older_than_the_images_cuda_fails_the_node_check(
    launch: Any, stack: str, workload: str
) -> None:
    """A node whose AMI has a CUDA 12 driver (575) under the CUDA 13 image: the gate names the
    driver and the floor before CUDA would refuse it in every rank; on the node group's own AMI
    (plans.node_drivers) the gate passes it."""
    run = launch(stack, workload)
    run.driver_override = "575.57.08"
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert result.attempts[0].exit_code not in (0, None), tail(log)
    expected = r"^FAIL \S+: NVIDIA driver 575\.57\.08, but the image's CUDA 13 needs driver >= 580"
    assert re.search(expected, log, re.M), tail(log)
    assert "== training" not in log


def test_a_pod_without_egress_cannot_reach_the_hub(launch: Any) -> None:
    """The staging Job with its egress label taken away: its download fails to connect."""
    stack, workload = HUB_READERS[0]
    run = launch(stack, workload)
    (job,) = [j for j in run.jobs if plans.component(j) == "data" and "-hub-" in j["metadata"]["name"]]
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.endswith("/egress")}
    result = JobController(run.cluster, job, run.facts(job), {}, run.policies, run.node()).run()
    log = result.attempts[0].log
    assert not result.succeeded and "cannot be reached" in log, tail(log)
