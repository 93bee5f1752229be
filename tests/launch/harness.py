"""One workload of an example stack on a local cluster: its Jobs and MPIJobs run in the order
`pulumi up` creates them, an awaited one that fails stopping the rest (its dependents are never
created), with the faults a scenario injects into the training MPIJob."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facts import awaits, instances
from facts.fabric import FLOORS
from facts.megatron_bridge import HUB_TOKENIZER_FILES, HUB_WEIGHT_FILES
from facts.names import SYSTEM_NODE_GROUP
from tests import upstream
from tests.launch import plans
from tests.launch.images import describe
from tests.launch.mpioperator import JobController, JobResult, Operator, container_env
from tests.launch.pods import Cluster, Pod, wait_until
from workloads.manifests.mpijob import POLL_ENV, WAIT_ENV

# torchrun processes per node here (the job renders 32, 8 or 2): two on 2 nodes, where a lost
# --nproc_per_node or a wrong local rank shows; one on 3 nodes (node ranks across 3 hosts),
# which saves a third of the torch start-ups the harness pays for.
RANKS_PER_NODE = {2: 2, 3: 1, 4: 1}
CHECKPOINT = re.compile(r"^(ckpt_\d+\.pt|step-\d+(\.pt)?|step_\d+|.*step=\d+.*|iter_\d{7})$")
RULES = upstream.facts("training-resume-rules")
# What a resumed run logs: the frameworks' lines (upstream), and ddp-cpu's own script's
# (workloads/manifests/ddp_cpu_train.py, which runs here for real).
RESUME_LOG = {
    **{k: v["resumeLog"] for k, v in RULES.items() if "resumeLog" in v},
    "ddp-cpu": "rank 0 of {world}: resumed from step {step}",
}
BERT = upstream.facts("dp-bert-hf-pretrain-v2.27.0")
BRIDGE = upstream.facts("megatron-bridge-0.6.0")
TRANSFORMERS = upstream.facts("transformers-4.44.0")
NEMO = upstream.facts("nemo-r2.0.0rc1")
GPT2_BPE = NEMO["tokenizer"]["megatron_gpt2_bpe"]
RUNTIME_DRIVER = upstream.facts("aws-neuron-sdk-runtime-driver")
CUDA = upstream.facts("nvidia-cuda-compatibility")
DRIVER_FILES = {"neuron": "/sys/module/neuron/version", "nvidia": "/sys/module/nvidia/version"}
STANDIN_FACTS = {
    "stepSeconds": 0.05,
    "stepsPerShard": plans.BERT_STEPS_PER_SHARD,
    "ncclPluginNetwork": upstream.facts("aws-ofi-nccl-v1.13.2-aws")["plugin_network_name"],
    "ofiProviderLine": upstream.facts("aws-ofi-nccl-v1.13.2-aws")["provider_line"],
    "bertOptions": BERT["options"],
    "bertFlags": BERT["flags_without_value"],
    "bertDataset": {  # the public archive, read with --no-sign-request
        "download": BERT["data"]["download"].split()[0],
        "unsigned": "--no-sign-request" in BERT["data"]["download"],
        "directory": BERT["data"]["directory"],
        "shards": 16,
    },
    "hf": upstream.facts("huggingface-hub-1.24.0")["download"],
    # fio's options, and what each node's stand-in reads at: 1 GB/s, above any pass line of a stack here.
    "fio": {"options": upstream.facts("fio-3.42")["options"], "readBytesPerSecond": 10**9},
    "bridge": {
        # Each library recipe's repository, the revision it reads it at, and its tokenizer's revision.
        "recipes": {
            name: {
                "repo": r["hf_repo"],
                "revision": r.get("hf_revision", "main"),
                "tokenizerRevision": (r["sets"].get("tokenizer.hf_tokenizer_kwargs") or {}).get("revision", "main"),
            }
            for name, r in BRIDGE["recipes"].items()
        },
        "runRecipeOptions": BRIDGE["run_recipe"]["options"],
        "conversion": BRIDGE["conversion_worker"],
        "iterationDir": BRIDGE["checkpoint"]["iteration_dir"],
        "tracker": BRIDGE["checkpoint"]["tracker"],
        "trainState": BRIDGE["checkpoint"]["train_state"],
        "runConfig": BRIDGE["checkpoint"]["run_config"],
        "resumeLog": RULES["megatron-bridge"]["resumeLog"],
        "tokenizerFiles": list(HUB_TOKENIZER_FILES),
        "tokenizerSnapshot": BRIDGE["tokenizer_snapshot"],
        "revisionResolution": BRIDGE["revision_resolution"],
        "weightFiles": list(HUB_WEIGHT_FILES),
    },
    "bertHub": BERT["hub"],
    "megatronTokenizers": {GPT2_BPE["type"]: GPT2_BPE["hub_repo"]},
    "autoTokenizer": TRANSFORMERS["auto_tokenizer"],
    "nxd": upstream.facts("neuronx-distributed-v2.28.0"),
    "torchtitan": upstream.facts("torchtitan-config-cli"),
    "nemoHfConverter": NEMO["hf_converter"],
    "nemoExpManagerName": NEMO["hf_converter"]["exp_manager_name"],
    "vllmLoader": upstream.facts("vllm-default-loader"),
}


def checkpoint_step(name: str) -> int:
    """The step of a checkpoint named the way NeMo (`step=N`), the BERT script (`ckpt_N.pt`),
    ddp-cpu's script (`step-0000000N.pt`), NxD (`step_N/`), TorchTitan (`step-N/`) or Megatron Bridge
    (`iter_000000N`) names it."""
    m = (
        re.search(r"step=(\d+)", name)
        or re.search(r"^(?:ckpt_|step-|step_)(\d+)(?:\.pt)?$", name)
        or re.search(r"^iter_(\d{7})$", name)
    )
    if not m:
        raise ValueError(f"not a checkpoint name: {name}")
    return int(m.group(1))


@dataclass
class Faults:
    """What goes wrong in the training MPIJob: a device missing on a worker, a worker that never
    comes up, a worker killed once the first checkpoint is written (recreated `recreate_after`
    seconds after the restarted launcher logs that it waits for it)."""

    missing_device: dict[str, int] = field(default_factory=dict)  # resource -> worker index
    read_only_shared: int | None = None  # a worker whose /shared mount is read-only
    never_up: tuple[int, ...] = ()
    kill: int | None = None
    recreate_after: float = 0.3
    wait_seconds: int = 20
    max_attempts: int | None = None


class WorkloadRun:
    def __init__(self, workdir: Path, stack: str, workload: str, nodes: int, faults: bool = False) -> None:
        self.stack, self.workload, self.nodes = stack, workload, nodes
        self.jobs = plans.steps(stack, workload, nodes, faults)
        self.policies = tuple(plans.network_policies(stack, workload, nodes, faults))
        self.training = plans.training_job(self.jobs)
        self.cluster = Cluster(workdir)
        self.shared = workdir / "shared"
        self.shared.mkdir()
        for path, text in plans.SEEDED.get((stack, workload), {}).items():  # what the stack says is there
            (self.shared / path).parent.mkdir(parents=True, exist_ok=True)
            (self.shared / path).write_text(text)
        self.results: list[JobResult] = []
        # Seams a scenario sets aside, to hold one need alone: "driver" (the nodes get a driver
        # the image's runtime works with), "mpi" (orted is on sshd's PATH in every image).
        self.set_aside: set[str] = set()
        self.driver_override: str | None = None  # the nodes' accelerator driver, whatever the AMI
        self.killed_checkpoints: list[str] = []  # the checkpoints there were when a worker was killed
        self.resume_checkpoints: list[str] = []  # ... and when the restarted launcher began training

    def close(self) -> None:
        self.cluster.close()

    def facts(self, obj: dict[str, Any]) -> dict[str, Any]:
        """What the stand-ins of one job are told: the framework rules of its image, the
        rendered ranks per node, the bus bandwidth a healthy fabric gives, the Hub client of its
        image, and what its accelerator runtime needs of the node's driver."""
        container = plans.containers(obj)
        image = describe(container["image"])
        framework = image.framework
        facts = {**STANDIN_FACTS, "framework": framework, "rules": RULES.get(framework, {})}
        facts["renderedNprocPerNode"] = container_env(container).get("NPROC_PER_NODE")
        facts["hub"] = {**upstream.facts(image.hub_facts), "missing_error": TRANSFORMERS["missing_error"]}
        if framework != "ddp-cpu":  # an accelerated node group
            instance = instances.get(plans.instance_type(self.stack, self.workload))
            facts["neuronCoresPerDevice"] = instance.neuron_cores // max(instance.accelerator_count, 1)
            facts["busBandwidthGBPerSecond"] = 2 * FLOORS[instance.name].min_bus_bandwidth_gb_per_second
            if instance.ultraserver:
                facts["ultraserverSize"] = instance.ultraserver.instances
                facts["ultraserverSysfs"] = upstream.facts("nccom-test-2.32.0")["ultraserver_sysfs"]
            if image.neuron_runtime and instance.accelerator == "neuron":
                rules, error = RUNTIME_DRIVER["rules"], RUNTIME_DRIVER["incompatible_error"]
                facts["neuron"] = {
                    "runtime": image.neuron_runtime,
                    "rules": rules,
                    "error": error,
                    "family": instance.family,
                }
            if image.cuda_major and instance.accelerator == "nvidia":
                minimum = CUDA["minimum_driver_of_cuda_major"][image.cuda_major]
                facts["cuda"] = {"major": image.cuda_major, "minimum": minimum}
        if framework == "fabric":  # the EFA installer 1.51.0 of images/gpu-fabric bundles aws-ofi-nccl 1.22.0
            ofi = upstream.facts("aws-ofi-nccl-v1.21.1")
            facts["ofiProviderLine"] = ofi["log_prefix"] + ofi["provider_line"]
        return facts

    def node(self) -> tuple[str, dict[str, str]]:
        """The workload's node group and what its nodes show under /sys/module: the version of the
        accelerator driver of the AMI release the group runs (plans.node_drivers)."""
        if plans.node_group(self.stack, self.workload) == SYSTEM_NODE_GROUP:
            return "", {}
        instance = instances.get(plans.instance_type(self.stack, self.workload))
        assert instance.accelerator is not None
        driver = plans.node_drivers(self.stack, self.workload)[instance.accelerator]
        if "driver" in self.set_aside and instance.accelerator == "neuron":
            runtime = describe(self.training_image).neuron_runtime
            driver = plans.fitting_driver(self.stack, self.workload, runtime, instance.family)
        driver = self.driver_override or driver
        return plans.node_group(self.stack, self.workload), {DRIVER_FILES[instance.accelerator]: f"{driver}\n"}

    def checkpoints(self) -> list[Path]:
        """The run's checkpoints: not a precompile's, nor the data steps' (an imported model)."""
        return [
            p
            for p in self.shared.rglob("*")
            if CHECKPOINT.match(p.name)
            and "precompile" not in p.parts
            and "data" not in p.relative_to(self.shared).parts
        ]

    @property
    def training_image(self) -> str:
        return str(plans.containers(self.training)["image"])

    def run_mpijob(self, job: dict[str, Any], faults: Faults) -> JobResult:
        env = {"NPROC_PER_NODE": str(RANKS_PER_NODE[self.nodes]), WAIT_ENV: str(faults.wait_seconds), POLL_ENV: "1"}
        op = Operator(self.cluster, job, self.facts(job), env, self.policies, self.node())
        op.faulty_devices = {r: (op.worker_name(i),) for r, i in faults.missing_device.items()}
        if faults.read_only_shared is not None:
            op.read_only_shared = (op.worker_name(faults.read_only_shared),)

        def during(attempt: int, launcher: Pod) -> None:
            if faults.kill is None:
                return
            if attempt == 0:
                wait_until(lambda: self.checkpoints() or not launcher.alive(), timeout=60, interval=0.05)
                self.killed_checkpoints = [p.name for p in self.checkpoints()]
                self.cluster.remove(op.worker_name(faults.kill))
            elif attempt == 1:
                # The node comes back after the restarted launcher has started waiting for it
                # (a node replacement takes minutes, a launcher restart seconds).
                host = op.fqdn(op.worker_name(faults.kill))
                wait_until(lambda: f"waiting for worker {host}" in launcher.output(), timeout=60)
                self.resume_checkpoints = [p.name for p in self.checkpoints()]
                time.sleep(faults.recreate_after)
                op.start_worker(faults.kill)

        return op.run(skip_workers=faults.never_up, during=during, max_attempts=faults.max_attempts)

    def pipeline(self, faults: Faults, training_only: bool = False) -> list[JobResult]:
        """Run the workload's Jobs and MPIJobs in order (or its training MPIJob alone); stop
        after an awaited one that failed."""
        self.cluster.mpi_on_sshd_path = "mpi" in self.set_aside
        for job in [self.training] if training_only else self.jobs:
            if job["kind"] == "Job":
                result = JobController(self.cluster, job, self.facts(job), {}, self.policies, self.node()).run()
            else:
                result = self.run_mpijob(job, faults if job is self.training else Faults())
            self.results.append(result)
            if not result.succeeded and awaits.awaits_completion(job):
                break
        return self.results

    def log(self) -> str:
        return "\n".join(r.log() for r in self.results)

    def records(self, job_name: str, kind: str, attempt: int | None = None) -> list[dict[str, Any]]:
        """What the stand-ins of a job recorded (of one launcher attempt; default: the last)."""
        base = self.cluster.workdir / "jobs" / job_name
        folder = base / ("records" if attempt is None else f"records.{attempt}")
        docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
        return [d for d in docs if d["kind"] == kind]
