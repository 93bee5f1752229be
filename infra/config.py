"""Typed stack configuration: the only module that reads `pulumi.Config`.

Every key is validated before any resource is declared. Problems are collected and
reported together, one line each, naming the key path the way the stack file spells it
(`nodeGroups[0].capacity.reservationId: ...`) and saying what would be valid.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from infra import catalog

PROJECT = "llm-training-eks"

# EKS standard support as of 2026-11 (FACTS.md): 1.34 ends 2026-12-02, 1.35 runs to
# 2027-03-27, 1.36 is in the EKS guide since mid-2026. 1.35 is the default: in standard
# support today and for months to come.
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
DEFAULT_KUBERNETES_VERSION = "1.35"

# Regions where EKS and at least one accelerated type of the catalog are offered.
_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
_AZ_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
# ODCR and Capacity Block ids: `cr-` and 17 hex digits (older ids have 8).
_RESERVATION_RE = re.compile(r"^cr-([0-9a-f]{8}|[0-9a-f]{17})$")
_ARN_PRINCIPAL_RE = re.compile(r"^arn:aws(-[a-z]+)?:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
_DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class ConfigError(Exception):
    """Invalid stack config: `problems` holds one `key.path: message` line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(problems))


class _Model(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, validate_default=True
    )


class NetworkConfig(_Model):
    """The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers."""

    cidr: str = Field("10.0.0.0/16", description="VPC IPv4 CIDR, /16 to /20.")
    availability_zones: list[str] | None = Field(
        None, description="AZ names; default: the node groups' AZs, then the region's first, to azCount."
    )
    az_count: int = Field(2, ge=2, le=4, description="Number of AZs when availabilityZones is not given (2-4).")
    nat_gateways: Literal["single", "per-az"] = Field(
        "single", description="One NAT gateway (cheaper) or one per AZ (survives an AZ outage)."
    )
    flow_logs: bool = Field(True, description="VPC flow logs (rejected traffic) to CloudWatch Logs.")

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 network in CIDR notation, e.g. 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"prefix /{net.prefixlen} is outside /16../20 (pods take one VPC IP each)")
        if not net.is_private:
            raise ValueError(f"{v} is not a private (RFC 1918) range")
        return v

    @field_validator("availability_zones")
    @classmethod
    def _azs(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if len(v) < 2 or len(v) > 4:
            raise ValueError(f"give 2 to 4 AZs (EKS needs two), got {len(v)}")
        if len(set(v)) != len(v):
            raise ValueError("AZs are repeated")
        for az in v:
            if not _AZ_RE.match(az):
                raise ValueError(f"{az!r} is not an AZ name like us-west-2d")
        return v


class ClusterConfig(_Model):
    """The EKS control plane: secure by default."""

    name: str = Field("llm-training", description="EKS cluster name (letters, digits, hyphens; up to 100).")
    kubernetes_version: str = Field(DEFAULT_KUBERNETES_VERSION, description="Kubernetes minor version.")
    public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the public API endpoint; empty means the public endpoint is off.",
    )
    allow_public_access_from_anywhere: bool = Field(
        False, description="Must be true to put 0.0.0.0/0 in publicAccessCidrs; a deliberate choice."
    )
    admin_principal_arns: list[str] = Field(
        default_factory=list, description="IAM role/user ARNs given cluster-admin through EKS access entries."
    )
    log_retention_days: int = Field(90, description="CloudWatch retention of control-plane logs, days.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,99}", v):
            raise ValueError("must start with a letter and hold only letters, digits and hyphens (1-100)")
        return v

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"{v!r} is not in EKS standard support; valid: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
        return v

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for cidr in v:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24") from None
        return v

    @field_validator("admin_principal_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not _ARN_PRINCIPAL_RE.match(arn):
                raise ValueError(f"{arn!r} is not an IAM role or user ARN (arn:aws:iam::123456789012:role/name)")
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        allowed = (
            1,
            3,
            5,
            7,
            14,
            30,
            60,
            90,
            120,
            150,
            180,
            365,
            400,
            545,
            731,
            1096,
            1827,
            2192,
            2557,
            2922,
            3288,
            3653,
        )
        if v not in allowed:
            raise ValueError(f"CloudWatch accepts {', '.join(map(str, allowed))} days")
        return v

    @model_validator(mode="after")
    def _public_anywhere(self) -> ClusterConfig:
        opens_world = any(ipaddress.IPv4Network(c).prefixlen == 0 for c in self.public_access_cidrs)
        if opens_world and not self.allow_public_access_from_anywhere:
            raise ValueError(
                "publicAccessCidrs opens the API endpoint to the whole internet (0.0.0.0/0); list your "
                "networks instead, or set allowPublicAccessFromAnywhere: true on purpose"
            )
        return self


class SystemNodeGroupConfig(_Model):
    """The general-purpose managed node group that runs controllers and add-ons, across AZs."""

    instance_type: str = Field("m6i.2xlarge", description="General-purpose instance type from the catalog.")
    desired_size: int = Field(2, ge=1, description="Nodes (at least one per AZ is recommended).")
    min_size: int | None = Field(None, ge=1, description="Default: desiredSize.")
    max_size: int | None = Field(None, ge=1, description="Default: desiredSize + 2.")
    root_volume_size_gib: int = Field(
        100, ge=50, le=16384, alias="rootVolumeSizeGiB", description="Encrypted gp3 root volume, GiB."
    )

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in catalog.GENERAL_PURPOSE:
            raise ValueError(f"unknown system instance type {v!r}; valid: {', '.join(catalog.GENERAL_PURPOSE)}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> SystemNodeGroupConfig:
        _check_sizes(self.desired_size, self.min_size, self.max_size)
        return self

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else self.desired_size + 2


class CapacityConfig(_Model):
    """Where a node group's instances come from."""

    type: Literal["on-demand", "reservation", "capacity-block", "spot"] = Field(
        "on-demand", description="on-demand | reservation (ODCR) | capacity-block (Capacity Block for ML) | spot."
    )
    reservation_id: str | None = Field(
        None, description="cr-... id; required for reservation and capacity-block, not allowed otherwise."
    )

    @field_validator("reservation_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not _RESERVATION_RE.match(v):
            raise ValueError(
                f"{v!r} is not a capacity reservation id (cr- and 17 hex digits, e.g. cr-0123456789abcdef0)"
            )
        return v

    @model_validator(mode="after")
    def _needs_id(self) -> CapacityConfig:
        if self.type in ("reservation", "capacity-block") and self.reservation_id is None:
            raise _KeyError("reservationId", f"required when type is {self.type} (the cr-... id of the reservation)")
        if self.type in ("on-demand", "spot") and self.reservation_id is not None:
            raise _KeyError("reservationId", f"only for reservation and capacity-block, not {self.type}")
        return self

    @property
    def targets_reservation(self) -> bool:
        return self.type in ("reservation", "capacity-block")


RepairCondition = Literal[
    "AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady", "StorageReady", "Ready"
]


class RepairOverride(_Model):
    """What EKS node auto repair does when the node monitoring agent reports one problem."""

    condition: RepairCondition = Field(description="Node condition set by the EKS node monitoring agent.")
    reason: str = Field(description="Reason of the condition, e.g. NeuronHBMUncorrectableError, NvidiaXID79Error.")
    action: Literal["Replace", "Reboot", "NoAction"] = Field(description="Replace, Reboot or NoAction.")
    wait_minutes: int = Field(10, ge=1, le=1440, description="Minutes the condition must last before repair.")

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{2,99}", v):
            raise ValueError(f"{v!r} is not a node monitoring agent reason (CamelCase, e.g. NeuronDMAError)")
        return v


# Fatal accelerator errors the EKS node monitoring agent reports (aws/eks-node-monitoring-agent
# reasons; EKS user guide, node-health). A node with one of them cannot finish a collective:
# replace it rather than reboot it.
DEFAULT_REPAIR_REASONS: dict[str, tuple[str, ...]] = {
    "neuron": (
        "NeuronDMAError",
        "NeuronHBMUncorrectableError",
        "NeuronNCUncorrectableError",
        "NeuronSRAMUncorrectableError",
    ),
    "nvidia": ("NvidiaDoubleBitError", "NvidiaNVLinkError", "NvidiaXID79Error", "NvidiaXID48Error"),
}


class NodeRepairConfig(_Model):
    """EKS managed node group auto repair (on by default for accelerated node groups)."""

    enabled: bool = Field(True, description="Let EKS replace or reboot nodes the monitoring agent marks unhealthy.")
    max_unhealthy_node_threshold_percentage: int | None = Field(
        None, ge=1, le=100, description="Pause repair when more than this % of nodes are unhealthy (EKS default: 20%)."
    )
    max_parallel_nodes_repaired_count: int = Field(
        1, ge=1, description="Nodes repaired at once (1: a job loses at most one node at a time to repair)."
    )
    overrides: list[RepairOverride] | None = Field(
        None, description="Per-condition actions; default: replace on fatal Neuron/NVIDIA hardware errors."
    )

    def effective_overrides(self, accelerator: str | None) -> list[RepairOverride]:
        """The configured overrides, or the defaults for the accelerator."""
        if self.overrides is not None:
            return list(self.overrides)
        return [
            RepairOverride(condition="AcceleratedHardwareReady", reason=r, action="Replace", wait_minutes=10)
            for r in DEFAULT_REPAIR_REASONS.get(accelerator or "", ())
        ]


class NodeGroupConfig(_Model):
    """One accelerated EFA node group: one instance type, one AZ, one subnet."""

    name: str = Field(description="Node group name: lowercase letters, digits, hyphens (1-40).")
    instance_type: str = Field(description="Accelerated instance type from the catalog.")
    desired_size: int = Field(description="Nodes to run.", ge=0)
    min_size: int | None = Field(None, ge=0, description="Default: desiredSize.")
    max_size: int | None = Field(None, ge=0, description="Default: desiredSize (at least 1).")
    availability_zone: str | None = Field(
        None, description="AZ of the nodes (and of the reservation); default: the VPC's first AZ."
    )
    capacity: CapacityConfig = Field(default_factory=CapacityConfig, description="Capacity source.")
    placement_group: bool = Field(
        True,
        description="Launch into a `cluster` placement group; turn off for ODCRs/Capacity Blocks made without one.",
    )
    root_volume_size_gib: int = Field(
        500,
        ge=100,
        le=16384,
        alias="rootVolumeSizeGiB",
        description="Encrypted gp3 root volume, GiB (training images are many GB).",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra node labels.")
    max_unavailable: int = Field(1, ge=1, description="Nodes an update may replace at once.")
    node_repair: NodeRepairConfig = Field(default_factory=NodeRepairConfig, description="EKS node auto repair.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if len(v) > 40 or not _DNS_LABEL_RE.match(v):
            raise ValueError(f"{v!r} must be lowercase letters, digits and hyphens, starting with a letter (1-40)")
        return v

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v not in catalog.ACCELERATED:
            hint = _did_you_mean(v, catalog.ACCELERATED)
            raise ValueError(f"unknown instance type {v!r}{hint}; valid: {', '.join(catalog.ACCELERATED)}")
        return v

    @field_validator("availability_zone")
    @classmethod
    def _az(cls, v: str | None) -> str | None:
        if v is not None and not _AZ_RE.match(v):
            raise ValueError(f"{v!r} is not an AZ name like us-west-2d")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> NodeGroupConfig:
        _check_sizes(self.desired_size, self.min_size, self.max_size)
        return self

    @property
    def instance(self) -> catalog.InstanceType:
        return catalog.ACCELERATED[self.instance_type]

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else max(1, self.desired_size)


# --------------------------------------------------------------------------- training workloads
# `workloads` is a map of named runs. Each run names its recipe; the recipe picks the model
# below (a union discriminated by `recipe`). Checks that need the node groups (unknown node
# group, accelerator mismatch, node count, ranks and parallelism) run after parsing, in
# `_workload_checks`, so each can name its key.

Recipe = Literal["llama2-neuron", "nemo-gpu", "custom"]
RECIPE_ACCELERATOR: dict[str, catalog.Accelerator | None] = {
    "llama2-neuron": "neuron",
    "nemo-gpu": "nvidia",
    "custom": None,
}
RECIPE_REPOSITORY: dict[str, str | None] = {
    "llama2-neuron": "neuronx-nemo-megatron",
    "nemo-gpu": "nemo",
    "custom": None,
}

# Llama2 shapes (Meta's model cards; FACTS.md for 7B) with parallelism and batch sizes that
# fit trn1 nodes (32 NeuronCores each): 7B is the Data on EKS run; 13B and 70B add pipeline
# stages so the weights fit in device memory. Any field can be overridden in the stack.
LLAMA2_PRESETS: dict[str, dict[str, int]] = {
    "7b": {
        "seqLength": 4096,
        "hiddenSize": 4096,
        "ffnHiddenSize": 11008,
        "numLayers": 32,
        "numAttentionHeads": 32,
        "numKvHeads": 32,
        "tensorParallel": 8,
        "pipelineParallel": 1,
        "microBatchSize": 1,
        "globalBatchSize": 256,
    },
    "13b": {
        "seqLength": 4096,
        "hiddenSize": 5120,
        "ffnHiddenSize": 13824,
        "numLayers": 40,
        "numAttentionHeads": 40,
        "numKvHeads": 40,
        "tensorParallel": 8,
        "pipelineParallel": 4,
        "microBatchSize": 1,
        "globalBatchSize": 1024,
    },
    "70b": {
        "seqLength": 4096,
        "hiddenSize": 8192,
        "ffnHiddenSize": 28672,
        "numLayers": 80,
        "numAttentionHeads": 64,
        "numKvHeads": 8,
        "tensorParallel": 8,
        "pipelineParallel": 8,
        "microBatchSize": 1,
        "globalBatchSize": 1024,
    },
}

_RUN_ID_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$")
_IMAGE_RE = re.compile(r"^[a-z0-9][\w.\-/:]*(:[\w][\w.\-]{0,127}|@sha256:[0-9a-f]{64})$")


def ranks_per_node(it: catalog.InstanceType) -> int:
    """Training processes per node: one per NeuronCore (trn2 runs two physical cores as one
    logical core by default, LNC=2) or one per GPU."""
    if it.accelerator == "neuron":
        return it.neuron_cores // 2 if it.family == "trn2" else it.neuron_cores
    return it.accelerator_count


class HealthCheckConfig(_Model):
    """The collective test that must pass on the run's nodes before training starts."""

    enabled: bool = Field(True, description="Run nccom-test (Neuron) or nccl-tests all-reduce before training.")
    min_bus_bandwidth_gbps: float | None = Field(
        None, gt=0, description="Fail below this all-reduce bus bandwidth, GB/s; default per instance type."
    )
    message_size: str | None = Field(None, description="All-reduce size, e.g. 2G; default per instance type.")
    image: str | None = Field(None, description="Image with nccom-test / nccl-tests; default: the workload's image.")

    @field_validator("message_size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[1-9]\d*[KMG]?", v):
            raise ValueError(f"{v!r} is not a size like 512M or 2G")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return _check_image(v)


class ModelConfig(_Model):
    """Transformer shape, parallelism and batch sizes; unset fields come from the preset."""

    preset: Literal["7b", "13b", "70b"] = Field("7b", description="Llama2 size whose values are the defaults.")
    seq_length: int = Field(ge=128, description="Sequence length (tokens).")
    hidden_size: int = Field(ge=64, description="Hidden size.")
    ffn_hidden_size: int = Field(ge=64, description="Feed-forward hidden size.")
    num_layers: int = Field(ge=1, description="Transformer layers.")
    num_attention_heads: int = Field(ge=1, description="Attention heads.")
    num_kv_heads: int = Field(ge=1, description="Key/value heads (grouped-query attention when fewer).")
    tensor_parallel: int = Field(ge=1, description="Tensor-parallel degree (TP).")
    pipeline_parallel: int = Field(ge=1, description="Pipeline-parallel degree (PP).")
    sequence_parallel: bool = Field(True, description="Sequence parallelism (with TP > 1).")
    micro_batch_size: int = Field(ge=1, description="Sequences per rank per micro step.")
    global_batch_size: int = Field(ge=1, description="Sequences per optimizer step.")

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        preset = data.get("preset", "7b")
        defaults = LLAMA2_PRESETS.get(preset, LLAMA2_PRESETS["7b"]) if isinstance(preset, str) else {}
        return {**defaults, **data}

    @model_validator(mode="after")
    def _shape(self) -> ModelConfig:
        if self.hidden_size % self.num_attention_heads:
            raise _KeyError(
                "hiddenSize", f"{self.hidden_size} is not divisible by numAttentionHeads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_kv_heads:
            raise _KeyError(
                "numKvHeads", f"{self.num_kv_heads} does not divide numAttentionHeads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.tensor_parallel:
            raise _KeyError(
                "tensorParallel",
                f"{self.tensor_parallel} does not divide numAttentionHeads {self.num_attention_heads}",
            )
        if self.num_layers % self.pipeline_parallel:
            raise _KeyError("pipelineParallel", f"{self.pipeline_parallel} does not divide numLayers {self.num_layers}")
        if self.global_batch_size % self.micro_batch_size:
            raise _KeyError(
                "globalBatchSize",
                f"{self.global_batch_size} is not a multiple of microBatchSize {self.micro_batch_size}",
            )
        return self


class TrainingConfig(_Model):
    """Steps, optimizer and learning-rate schedule (AdamW, warmup then cosine decay)."""

    max_steps: int = Field(10000, ge=1, description="Optimizer steps of the run.")
    learning_rate: float = Field(3e-4, gt=0, description="Peak learning rate.")
    min_learning_rate: float = Field(3e-5, ge=0, description="Learning rate at the end of the cosine decay.")
    warmup_steps: int = Field(2000, ge=0, description="Linear warmup steps.")
    constant_steps: int = Field(0, ge=0, description="Steps held at the minimum learning rate at the end.")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay.")
    adam_beta1: float = Field(0.9, gt=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(0.95, gt=0, lt=1, description="AdamW beta2.")
    checkpoint_every_steps: int = Field(500, ge=1, description="Save a checkpoint every N steps.")

    @model_validator(mode="after")
    def _schedule(self) -> TrainingConfig:
        if self.min_learning_rate > self.learning_rate:
            raise _KeyError("minLearningRate", f"{self.min_learning_rate} is above learningRate {self.learning_rate}")
        if self.warmup_steps + self.constant_steps >= self.max_steps:
            raise _KeyError(
                "warmupSteps",
                f"warmupSteps + constantSteps ({self.warmup_steps + self.constant_steps}) must be below"
                f" maxSteps {self.max_steps}",
            )
        return self


class Llama2DataConfig(_Model):
    """Where the tokenizer and the pretraining corpus come from (Hugging Face Hub)."""

    tokenizer: str = Field("meta-llama/Llama-2-7b-hf", description="Hugging Face model repo of the tokenizer.")
    dataset: str = Field(
        "togethercomputer/RedPajama-Data-1T-Sample", description="Hugging Face dataset repo of JSONL files."
    )
    include: str = Field("*.jsonl", description="Files of the dataset to download and tokenize (glob).")

    @field_validator("tokenizer", "dataset")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not re.fullmatch(r"[\w.\-]+/[\w.\-]+", v):
            raise ValueError(f"{v!r} is not a Hugging Face repo id like owner/name")
        return v


class _WorkloadBase(_Model):
    node_group: str = Field(description="Name of the node group (nodeGroups[].name) the run uses.")
    nodes: int = Field(ge=1, description="Nodes of the run (one worker pod per node).")
    run_id: str = Field(description="Run id; a new value starts a new run. Lowercase letters, digits, hyphens.")
    image: str | None = Field(None, description="Container image with an explicit tag or digest.")
    image_tag: str | None = Field(
        None, description="Tag in the stack's ECR repository of the recipe, used when image is not given."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment of every process.")
    health_check: HealthCheckConfig = Field(default_factory=HealthCheckConfig, description="Pre-training gate.")
    step_seconds: float | None = Field(
        None,
        gt=0,
        description="Measured seconds per optimizer step, for the run's cost; default: an estimate where one exists.",
    )
    team: str | None = Field(
        None, description="Team (teams.<name>) whose Kueue queue the run goes through; required when teams exist."
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=20,
        description="Restarts of the launcher (runPolicy.backoffLimit) after a failure, each resuming from the"
        " latest checkpoint.",
    )

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, v: str) -> str:
        if not _RUN_ID_RE.match(v):
            raise ValueError(f"{v!r} must be 1-20 lowercase letters, digits and hyphens, e.g. run-001")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return _check_image(v)

    @field_validator("image_tag")
    @classmethod
    def _tag(cls, v: str | None) -> str | None:
        if v is not None and (v == "latest" or not re.fullmatch(r"[\w][\w.\-]{0,127}", v)):
            raise ValueError(f"{v!r} is not an immutable image tag (ECR tags are immutable; 'latest' is not allowed)")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ValueError(f"{k!r} is not an environment variable name")
        return v

    @model_validator(mode="after")
    def _image_source(self) -> _WorkloadBase:
        if self.image is None and self.image_tag is None:
            raise _KeyError("imageTag", "required unless image is given (the tag in the recipe's ECR repository)")
        if self.image is not None and self.image_tag is not None:
            raise _KeyError("imageTag", "give image or imageTag, not both")
        return self


class Llama2NeuronWorkload(_WorkloadBase):
    """Llama2 pretraining on Trainium with neuronx-nemo-megatron (Data on EKS, seed 000)."""

    recipe: Literal["llama2-neuron"] = Field(description="llama2-neuron")
    model: ModelConfig = Field(default_factory=lambda: ModelConfig.model_validate({}), description="Model shape.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Steps and schedule.")
    data: Llama2DataConfig = Field(default_factory=Llama2DataConfig, description="Tokenizer and dataset.")
    code_dir: str = Field(
        "/workspace/neuronx-nemo-megatron/nemo/examples/nlp/language_modeling",
        description="Directory of megatron_gpt_pretraining.py in the image.",
    )
    precompile_steps: int = Field(10, ge=1, description="Steps neuron_parallel_compile traces.")
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")
    shell: bool = Field(False, description="A shell pod with /shared mounted.")


class NemoGpuWorkload(_WorkloadBase):
    """NVIDIA NeMo pretraining on GPU nodes (p4de, p5; seed 002)."""

    recipe: Literal["nemo-gpu"] = Field(description="nemo-gpu")
    model: ModelConfig = Field(default_factory=lambda: ModelConfig.model_validate({}), description="Model shape.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Steps and schedule.")
    data_prefix: str | None = Field(
        None, description="Megatron data prefix under /shared (tokenized .bin/.idx); default: NeMo mock data."
    )
    config_name: str = Field("megatron_llama_config", description="NeMo Hydra config of megatron_gpt_pretraining.py.")
    code_dir: str = Field(
        "/opt/NeMo/examples/nlp/language_modeling", description="Directory of megatron_gpt_pretraining.py."
    )
    overrides: dict[str, str] = Field(default_factory=dict, description="Extra Hydra overrides (key: value).")
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")

    @field_validator("data_prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/shared/"):
            raise ValueError(f"{v!r} must be a path under /shared/ (the FSx file system every worker mounts)")
        return v


class CustomWorkload(_WorkloadBase):
    """Bring your own training code: any image and command, run once per node."""

    recipe: Literal["custom"] = Field(description="custom")
    command: list[str] = Field(min_length=1, description="Command run on every node (e.g. torchrun ...).")
    processes_per_node: int = Field(1, ge=1, description="Processes mpirun starts per node (1 for torchrun).")
    working_dir: str | None = Field(None, description="Working directory of the command.")
    tensorboard: bool = Field(False, description="TensorBoard over /shared/<workload>.")
    steps: int | None = Field(None, ge=1, description="Optimizer steps of the run, for its cost estimate.")
    checkpoint_every_steps: int = Field(
        500, ge=1, description="Exported as CHECKPOINT_EVERY_STEPS; the command saves to $CHECKPOINT_DIR that often."
    )

    @model_validator(mode="after")
    def _needs_image(self) -> CustomWorkload:
        if self.image is None:
            raise _KeyError("image", "required for recipe custom (there is no default repository)")
        return self


WorkloadConfig = Annotated[Llama2NeuronWorkload | NemoGpuWorkload | CustomWorkload, Field(discriminator="recipe")]
WORKLOAD_MODELS: dict[str, type[BaseModel]] = {
    "llama2-neuron": Llama2NeuronWorkload,
    "nemo-gpu": NemoGpuWorkload,
    "custom": CustomWorkload,
}


def _check_image(v: str | None) -> str | None:
    if v is None:
        return v
    if v.endswith(":latest") or not _IMAGE_RE.match(v):
        raise ValueError(
            f"{v!r} needs an explicit tag or digest other than latest (e.g. repo/name:1.2.3), so a run is repeatable"
        )
    return v


_CHART_VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+$")
_EKS_ADDON_VERSION_RE = re.compile(r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
_ECR_NAME_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_HH_MM_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")

# FSx for Lustre PERSISTENT_2 throughput tiers, MB/s per TiB of storage (FACTS.md; FSx API
# CreateFileSystemLustreConfiguration.PerUnitStorageThroughput).
LUSTRE_THROUGHPUT_TIERS = (125, 250, 500, 1000)


class StorageConfig(_Model):
    """The shared FSx for Lustre file system (`/shared`) and its S3 bucket for datasets and checkpoints."""

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        "PERSISTENT_2",
        description="PERSISTENT_2 (replicated, backed up, exported to S3) or SCRATCH_2 (nothing durable: no backups,"
        " no export; for throwaway experiments only).",
    )
    storage_capacity_gib: int = Field(1200, description="Capacity in GiB: 1200 or a multiple of 2400.")
    throughput_per_tib: int = Field(250, description="PERSISTENT_2 throughput, MB/s per TiB: 125, 250, 500 or 1000.")
    data_compression: Literal["LZ4", "NONE"] = Field("LZ4", description="LZ4 (default) or NONE.")
    lustre_version: Literal["2.15", "2.12"] = Field("2.15", description="Lustre version: 2.15 or 2.12.")
    backup_retention_days: int = Field(7, description="Days of automatic daily backups kept (1-90); PERSISTENT_2 only.")
    daily_backup_start_time: str = Field("05:00", description="UTC start of the daily backup window, HH:MM.")
    sync_deletes: bool = Field(
        False,
        description="Also import and export DELETED: deleting a file on /shared then deletes it in S3 too.",
    )

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        if v != 1200 and (v <= 0 or v % 2400):
            raise ValueError(
                f"{v} GiB is not a valid Lustre capacity; use 1200 or a multiple of 2400 (2400, 4800, ...)"
            )
        return v

    @field_validator("throughput_per_tib")
    @classmethod
    def _throughput(cls, v: int) -> int:
        if v not in LUSTRE_THROUGHPUT_TIERS:
            raise ValueError(
                f"{v} MB/s/TiB is not a PERSISTENT_2 tier; valid: {', '.join(map(str, LUSTRE_THROUGHPUT_TIERS))}"
            )
        return v

    @field_validator("backup_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if not 1 <= v <= 90:
            raise ValueError(f"{v} is outside 1..90 days (0 would turn daily backups off; FSx keeps at most 90)")
        return v

    @field_validator("daily_backup_start_time")
    @classmethod
    def _start(cls, v: str) -> str:
        if not _HH_MM_RE.match(v):
            raise ValueError(f"{v!r} is not a UTC time HH:MM such as 05:00")
        return v

    @property
    def persistent(self) -> bool:
        return self.deployment_type == "PERSISTENT_2"


class RepositoryConfig(_Model):
    """One ECR repository. Tags are always immutable and images always KMS-encrypted."""

    scan_on_push: bool = Field(True, description="Scan each pushed image for vulnerabilities.")
    untagged_expiry_days: int = Field(7, ge=1, le=3650, description="Delete untagged images after this many days.")


def _default_repositories() -> dict[str, RepositoryConfig]:
    # The example workloads' images: neuronx-nemo-megatron (Trainium, seed 000) and NeMo (GPU, seed 002).
    return {"neuronx-nemo-megatron": RepositoryConfig(), "nemo": RepositoryConfig()}


class RegistryConfig(_Model):
    """ECR repositories for the training images."""

    repositories: dict[str, RepositoryConfig] = Field(
        default_factory=_default_repositories,
        description="Repository key -> options; created as <cluster.name>/<key>. Replaces the defaults"
        " (neuronx-nemo-megatron, nemo) when given.",
    )

    @field_validator("repositories")
    @classmethod
    def _names(cls, v: dict[str, RepositoryConfig]) -> dict[str, RepositoryConfig]:
        for key in v:
            if len(key) > 128 or not _ECR_NAME_RE.match(key):
                raise ValueError(
                    f"{key!r} is not an ECR repository name: lowercase letters and digits, separated by . _ or -"
                )
        return v


class EksAddonVersions(_Model):
    """Versions of the EKS managed add-ons; null lets EKS install its default for the cluster version."""

    vpc_cni: str | None = Field(None, description="vpc-cni, e.g. v1.20.1-eksbuild.3.")
    coredns: str | None = Field(None, description="coredns.")
    kube_proxy: str | None = Field(None, description="kube-proxy.")
    pod_identity_agent: str | None = Field(None, description="eks-pod-identity-agent.")
    cloudwatch_observability: str | None = Field(None, description="amazon-cloudwatch-observability.")
    node_monitoring_agent: str | None = Field(None, description="eks-node-monitoring-agent.")

    @field_validator("*")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not _EKS_ADDON_VERSION_RE.match(v):
            raise ValueError(f"{v!r} is not an EKS add-on version like v1.20.1-eksbuild.3")
        return v


class AddonsConfig(_Model):
    """Cluster add-ons. Helm chart versions are pinned here; bump them deliberately."""

    # https://aws.github.io/eks-charts; v0.5.7 as pinned by terraform-aws-eks-blueprints (patterns/targeted-odcr).
    efa_device_plugin_chart: str = Field("v0.5.7", description="aws-efa-k8s-device-plugin chart version.")
    # https://nvidia.github.io/k8s-device-plugin; 0.17.1 as pinned by terraform-aws-eks-blueprints.
    nvidia_device_plugin_chart: str = Field("0.17.1", description="nvidia-device-plugin chart version.")
    # oci://public.ecr.aws/neuron/neuron-helm-chart; aws-neuron/neuron-helm-charts Chart.yaml.
    neuron_chart: str = Field("1.1.2", description="neuron-helm-chart version.")
    # https://kubernetes-sigs.github.io/aws-fsx-csi-driver (chart 1.11.0).
    fsx_csi_driver_chart: str = Field("1.11.0", description="aws-fsx-csi-driver chart version.")
    # kubeflow/mpi-operator releases; v0.8.0 is the release its README installs.
    mpi_operator_version: str = Field("v0.8.0", description="kubeflow/mpi-operator release (v0.8.x).")
    # oci://registry.k8s.io/kueue/charts/kueue; v0.19.7 is the latest v0.19 patch in kueue's CHANGELOG-0.19.
    kueue_chart: str = Field("0.19.7", description="Kueue chart version (v0.19.x: kueue.x-k8s.io/v1beta2).")
    # https://nvidia.github.io/dcgm-exporter/helm-charts (GPU stacks only).
    dcgm_exporter_chart: str = Field("4.1.1", description="dcgm-exporter chart version (GPU stacks only).")
    neuron_scheduler: bool = Field(True, description="Install the Neuron scheduler extension (Neuron stacks).")
    eks_addon_versions: EksAddonVersions = Field(
        default_factory=EksAddonVersions, description="EKS managed add-on versions."
    )

    @field_validator(
        "efa_device_plugin_chart",
        "nvidia_device_plugin_chart",
        "neuron_chart",
        "fsx_csi_driver_chart",
        "kueue_chart",
        "dcgm_exporter_chart",
    )
    @classmethod
    def _chart(cls, v: str) -> str:
        if not _CHART_VERSION_RE.match(v):
            raise ValueError(f"{v!r} is not an exact chart version like 1.2.3 (ranges are not pins)")
        return v

    @field_validator("mpi_operator_version")
    @classmethod
    def _mpi(cls, v: str) -> str:
        if not re.fullmatch(r"v0\.8\.\d+", v):
            raise ValueError(f"{v!r} is not a v0.8.x release (kubeflow.org/v2beta1 with Kueue support), e.g. v0.8.0")
        return v


class TeamConfig(_Model):
    """One team sharing the cluster: a Kueue ClusterQueue with a quota in whole nodes of one node group."""

    node_group: str = Field(description="Node group (nodeGroups[].name) the team's quota is on.")
    nodes: int = Field(ge=0, description="Nodes of the node group the team is guaranteed (nominal quota).")
    borrowing_limit_nodes: int | None = Field(
        0,
        ge=0,
        description="Nodes the team may borrow from other teams' unused quota; null: no limit.",
    )
    priority: int = Field(
        0, ge=-1_000_000, le=1_000_000, description="Priority of the team's runs (a WorkloadPriorityClass)."
    )


class QueueingConfig(_Model):
    """Kueue admission: all-or-nothing (waitForPodsReady) and how often an evicted run is requeued."""

    pods_ready_timeout_minutes: int = Field(
        30,
        ge=1,
        le=1440,
        description="Minutes an admitted run has to get every pod ready (image pulls included) before it is"
        " evicted and requeued, so no run holds half a placement.",
    )
    recovery_timeout_minutes: int = Field(
        15,
        ge=1,
        le=1440,
        description="Minutes a running run may miss a pod (a lost node being replaced) before it is requeued.",
    )
    requeue_limit: int = Field(
        5, ge=0, le=100, description="Requeues after a readiness timeout before Kueue deactivates the run."
    )


class StackConfig(_Model):
    """The whole stack config (`llm-training-eks:*` keys plus `aws:region`)."""

    region: str = Field(description="aws:region")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="VPC layout.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="EKS control plane.")
    system_node_group: SystemNodeGroupConfig = Field(
        default_factory=SystemNodeGroupConfig, description="Nodes for controllers and add-ons."
    )
    node_groups: list[NodeGroupConfig] = Field(default_factory=list, description="Accelerated EFA node groups.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Shared FSx for Lustre and S3.")
    registry: RegistryConfig = Field(default_factory=RegistryConfig, description="ECR repositories.")
    addons: AddonsConfig = Field(default_factory=AddonsConfig, description="Cluster add-ons.")
    protect_stateful_resources: bool = Field(
        True, description="Protect KMS keys, FSx, buckets and ECR from deletion by `pulumi destroy`/`up`."
    )
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on every AWS resource.")
    workloads: dict[str, WorkloadConfig] = Field(default_factory=dict, description="Training runs by name.")
    teams: dict[str, TeamConfig] = Field(
        default_factory=dict,
        description="Teams sharing the cluster (Kueue queues); empty: one `default` queue over every node group.",
    )
    queueing: QueueingConfig = Field(default_factory=QueueingConfig, description="Kueue admission settings.")
    hugging_face_token: SecretStr | None = Field(
        None,
        description="Hugging Face token for gated tokenizers and datasets; a Pulumi secret (config set --secret).",
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _REGION_RE.match(v):
            raise ValueError(f"{v!r} is not an AWS region name like us-west-2")
        return v

    @property
    def availability_zones(self) -> list[str]:
        """The VPC's AZs: as configured, or the node groups' AZs padded with the region's first ones."""
        if self.network.availability_zones:
            return list(self.network.availability_zones)
        azs: list[str] = []
        for ng in self.node_groups:
            if ng.availability_zone and ng.availability_zone not in azs:
                azs.append(ng.availability_zone)
        for letter in "abcdef":
            if len(azs) >= self.network.az_count:
                break
            az = f"{self.region}{letter}"
            if az not in azs:
                azs.append(az)
        return azs

    def node_group_az(self, ng: NodeGroupConfig) -> str:
        """The AZ a node group runs in."""
        return ng.availability_zone or self.availability_zones[0]


# --------------------------------------------------------------------------- helpers


class _KeyError(ValueError):
    """A model-level check that blames one field of the model (turned into `path.field`)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


def _check_sizes(desired: int, min_size: int | None, max_size: int | None) -> None:
    hi = max_size if max_size is not None else max(desired, min_size or 0, 1)
    if min_size is not None and min_size > hi:
        raise _KeyError("minSize", f"{min_size} is greater than maxSize {hi}")
    lo = min_size if min_size is not None else min(desired, hi)
    if not lo <= desired <= hi:
        raise _KeyError("desiredSize", f"{desired} must lie between minSize {lo} and maxSize {hi}")
    if hi < 1:
        raise _KeyError("maxSize", "must be at least 1 (EKS requires it)")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """camelCase key -> nested model class (or None) for a model's fields."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        ann = info.annotation
        nested = None
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                nested = cand
        out[key] = nested
    return out


def _is_map_field(model: type[BaseModel], key: str) -> bool:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return getattr(info.annotation, "__origin__", None) is dict
    return False


def _model_at(path: tuple[Any, ...], root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    model: type[BaseModel] | None = root or StackConfig
    skip_key = False
    for part in path:
        if model is None:
            return None
        if isinstance(part, int) or skip_key:
            # A list index, or the user's key of a map of models (registry.repositories.<key>).
            skip_key = False
            continue
        skip_key = _is_map_field(model, part)
        model = _fields_of(model).get(part)
    return model


def _format_path(loc: Iterable[Any]) -> str:
    parts = list(loc)
    if parts[:1] == ["region"]:
        return "aws:region"
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _messages(err: ValidationError) -> list[str]:
    lines: list[str] = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = e["msg"]
        kind = e["type"]
        parent_path: tuple[Any, ...] = loc[:-1]
        root: type[BaseModel] | None = None
        if loc[:1] == ("workloads",) and len(loc) >= 3 and loc[2] in WORKLOAD_MODELS:
            # A discriminated union puts the recipe in the location; the stack file has no such level.
            root, parent_path, loc = WORKLOAD_MODELS[loc[2]], loc[3:-1], (*loc[:2], *loc[3:])
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "recipe")
            msg = f"{e['input'].get('recipe')!r} is not a recipe; valid: {', '.join(WORKLOAD_MODELS)}"
            if kind == "union_tag_not_found":
                msg = f"required key is missing; valid: {', '.join(WORKLOAD_MODELS)}"
        if kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            exc = (e.get("ctx") or {}).get("error")
            if isinstance(exc, _KeyError):
                loc = (*loc, exc.key)
                msg = msg.removeprefix(f"{exc.key}: ")
        elif kind == "extra_forbidden":
            parent = _model_at(parent_path, root)
            valid = sorted(_fields_of(parent)) if parent else []
            hint = _did_you_mean(str(loc[-1]), valid)
            msg = f"unknown key{hint}; valid keys here: {', '.join(valid)}"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind == "literal_error":
            msg = f"{e['input']!r} is not allowed; " + msg[0].lower() + msg[1:]
        elif kind in (
            "int_parsing",
            "int_type",
            "bool_parsing",
            "bool_type",
            "string_type",
            "list_type",
            "dict_type",
            "model_type",
            "model_attributes_type",
            "int_from_float",
        ):
            msg = f"{msg} (got {e['input']!r})"
        lines.append(f"{_format_path(loc)}: {msg}")
    return lines


def _cross_checks(raw: Mapping[str, Any]) -> list[str]:
    """Checks that span sections. They read the raw dict defensively so that they still
    run (and their problems are reported with the rest) when another key is invalid."""
    problems: list[str] = []
    region = raw.get("region")
    groups = raw.get("nodeGroups")
    network = raw.get("network") if isinstance(raw.get("network"), dict) else {}
    vpc_azs = network.get("availabilityZones") if isinstance(network, dict) else None

    if isinstance(vpc_azs, list) and isinstance(region, str):
        for i, az in enumerate(vpc_azs):
            if isinstance(az, str) and _AZ_RE.match(az) and not az.startswith(region):
                problems.append(f"network.availabilityZones[{i}]: {az} is not in region {region}")

    if not isinstance(groups, list):
        return problems
    seen: dict[str, int] = {}
    for i, ng in enumerate(groups):
        if not isinstance(ng, dict):
            continue
        name = ng.get("name")
        if isinstance(name, str):
            if name in seen:
                problems.append(
                    f"nodeGroups[{i}].name: {name!r} is already used by nodeGroups[{seen[name]}]; names must be unique"
                )
            else:
                seen[name] = i
        az = ng.get("availabilityZone")
        if isinstance(az, str) and _AZ_RE.match(az):
            if isinstance(region, str) and not az.startswith(region):
                problems.append(
                    f"nodeGroups[{i}].availabilityZone: {az} is not in region {region}; use {region}a, {region}b, ..."
                )
            elif isinstance(vpc_azs, list) and az not in vpc_azs:
                problems.append(
                    f"nodeGroups[{i}].availabilityZone: {az} is not one of network.availabilityZones"
                    f" ({', '.join(map(str, vpc_azs))})"
                )
    return problems


# --------------------------------------------------------------------------- loading


def _workload_checks(cfg: StackConfig) -> list[str]:
    """Checks of each workload against the node groups: every problem, each naming its key."""
    problems: list[str] = []
    groups = {ng.name: (i, ng) for i, ng in enumerate(cfg.node_groups)}
    for name, w in cfg.workloads.items():
        key = f"workloads.{name}"
        if not _RUN_ID_RE.match(name):
            problems.append(f"{key}: the workload name must be 1-20 lowercase letters, digits and hyphens")
        if name and w.recipe == "llama2-neuron" and cfg.hugging_face_token is None:
            problems.append(
                f"huggingFaceToken: required by {key} (llama2-neuron downloads the gated Llama tokenizer);"
                " set it with `pulumi config set --secret huggingFaceToken hf_...`"
            )
        if w.node_group not in groups:
            known = ", ".join(groups) or "none are defined"
            hint = _did_you_mean(w.node_group, groups)
            problems.append(f"{key}.nodeGroup: unknown node group {w.node_group!r}{hint}; node groups: {known}")
            continue
        i, ng = groups[w.node_group]
        it = ng.instance
        wanted = RECIPE_ACCELERATOR[w.recipe]
        if wanted is not None and it.accelerator != wanted:
            kind = {"neuron": "a Neuron (Trainium)", "nvidia": "an NVIDIA GPU"}[wanted]
            problems.append(
                f"{key}.nodeGroup: recipe {w.recipe} needs {kind} node group; {ng.name!r} runs {it.name}"
                f" ({it.accelerator_name})"
            )
            continue
        if w.nodes > ng.desired_size:
            problems.append(
                f"{key}.nodes: {w.nodes} nodes, but node group {ng.name!r} runs {ng.desired_size}"
                f" (nodeGroups[{i}].desiredSize); use at most {ng.desired_size} or grow the node group"
            )
        if isinstance(w, CustomWorkload) and w.processes_per_node > ranks_per_node(it):
            problems.append(
                f"{key}.processesPerNode: {w.processes_per_node} is more than the {ranks_per_node(it)}"
                f" accelerator ranks of a {it.name}"
            )
        if isinstance(w, Llama2NeuronWorkload | NemoGpuWorkload):
            m = w.model
            ranks = w.nodes * ranks_per_node(it)
            model_parallel = m.tensor_parallel * m.pipeline_parallel
            if ranks % model_parallel:
                problems.append(
                    f"{key}.model.tensorParallel: TP {m.tensor_parallel} x PP {m.pipeline_parallel} = {model_parallel}"
                    f" does not divide the {ranks} ranks ({w.nodes} nodes x {ranks_per_node(it)})"
                )
                continue
            dp = ranks // model_parallel
            if m.global_batch_size % (dp * m.micro_batch_size):
                problems.append(
                    f"{key}.model.globalBatchSize: {m.global_batch_size} is not divisible by data-parallel size {dp}"
                    f" x microBatchSize {m.micro_batch_size} = {dp * m.micro_batch_size}"
                )
            if m.tensor_parallel > ranks_per_node(it):
                problems.append(
                    f"{key}.model.tensorParallel: {m.tensor_parallel} spans nodes; keep it at most"
                    f" {ranks_per_node(it)} (the ranks of one {it.name})"
                )
    return problems


def _team_checks(cfg: StackConfig) -> list[str]:
    """Teams against the node groups, and each workload against its team: quotas never exceed
    a node group's capacity, and every run can be admitted by its team's queue."""
    problems: list[str] = []
    groups = {ng.name: (i, ng) for i, ng in enumerate(cfg.node_groups)}
    used: dict[str, list[tuple[str, int]]] = {}
    for name, team in cfg.teams.items():
        key = f"teams.{name}"
        if len(name) > 40 or not _DNS_LABEL_RE.match(name):
            problems.append(f"{key}: the team name must be 1-40 lowercase letters, digits and hyphens")
        if team.node_group not in groups:
            known = ", ".join(groups) or "none are defined"
            hint = _did_you_mean(team.node_group, groups)
            problems.append(f"{key}.nodeGroup: unknown node group {team.node_group!r}{hint}; node groups: {known}")
            continue
        i, ng = groups[team.node_group]
        used.setdefault(ng.name, []).append((name, team.nodes))
        total = sum(n for _, n in used[ng.name])
        if total > ng.desired_size and total - team.nodes <= ng.desired_size:
            shares = ", ".join(f"{t}: {n}" for t, n in used[ng.name])
            problems.append(
                f"{key}.nodes: the teams on node group {ng.name!r} ask for {total} nodes ({shares}), but it runs"
                f" {ng.desired_size} (nodeGroups[{i}].desiredSize); quotas must not exceed the nodes that exist"
            )
        room = ng.desired_size - team.nodes
        if team.borrowing_limit_nodes is not None and team.borrowing_limit_nodes > max(room, 0):
            problems.append(
                f"{key}.borrowingLimitNodes: {team.borrowing_limit_nodes} is more than the {max(room, 0)} nodes of"
                f" {ng.name!r} outside the team's own quota"
            )
    for name, w in cfg.workloads.items():
        key = f"workloads.{name}.team"
        if not cfg.teams:
            if w.team is not None:
                problems.append(
                    f"{key}: {w.team!r} is not a team (no teams are defined; runs without teams use the default queue)"
                )
            continue
        if w.team is None:
            problems.append(f"{key}: required when teams are defined; teams: {', '.join(cfg.teams)}")
            continue
        wteam = cfg.teams.get(w.team)
        if wteam is None:
            hint = _did_you_mean(w.team, cfg.teams)
            problems.append(f"{key}: unknown team {w.team!r}{hint}; teams: {', '.join(cfg.teams)}")
            continue
        team = wteam
        if team.node_group != w.node_group:
            problems.append(
                f"{key}: team {w.team!r} has its quota on node group {team.node_group!r}, not {w.node_group!r}"
                f" (workloads.{name}.nodeGroup)"
            )
            continue
        reach = team.nodes + team.borrowing_limit_nodes if team.borrowing_limit_nodes is not None else None
        if reach is not None and w.nodes > reach:
            problems.append(
                f"workloads.{name}.nodes: {w.nodes} nodes can never be admitted: team {w.team!r} has {team.nodes}"
                f" nodes and may borrow {team.borrowing_limit_nodes} (teams.{w.team})"
            )
    for i, ng in enumerate(cfg.node_groups):
        if ng.name == SYSTEM_FLAVOR:
            problems.append(f"nodeGroups[{i}].name: {SYSTEM_FLAVOR!r} is the system node group's name; choose another")
    return problems


# The system node group's name (its label value and its Kueue ResourceFlavor).
SYSTEM_FLAVOR = "system"

# Keys that may only be stored encrypted (`pulumi config set --secret`).
SECRET_KEYS = ("huggingFaceToken",)


def parse(raw: Mapping[str, Any], secret_keys: Iterable[str] | None = None) -> StackConfig:
    """Validate a config dict (camelCase keys, `region` for aws:region) into a StackConfig.

    `secret_keys` are the keys stored encrypted in the stack; when given, a key of
    SECRET_KEYS stored in plain text is a problem. Raises ConfigError with every problem found.
    """
    problems: list[str] = []
    if secret_keys is not None:
        stored_secret = set(secret_keys)
        problems.extend(
            f"{key}: must be stored encrypted, not in plain text: pulumi config set --secret {key} <value>"
            for key in SECRET_KEYS
            if raw.get(key) not in (None, "") and key not in stored_secret
        )
    cfg: StackConfig | None = None
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as e:
        problems.extend(_messages(e))
    for p in _cross_checks(raw):
        if p not in problems:
            problems.append(p)
    if cfg is not None:
        problems.extend(_workload_checks(cfg))
        problems.extend(_team_checks(cfg))
    if problems or cfg is None:
        raise ConfigError(problems)
    return cfg


def from_stack_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn flat stack config (`llm-training-eks:key` / `aws:region`) into the dict `parse` takes.

    Values may be native (read from a stack file) or strings as the Pulumi engine passes
    them (objects and lists JSON-encoded, scalars as text); both give the same result.
    Keys of other namespaces (aws:, kubernetes:, pulumi:) are not ours and are left alone.
    """
    raw: dict[str, Any] = {}
    for full_key, value in values.items():
        ns, _, key = full_key.rpartition(":")
        if full_key == "aws:region":
            raw["region"] = value
        elif ns in ("", PROJECT):
            if isinstance(value, str) and value[:1] in ("{", "["):
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(value)
            raw[key] = value
    if "region" not in raw:
        raw["region"] = None
    return raw


def load() -> StackConfig:
    """Read and validate the current stack's config from the Pulumi engine.

    On invalid config, logs each problem as a Pulumi error and raises `pulumi.RunError`
    (reported without a traceback) before any resource is declared.
    """
    import pulumi
    import pulumi.runtime.config as runtime_config

    values = dict(runtime_config.CONFIG.get())
    secret = [k.rpartition(":")[2] for k in values if runtime_config.is_config_secret(k)]
    try:
        return parse(from_stack_values(values), secret_keys=secret)
    except ConfigError as e:
        for line in e.problems:
            pulumi.log.error(line)
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)); nothing was created") from None
