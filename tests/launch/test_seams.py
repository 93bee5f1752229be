"""The seams the launch chain crosses, each held alone on every example stack whose
recipes meet it: a program's run-time need against what its pod, image and node give it,
enforced here as the real systems enforce it (tests/launch/README.md, "Seams").

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

A scenario sets the other seams aside (`WorkloadRun.set_aside`) so that a failure names its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launch import internet, plans
from tests.launch.harness import Faults, WorkloadRun
from tests.launch.images import describe
from tests.launch.mpioperator import JobController
from tests.launch.netpolicy import reaches_internet
from tests.launch.test_launch_chain import _why_not, tail, twin, workers

if _why_not:
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)


def _nodes(stack: str, workload: str) -> int:
    """The fewest nodes the workload is played at (a whole UltraServer on its members)."""
    return plans.launch_nodes(stack, workload)[0]


def _image(stack: str, workload: str) -> Any:
    return describe(
        plans.containers(plans.training_job(plans.steps(stack, workload, _nodes(stack, workload))))["image"]
    )


WORKLOADS = [(s, w) for s, w, _ in plans.workloads() if not twin(s, w, _nodes(s, w))]
HUB_READERS = [(s, w) for s, w in WORKLOADS if _image(s, w).framework in ("bert", "nemo", "megatron-bridge")]
"""Workloads whose training program reads the Hub (the BERT script, NeMo's tokenizer, Megatron Bridge's
recipe and tokenizer)."""
NEURON = [(s, w) for s, w in WORKLOADS if _image(s, w).neuron_runtime]
"""Workloads on Neuron nodes whose image's runtime library is known (the Neuron DLC's)."""
CUDA = [(s, w) for s, w in WORKLOADS if _image(s, w).cuda_major and _image(s, w).framework == "megatron-bridge"]
"""Workloads of the CUDA 13 image (Megatron Bridge's NGC nemo:26.08), whose driver floor is the highest."""
SSHD_ROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The PATH sshd gives a root session (OpenSSH's superuser default, as Debian and Ubuntu build it)."""
OPEN_MPI_OFF_SSHD_PATH = [
    (s, w)
    for s, w in WORKLOADS
    if _image(s, w).open_mpi and not _image(s, w).system_mpi and f"{_image(s, w).open_mpi}/bin" not in SSHD_ROOT_PATH
]
"""Workloads whose image has Open MPI only outside sshd's PATH (/opt/amazon/openmpi)."""


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    runs: list[WorkloadRun] = []

    def make(stack: str, workload: str) -> WorkloadRun:
        nodes = _nodes(stack, workload)
        run = WorkloadRun(tmp_path / f"{workload}-{nodes}", stack, workload, nodes, faults=True)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()


def assert_gate_passed(run: WorkloadRun, log: str) -> None:
    """The health gate of a launch that runs only its training MPIJob (no data staged, so what
    follows the gate fails): every node checked once, then the collective above its floor."""
    for worker in workers(run.training, run.nodes):
        assert len(re.findall(rf"^OK {worker}: ", log, re.M)) == 1, tail(log)
    assert "OK: all-reduce bus bandwidth" in log, tail(log)


def ranks(run: WorkloadRun) -> list[dict[str, Any]]:
    """What every rank of the training MPIJob recorded (the graph extraction's too)."""
    name = run.training["metadata"]["name"]
    return [r for kind in ("bert", "megatron", "bridge") for r in run.records(name, kind)]


@pytest.mark.parametrize(("stack", "workload"), HUB_READERS)
def test_training_reads_its_hub_files_offline_from_shared(launch: Any, stack: str, workload: str) -> None:
    """Items 1 and 2: a Job with egress stages the Hub files the training program reads onto
    /shared; every rank reads them from there with offline mode on, and its pod cannot reach
    the internet at all."""
    run = launch(stack, workload)
    run.set_aside = {"driver", "mpi"}
    results = run.pipeline(Faults())
    log = run.log()
    assert all(r.succeeded for r in results) and len(results) == len(run.jobs), tail(log)
    worker = plans.pod_spec(run.training)
    labels = run.training["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    assert not reaches_internet(list(run.policies), labels, internet.PORT), "the training pods may reach the internet"
    assert worker["containers"][0]["image"] == run.training_image
    found = ranks(run)
    assert found, tail(log)
    for r in found:
        assert r["env"].get("HF_HUB_OFFLINE") == "1", r["env"]
        assert r["env"]["HF_HUB_CACHE"].startswith("/shared/"), r["env"]
        read = list(r.get("modelFiles", {}).values()) or [r["hubTokenizer"]]
        assert all(read), r
    staged = [
        r for job in run.jobs for kind in ("huggingface-cli", "hf") for r in run.records(job["metadata"]["name"], kind)
    ]
    assert any(str(r["args"].get("cache_dir", "")).startswith("/shared/") for r in staged), staged


@pytest.mark.parametrize(("stack", "workload"), OPEN_MPI_OFF_SSHD_PATH)
def test_the_launcher_starts_orted_from_the_images_open_mpi(launch: Any, stack: str, workload: str) -> None:
    """Item 3: the health gate's mpirun starts its daemon on every worker (then the per-node
    checks and the collective pass), although `orted` is not on sshd's PATH in this image."""
    run = launch(stack, workload)
    run.set_aside = {"driver"}
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert "orted: command not found" not in log, tail(log)
    assert_gate_passed(run, log)


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


@pytest.mark.parametrize(("stack", "workload"), NEURON)
def test_the_nodes_neuron_driver_fits_the_images_runtime(launch: Any, stack: str, workload: str) -> None:
    """Item 4: on the driver of the AMI release the node group runs (plans.node_drivers), the
    per-node check prints the driver and nccom-test's nrt_init accepts it, on every node."""
    run = launch(stack, workload)
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert "NRT:nrt_init" not in log, tail(log)
    assert_gate_passed(run, log)
    driver = plans.node_drivers(stack, workload)["neuron"]
    oks = re.findall(r"^OK \S+: .*, Neuron driver (\S+), self-test passed$", log, re.M)
    assert oks == [driver] * run.nodes, tail(log)


def test_a_driver_the_runtime_cannot_use_fails_the_node_check(launch: Any) -> None:
    """The gate names the driver and the range the image's runtime needs, before nrt_init would."""
    stack, workload = NEURON[0]
    run = launch(stack, workload)
    run.driver_override = "2.29.0.0"
    (result,) = run.pipeline(Faults(max_attempts=1), training_only=True)
    log = result.attempts[0].log
    assert result.attempts[0].exit_code not in (0, None), tail(log)
    runtime = _image(stack, workload).neuron_runtime
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
