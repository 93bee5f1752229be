"""Node health and repair, one remediator, per-node health checks, and training that
resumes from its latest checkpoint after a lost node."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from typing import Any

import pytest

import config
from tests import upstream
from tests.conftest import resources, stack_plan, stack_values
from workloads.manifests.mpijob import SSH_OPTIONS

RELEASE = "kubernetes:helm.sh/v3:Release"
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
WORKLOAD_STACKS = ["p4de-nemo", "p5en-megatron-bridge", "trn1-bert", "trn1-llama2", "trn1-shared"]


def releases(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["name"]: r["inputs"] for r in resources(plan, RELEASE)}


def jobs(stack: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r["inputs"] for r in resources(stack_plan(stack), MPIJOB)}


def launcher_script(job: dict[str, Any]) -> str:
    (c,) = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return str(c["command"][2])


def worker_env(job: dict[str, Any]) -> dict[str, str]:
    (c,) = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in c["env"]}


# --------------------------------------------------------------------------- node health and repair


def test_node_monitoring_agent_and_repair_on_every_accelerated_node_group(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    addons = {r["inputs"]["addonName"] for r in resources(plan, "aws:eks/addon:Addon")}
    assert "eks-node-monitoring-agent" in addons
    groups = [
        r
        for r in resources(plan, "aws:eks/nodeGroup:NodeGroup")
        if r["inputs"]["labels"]["llm-training-eks/node-group"] != "system"
    ]
    assert groups
    for ng in groups:
        repair = ng["inputs"]["nodeRepairConfig"]
        assert repair["enabled"] is True, ng["name"]
        assert repair["nodeRepairConfigOverrides"], ng["name"]


def test_exactly_one_component_remediates(example_stack: str) -> None:
    """EKS node auto repair remediates; the Neuron detector only reports (GPU health metrics come
    from the CloudWatch add-on's DCGM exporter: tests/plan/test_observability.py)."""
    found = releases(stack_plan(example_stack))
    if "neuron" in found:
        npd = found["neuron"]["values"]["npd"]
        assert npd["enabled"] is True and npd["nodeRecovery"] == {"enabled": False}


# --------------------------------------------------------------------------- health check


@pytest.mark.parametrize(("stack", "device_check", "collective"), [
    ("trn1-llama2", "ls /dev/neuron*", "/opt/aws/neuron/bin/nccom-test -r 128 -N 4"),
    ("trn1-bert", "ls /dev/neuron*", "/opt/aws/neuron/bin/nccom-test -r 64 -N 2"),
    ("p4de-nemo", "nvidia-smi -L", "/opt/nccl-tests/build/all_reduce_perf"),
])  # fmt: skip
def test_every_training_launch_checks_its_own_nodes_first(stack: str, device_check: str, collective: str) -> None:
    """The gate runs in the training launcher, on the nodes training got, at every (re)start,
    before training: a separate health-check workload can be admitted onto other nodes of a
    larger group, and its failure would show only as a timeout that also has to cover admission
    and image pulls."""
    assert not [n for n in jobs(stack) if n.endswith("-healthcheck")]
    (job,) = [j for n, j in jobs(stack).items() if n.endswith("-train")]
    script = launcher_script(job)
    node = script.index("$MPIRUN bash -c")
    assert node < script.index(collective) < script.index('echo "== training"')
    per_node = script[node : script.index(collective)]
    for needle in (device_check, "/dev/infiniband/uverbs", "EFA devices"):
        assert needle in per_node
    assert ("nccom-test -r 32 -b 64M" in per_node) or ("dcgmi diag -r 1" in per_node)


def test_multi_node_nccom_test_runs_on_the_first_worker_with_its_root_comm_id() -> None:
    """nccom-test -N > 1 needs NEURON_RT_ROOT_COMM_ID=<first host IP>:<port>
    (tests/upstream/nccom-test-2.29.1.yaml); it runs on the first worker, by absolute path."""
    script = launcher_script(jobs("trn1-llama2")["llama2-run-001-train"])
    (line,) = [ln for ln in script.splitlines() if "nccom-test -r 128" in ln]
    # over ssh with the ssh options of mpirun: the image's ssh_config (host-key checking, with a
    # read-only .ssh) is not relied on, as the mpi-operator base image does (kubeflow/mpi-operator#580)
    assert line.startswith(f'ssh {SSH_OPTIONS} "$first" "')
    assert "NEURON_RT_ROOT_COMM_ID=$root:29400 /opt/aws/neuron/bin/nccom-test" in line
    assert 'first=$(head -n 1 /etc/mpi/hostfile | cut -d" " -f1)' in script
    assert "root=${ips%% *}" in script and "--hosts $ips" in line


def test_gpu_gate_fails_when_nccl_does_not_use_efa() -> None:
    """The fabric is checked with the training image (a check from another image can pass while
    training falls back to NCCL over TCP), and the check fails
    unless NCCL reports the aws-ofi-nccl network (tests/upstream/aws-ofi-nccl-v1.13.2-aws.yaml)."""
    job = jobs("p4de-nemo")["nemo-run-001-train"]
    script = launcher_script(job)
    assert "-x NCCL_DEBUG=INFO" in script
    assert "grep -q 'Using network Libfabric' /tmp/out ||" in script
    (c,) = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    (w,) = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert c["image"] == w["image"] and "/nemo:" in c["image"]


def test_expected_counts_come_from_the_catalog() -> None:
    script = launcher_script(jobs("p4de-nemo")["nemo-run-001-train"])
    assert '"$dev" -eq 8' in script and '"$efa" -eq 4' in script  # p4de: 8 A100, 4 EFA cards
    script = launcher_script(jobs("trn1-llama2")["llama2-run-001-train"])
    assert '"$dev" -eq 16' in script and '"$efa" -eq 8' in script  # trn1: 16 Trainium, 8 EFA cards


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_every_launcher_script_is_valid_bash(stack: str) -> None:
    for name, job in jobs(stack).items():
        script = launcher_script(job)
        snippets = [script]
        for quoted in re.findall(r"\$MPIRUN bash -c ('(?:[^']|'\"'\"')*')", script):
            snippets.append(shlex.split(quoted)[0])
        for text in snippets:
            done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True, check=False)
            assert done.returncode == 0, (name, done.stderr)


# --------------------------------------------------------------------------- training that survives


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_launcher_waits_for_its_workers_before_mpirun(stack: str) -> None:
    for name, job in jobs(stack).items():
        script = launcher_script(job)
        wait = script.index("until ssh")
        assert wait < script.index("export MPIRUN"), name
        assert "/etc/mpi/hostfile" in script[:wait]
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]
        assert launcher["restartPolicy"] == "OnFailure"
        assert launcher["template"]["spec"]["nodeSelector"] == {"llm-training-eks/node-group": "system"}
        assert job["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize("stack", WORKLOAD_STACKS)
def test_retries_are_bounded_by_config(stack: str) -> None:
    for name, w in stack_values(stack)["llm-training-eks:workloads"].items():
        run = w["runId"]
        want = w.get("maxRetries", 3)
        assert jobs(stack)[f"{name}-{run}-train"]["spec"]["runPolicy"]["backoffLimit"] == want


@pytest.mark.parametrize(("stack", "workload"), [("trn1-llama2", "llama2"), ("p4de-nemo", "nemo")])
def test_nemo_recipes_resume_from_the_latest_checkpoint(stack: str, workload: str) -> None:
    job = jobs(stack)[f"{workload}-run-001-train"]
    script = launcher_script(job)
    run_dir = f"/shared/runs/{workload}/run-001"
    for arg in (
        "exp_manager.resume_if_exists=True",
        "exp_manager.resume_ignore_no_checkpoint=True",
        f"exp_manager.explicit_log_dir={run_dir}",  # NeMo saves to and resumes from <log dir>/checkpoints
        "exp_manager.create_checkpoint_callback=True",
    ):
        assert arg in script
    cfg = config.parse(config.from_stack_values(stack_values(stack)))
    every = cfg.workloads[workload].training.checkpoint_every_steps  # type: ignore[union-attr]
    assert f"every_n_train_steps={every}" in script
    env = worker_env(job)
    assert env["CHECKPOINT_DIR"] == f"{run_dir}/checkpoints"
    # NeMo r2.0.0rc1 resumes only from *last checkpoints (tests/upstream/nemo-r2.0.0rc1.yaml);
    # neuronx-nemo-megatron 0.8.0 from the newest *.ckpt, so its config's save_last: False is fine.
    resume = "+exp_manager.checkpoint_callback_params.save_last=True"
    assert (resume in script) == (workload == "nemo")


@pytest.mark.parametrize(("stack", "workload"), [("trn1-bert", "bert"), ("trn1-shared", "bert-research")])
def test_bert_resumes_from_its_newest_checkpoint(stack: str, workload: str) -> None:
    """The BERT script resumes only with --resume_ckpt, and refuses it when
    its output directory has no ckpt_<step>.pt (tests/upstream/dp-bert-hf-pretrain-v2.27.0.yaml)."""
    job = jobs(stack)[f"{workload}-run-001-train"]
    ckpt = f"/shared/runs/{workload}/run-001/checkpoints"
    assert worker_env(job)["CHECKPOINT_DIR"] == ckpt
    script = launcher_script(job)
    assert f'if compgen -G "{ckpt}/ckpt_*.pt" >/dev/null; then r=--resume_ckpt; fi;' in script
    train = script[script.index('echo "== training"') : script.index('echo "== done"')]
    assert f"--output_dir={ckpt}" in train and train.rstrip().endswith(" $r'")
    # Only a finished run marks itself (a serving run's conversion waits for the mark).
    assert script.rstrip().endswith(f"touch /shared/runs/{workload}/run-001/.trained")


def test_workers_are_guaranteed_qos_so_they_are_evicted_last(example_stack: str) -> None:
    for r in resources(stack_plan(example_stack), MPIJOB):
        (c,) = r["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        assert c["resources"]["requests"] == c["resources"]["limits"]
        assert "cpu" in c["resources"]["requests"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("found", "ok"), [(4, True), (6, False), (None, False)])
def test_gpu_gate_counts_the_efa_devices_aws_ofi_nccl_found(found: int | None, ok: bool, tmp_path: Any) -> None:
    """The plugin's provider line, in the format of the seed image's 1.13.2-aws and of 1.21.1
    (tests/upstream/aws-ofi-nccl-v1.21.1.yaml), gives the EFA devices the ranks see: the gate passes
    only at the catalog's count (p4de: 4), so NVLink controllers handed out as EFA devices fail it."""
    facts = upstream.facts("aws-ofi-nccl-v1.21.1")
    script = launcher_script(jobs("p4de-nemo")["nemo-run-001-train"])
    start = script.index("nics=$(")
    out_file = tmp_path / "out"
    check = script[start : script.index("\n", script.index("\n", start) + 1)].replace("/tmp/out", str(out_file))
    lines = (
        facts["provider_line"] % ("efa", "efa-direct", found or 0),
        facts["provider_line_before_1_15"] % ("efa", found or 0),
    )
    for line in lines:
        out_file.write_text(
            f"host:1:2 [0] NET/OFI {line}\n" if found is not None else "host:1:2 [0] NCCL INFO Using network Socket\n"
        )
        r = subprocess.run(["bash", "-c", check], capture_output=True, text=True)
        assert (r.returncode == 0) == ok, r.stdout
        assert ok or "FAIL: aws-ofi-nccl found" in r.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("footer", ["# Avg bus bandwidth    : 432.5 ", "# Avg bus bandwidth    : 432.5 OK"])
def test_gpu_gate_reads_the_bandwidth_after_the_colon(footer: str, tmp_path: Any) -> None:
    """nccl-tests 2.18 prints `# %-20s : %g %s` (src/util.cu), the %s being OK/FAILED under
    NCCL_TESTS_MIN_BW: the value is the first word after the colon, not the last field."""
    script = launcher_script(jobs("p4de-nemo")["nemo-run-001-train"])
    (line,) = [ln for ln in script.splitlines() if ln.startswith("bw=$(awk") and "Avg bus bandwidth" in ln]
    (tmp_path / "out").write_text(footer + "\n")
    r = subprocess.run(
        ["bash", "-c", f"{line.replace('/tmp/out', str(tmp_path / 'out'))}\necho $bw"], capture_output=True, text=True
    )
    assert r.stdout.strip() == "432.5"
