"""What serving a model with vLLM needs to know: the pinned image per accelerator and what it
holds, the server's port and endpoints, and the numbers the plan models a replica with.

Sources (tests/unit/test_serving_facts.py holds these values to them):
- vLLM 0.24.0 and 0.16.0 as published on PyPI (the wheels' vllm/ sources): `vllm serve`'s
  options (engine/arg_utils.py, entrypoints/openai/cli_args.py), the default port 8000, the
  `/health` and `/metrics` routes (tests/upstream/vllm-v0.24.0.yaml, vllm-v0.16.0.yaml).
- aws-neuron/deep-learning-containers at tag 2.32.0 (2be9ed1d): README's vllm-inference-neuronx
  table (image, SDK, instance types) and vllm/inference/<version>/Dockerfile.neuronx (the runtime
  library each image installs) (tests/upstream/neuron-dlc-vllm-inference.yaml).
- Neuron docs v2.29.1 "vLLM User Guide for NxD Inference": plugin 0.5.0 runs vLLM 0.16.0.
"""

from __future__ import annotations

from dataclasses import dataclass

from facts import needs
from facts.images import Runtime
from facts.instances import Accelerator, InstanceType

PORT = 8000
"""`vllm serve`'s default HTTP port (FrontendArgs.port)."""
HEALTH_PATH = "/health"
"""200 once the engine is up (entrypoints/serve/instrumentator/health.py)."""
METRICS_PATH = "/metrics"
"""Prometheus metrics (entrypoints/serve/instrumentator/metrics.py)."""

SCRAPED_SERIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)
"""The series of a server's /metrics that CloudWatch gets as metrics (infra.metrics): requests in
the batch and queued, the KV cache's use (gauges), prompt and generated tokens (counters, which
prometheus_client exposes with `_total`), in vllm/v1/metrics/loggers.py of every pinned image's
vLLM (0.24.0, 0.16.0); its latency series (time to first token, end to end) are histograms, which
the CloudWatch agent drops (tests/upstream/vllm-v<version>-metrics.yaml)."""
SERIES_LABEL = "model_name"
"""The label vLLM puts on each series: the served model name (`--served-model-name`, the workload)."""


@dataclass(frozen=True)
class ServingImage:
    """A public vLLM image, the accelerator and instance families it serves on, and what it holds."""

    image: str
    accelerator: Accelerator
    families: tuple[str, ...]
    vllm: str
    """The vLLM version whose `vllm serve` parser the rendered arguments are held against."""
    runtime: Runtime
    hub_cli: needs.HubCli
    """The huggingface-hub command line of the image (its vLLM's transformers pins the hub's
    major): what the staging Job, which runs in this image, calls."""
    neuron_sdk: str | None = None
    maintenance: bool = False
    """The last image of a line that gets no new vLLM (NxD Inference on trn1/inf2)."""
    note: str = ""

    @property
    def facts(self) -> str:
        """tests/upstream/<facts>.yaml: the options of its vLLM's parser."""
        return f"vllm-v{self.vllm}"


GPU = ServingImage(
    "docker.io/vllm/vllm-openai:v0.24.0",
    "nvidia",
    ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"),
    "0.24.0",
    # vLLM 0.24.0's wheel pins torch 2.11.0; the image's CUDA major is not read from a source
    # here, so the driver check has no CUDA to hold (the AMI releases carry driver 580, which
    # runs CUDA 12 and 13 applications alike).
    Runtime(),
    needs.HUB_CLI_1,
    note="vLLM's own image, published on Docker Hub as vllm/vllm-openai:v<version>",
)
TRN2 = ServingImage(
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04",
    "neuron",
    ("trn2", "trn2u"),
    "0.24.0",
    Runtime(neuron_runtime="2.34.10.0"),
    needs.HUB_CLI_1,
    neuron_sdk="2.32.0",
    note="vLLM Neuron 0.24.0.1.1.0 (vLLM 0.24.0), Trn2/Trn3 only",
)
TRN1 = ServingImage(
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
    "neuron",
    ("trn1", "trn1n", "inf2"),
    "0.16.0",
    Runtime(neuron_runtime="2.33.10.0"),
    needs.HUB_CLI_0,
    neuron_sdk="2.31.1",
    maintenance=True,
    note="vLLM 0.16.0 on NxD Inference: the last vLLM image for trn1/inf2 (maintenance: no newer vLLM there)",
)
IMAGES: tuple[ServingImage, ...] = (GPU, TRN2, TRN1)


def image_for(instance: InstanceType) -> ServingImage | None:
    """The pinned image that serves on an instance type (None: no vLLM image for it)."""
    return next((i for i in IMAGES if instance.family in i.families), None)


def image_for_name(image: str) -> ServingImage | None:
    """The pinned image a configured `image` names (None: another image)."""
    return next((i for i in IMAGES if i.image == image), None)


NEURON_SCHEDULER_NAME = "my-scheduler"
"""The second kube-scheduler the Neuron chart runs with the scheduler extension (`addons.neuronScheduler`):
its profile's schedulerName (neuron-helm-chart 1.1.2 custom-scheduler.yaml, customScheduler's full
name). EKS keeps its own scheduler's configuration, so pods name this one (aws-neuron-sdk v2.32.0
deploy/includes/k8s-multiple-scheduler.rst)."""
TORUS_DEVICE_SETS = (1, 4, 8, 16)
NEURON_SCHEDULER_DEVICE_COUNTS: dict[str, tuple[int, ...]] = {
    family: TORUS_DEVICE_SETS for family in ("trn1", "trn1n", "trn2", "trn2u")
}
"""Instance family -> the devices a pod may take that the extension places (aws-neuron-sdk v2.32.0,
tests/upstream/neuron-scheduler-extension-2.32.0.yaml). On trn1's 4x4 2D torus it "enforces that
containers request 1, 4, 8, or all 16 devices" and never schedules another count
(deploy/infrastructure/scheduler.rst). trn2 and trn2u are the same 4x4 2D torus within a node
(about-neuron/arch/neuron-hardware/trn2-arch.rst), and the only connected subsets of a
trn2.48xlarge the SDK names are sets of 1, 4, 8 or 16 (deploy/eks/dra.rst, which says this use case
needed the extension before DRA): a 2-device replica there has no documented placement."""


def shares_neuron_node(instance: InstanceType, devices: int) -> bool:
    """A pod taking `devices` Neuron devices of fewer than its node's all: the device plugin alone may
    give it unconnected ones (aws-neuron-sdk v2.32.0 deploy/faq.rst), unless it takes just one."""
    return instance.accelerator == "neuron" and devices < instance.accelerator_count


def neuron_cores_per_device(instance: InstanceType) -> int:
    """Logical NeuronCores per Neuron device (trn2 runs two physical cores as one, LNC=2)."""
    return instance.ranks_per_node // instance.accelerator_count if instance.accelerator_count else 0


def devices_for(instance: InstanceType, tensor_parallel: int) -> int:
    """Accelerator devices one replica takes for `tensor_parallel` ranks: a GPU per rank, or
    enough Neuron devices for one logical NeuronCore per rank."""
    if instance.accelerator == "neuron":
        per = neuron_cores_per_device(instance)
        return -(-tensor_parallel // per)
    return tensor_parallel


BYTES_PER_PARAMETER = 2
"""bf16 weights: what the server reads from /shared and holds in accelerator memory."""
ENGINE_START_SECONDS = 300
"""Start-up besides reading the weights (CUDA graphs or the Neuron compile of a cached shape,
the KV cache's allocation): a margin, not a measurement."""
NEURON_COMPILE_SECONDS = 3600
"""A Neuron replica compiles its graphs at the first start of a shape (NxD Inference compiles
per tensor-parallel degree, sequence length and batch): the margin the probes give it."""


NEURON_DEVICE_MEMORY_GIB: dict[str, int] = {"Trainium": 32, "Trainium2": 96}
"""Memory per Neuron device, GiB: Trainium from the EC2 instance data moto ships (NeuronInfo
MemoryInfo); Trainium2 from the EC2 Trn2 page (16 chips, 1.5 TB of HBM), where moto 5.2.5's 512 GiB
per device is not the hardware. A GPU's is the instance catalog's `gpu_memory_mib` (held to the
same EC2 data by tests/unit/test_instances.py)."""
MEMORY_SHARE = 0.9
"""Of a replica's accelerator memory, what the weights may take (vLLM's default
--gpu-memory-utilization 0.9 leaves the rest to the runtime; the KV cache needs some of it too)."""


def device_memory_gib(instance: InstanceType) -> int | None:
    """Memory of one of the instance's accelerators (None: not recorded)."""
    if instance.accelerator == "nvidia":
        return instance.gpu_memory_mib // 1024 if instance.gpu_memory_mib else None
    return NEURON_DEVICE_MEMORY_GIB.get(instance.accelerator_name or "")


MULTI_NODE_EXECUTOR = "mp"
"""The executor of a replica across nodes without Ray: ParallelConfig's master_addr, master_port,
node_rank and nnodes are "for multi-node distributed inference when distributed_executor_backend
is mp", which CUDA picks by itself when nnodes > 1 (vLLM 0.24.0, vllm.config.parallel)."""
MASTER_PORT = 29501
"""ParallelConfig.master_port's default: the torch.distributed rendezvous on a group's leader."""
