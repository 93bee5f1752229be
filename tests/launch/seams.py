"""The seams a launch crosses, as the happy path of every workload holds them (test_launch_chain's
gate test calls `assert_held` on each launch) and as test_seams.py breaks them one at a time:

- the Hub: a training program that reads Hub files (the BERT script, NeMo's tokenizer, Megatron
  Bridge's recipes) reads them offline from /shared, where a Job with egress staged them, and its
  pods cannot reach the internet;
- Open MPI's daemons: in an image whose Open MPI lives outside sshd's PATH, the launcher's mpirun
  (by path) starts `orted` on every worker;
- the Neuron driver: every node shows the driver of the AMI release its group runs, and the
  image's runtime library accepts it (nrt_init).
"""

from __future__ import annotations

import re
from typing import Any

from tests.launch import internet, plans
from tests.launch.harness import JobResult, WorkloadRun
from tests.launch.images import describe
from tests.launch.netpolicy import reaches_internet

SSHD_ROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The PATH sshd gives a root session (OpenSSH's superuser default, as Debian and Ubuntu build it)."""
HUB_FRAMEWORKS = ("bert", "nemo", "megatron-bridge")
"""Images whose training program reads the Hub."""


def first_nodes(stack: str, workload: str) -> int:
    """The fewest nodes the workload is played at (a whole UltraServer on its members)."""
    return plans.launch_nodes(stack, workload)[0]


def image_of(stack: str, workload: str) -> Any:
    """What the image of the workload's training MPIJob holds (tests.launch.images)."""
    nodes = first_nodes(stack, workload)
    return describe(plans.containers(plans.training_job(plans.steps(stack, workload, nodes)))["image"])


def reads_hub(image: Any) -> bool:
    return image.framework in HUB_FRAMEWORKS


def open_mpi_off_sshd_path(image: Any) -> bool:
    return bool(image.open_mpi) and not image.system_mpi and f"{image.open_mpi}/bin" not in SSHD_ROOT_PATH


def tail(log: str, lines: int = 60) -> str:
    return "\n".join(log.splitlines()[-lines:])


def ranks(run: WorkloadRun) -> list[dict[str, Any]]:
    """What every rank of the training MPIJob recorded (the graph extraction's too)."""
    name = run.training["metadata"]["name"]
    return [r for kind in ("bert", "megatron", "bridge") for r in run.records(name, kind)]


def assert_hub_read_offline(run: WorkloadRun, log: str) -> None:
    """Every rank read its Hub files with offline mode on from the cache on /shared, which a Job
    staged there; the training pods cannot reach the internet at all."""
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


def assert_node_driver(run: WorkloadRun, log: str) -> None:
    """Each node's check printed the AMI release's Neuron driver, and nrt_init accepted it."""
    assert "NRT:nrt_init" not in log, tail(log)
    driver = plans.node_drivers(run.stack, run.workload)["neuron"]
    oks = re.findall(r"^OK \S+: .*, Neuron driver (\S+), self-test passed$", log, re.M)
    assert oks == [driver] * run.nodes, tail(log)


def assert_held(run: WorkloadRun, results: list[JobResult], log: str) -> None:
    """The seams of a whole launch that succeeded (`log`: its training MPIJob's first attempt)."""
    image = describe(run.training_image)
    if open_mpi_off_sshd_path(image):
        assert "orted: command not found" not in log, tail(log)
    if image.neuron_runtime:
        assert_node_driver(run, log)
    if reads_hub(image):
        assert_hub_read_offline(run, log)
