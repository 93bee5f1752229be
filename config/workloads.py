"""Training runs (`workloads`): one model per recipe, discriminated by `recipe`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field, field_validator, model_validator

from config.base import IMAGE_TAG_RE, RUN_ID_RE, KeyProblem, check_image, matches
from config.run_env import ProcessEnv
from config.training import (
    BertDataConfig,
    BertTrainingConfig,
    HealthCheckConfig,
    Llama2DataConfig,
    ModelConfig,
    NemoTokenizerConfig,
    TrainingConfig,
    parallelism_problems,
)
from facts import images, instances, versions
from facts.names import SYSTEM_NODE_GROUP

# `workloads` is a map of named runs. Each run names its recipe; the recipe picks the model
# below (a union discriminated by `recipe`). A recipe model carries its facts as class
# attributes (the accelerator it needs, the ECR repository its image is built into from
# images/<repository>/, the steps it plans); its builder is one file in workloads/manifests/.
# Checks that need the node groups or the storage (unknown node group, accelerator mismatch,
# node count, ranks and parallelism, Neuron SDK versus instance family, checkpoint space)
# run after parsing, in config/checks/, so each can name its key.


class RunConfig(ProcessEnv):
    """What every training run says, whatever its recipe.

    A recipe subclass states its facts as class attributes: the accelerator it needs
    (None: any), the ECR repository of its image (None: the stack must name `image`), and
    the steps it plans, in order (the builder in workloads/manifests/ emits exactly these).
    """

    RECIPE: ClassVar[str]
    ACCELERATOR: ClassVar[instances.Accelerator | None] = None
    REPOSITORY: ClassVar[str | None] = None
    STEPS: ClassVar[tuple[str, ...]]
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = None
    """Why the recipe needs the stack's Hugging Face token; None: it does not."""
    NEMO_MEGATRON: ClassVar[bool] = False
    """The recipe runs neuronx-nemo-megatron (Neuron SDK <= 2.22, trn1/trn1n)."""
    RUNS_ON_CPU: ClassVar[bool] = False
    """The recipe trains on CPUs, on the system node group (no accelerator, no EFA)."""

    node_group: str = Field(description="Name of the node group (nodeGroups[].name) the run uses.")
    nodes: int = Field(ge=1, description="Nodes of the run (one worker pod per node).")
    run_id: str = Field(description="Run id; a new value starts a new run. Lowercase letters, digits, hyphens.")
    image: str | None = Field(None, description="Container image with an explicit tag or digest.")
    image_tag: str | None = Field(
        None,
        description="Tag in the stack's ECR repository of the recipe; default: the tag the stack builds from"
        " images/<repository>/.",
    )
    neuron_sdk: str | None = Field(
        None,
        description="Neuron SDK of the image (Neuron node groups), when neither its tag nor the repository's"
        " Dockerfile says.",
    )
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
        if not matches(RUN_ID_RE, v):
            raise ValueError(f"{v!r} must be 1-20 lowercase letters, digits and hyphens, e.g. run-001")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return check_image(v)

    @field_validator("image_tag")
    @classmethod
    def _tag(cls, v: str | None) -> str | None:
        if v is not None and (v == "latest" or not matches(IMAGE_TAG_RE, v)):
            raise ValueError(f"{v!r} is not an immutable image tag (ECR tags are immutable; 'latest' is not allowed)")
        return v

    @field_validator("neuron_sdk")
    @classmethod
    def _sdk(cls, v: str | None) -> str | None:
        if v is not None and not matches(r"2\.[0-9]+\.[0-9]+", v):
            raise ValueError(f"{v!r} is not a Neuron SDK version like 2.22.0")
        return v

    @model_validator(mode="after")
    def _image_source(self) -> RunConfig:
        if self.image is not None and self.image_tag is not None:
            raise KeyProblem("imageTag", "give image or imageTag, not both")
        if self.image is None and self.REPOSITORY is None:
            raise KeyProblem("image", f"required for recipe {self.RECIPE} (there is no default repository)")
        return self

    @property
    def built_image(self) -> images.Image | None:
        """The image this repository builds, when the run uses the recipe's repository."""
        return images.IMAGES.get(self.REPOSITORY or "") if self.image is None else None

    @property
    def image_tag_or_built(self) -> str | None:
        """The tag in the recipe's repository: as configured, or the one the stack builds."""
        if self.image is not None:
            return None
        built = self.built_image
        return self.image_tag or (built.tag if built else None)

    @property
    def sdk(self) -> tuple[str | None, str]:
        """The Neuron SDK of the run's image and the key that says so."""
        if self.neuron_sdk:
            return self.neuron_sdk, "neuronSdk"
        if self.image:
            return versions.sdk_of_image(self.image), "image"
        built = self.built_image
        return (built.neuron_sdk if built else None), "image"

    @property
    def model_shape(self) -> ModelConfig | None:
        """The transformer shape and parallelism, for recipes that train a Megatron model."""
        return None

    @property
    def optimizer_steps(self) -> int | None:
        """Optimizer steps of the whole run, where the config says (for its cost)."""
        return None

    @property
    def checkpoint_interval(self) -> int | None:
        """Steps between checkpoints (None: not counted in steps)."""
        raise NotImplementedError

    @property
    def checkpoints_kept(self) -> int:
        """How many checkpoints the run keeps on the shared file system at once."""
        raise NotImplementedError

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """The recipe's own rules against the instance type of its node group."""
        model = self.model_shape
        return parallelism_problems(key, model, self.nodes, instance) if model is not None else []


class MegatronRun(RunConfig):
    """A run that trains a Megatron GPT model (NeMo, neuronx-nemo-megatron): shape and schedule."""

    model: ModelConfig = Field(default_factory=lambda: ModelConfig.model_validate({}), description="Model shape.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Steps and schedule.")

    @property
    def model_shape(self) -> ModelConfig:
        return self.model

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @property
    def checkpoint_interval(self) -> int:
        return self.training.checkpoint_every_steps

    @property
    def checkpoints_kept(self) -> int:
        return self.training.checkpoints_to_keep


class Llama2NeuronWorkload(MegatronRun):
    """Llama2 pretraining on Trainium with neuronx-nemo-megatron (the Data on EKS Llama2 example)."""

    RECIPE: ClassVar[str] = "llama2-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "neuronx-nemo-megatron"
    STEPS: ClassVar[tuple[str, ...]] = (
        "image",
        "dirs",
        "secret",
        "tokenizer",
        "dataset",
        "tokenize",
        "train",
        "tensorboard",
        "shell",
    )
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = "downloads the gated Llama tokenizer"
    NEMO_MEGATRON: ClassVar[bool] = True

    recipe: Literal["llama2-neuron"] = Field(description="llama2-neuron")
    data: Llama2DataConfig = Field(default_factory=Llama2DataConfig, description="Tokenizer and dataset.")
    repo_dir: str = Field(
        "/neuronx-nemo-megatron",
        description="The neuronx-nemo-megatron checkout in the image (examples and scripts are under it).",
    )
    precompile_steps: int = Field(
        4, ge=1, description="Steps neuron_parallel_compile traces (upstream's compile-only run uses 4)."
    )
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")
    shell: bool = Field(False, description="A shell pod with /shared mounted.")


class NemoGpuWorkload(MegatronRun):
    """NVIDIA NeMo pretraining on GPU nodes (p4de, p5)."""

    RECIPE: ClassVar[str] = "nemo-gpu"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "nvidia"
    REPOSITORY: ClassVar[str | None] = "nemo"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "train", "tensorboard")

    recipe: Literal["nemo-gpu"] = Field(description="nemo-gpu")
    data_prefix: str | None = Field(
        None, description="Megatron data prefix under /shared (tokenized .bin/.idx); default: NeMo mock data."
    )
    tokenizer: NemoTokenizerConfig = Field(
        default_factory=NemoTokenizerConfig, description="The tokenizer the data was made with."
    )
    config_name: Literal["megatron_llama_config"] = Field(
        "megatron_llama_config", description="NeMo Hydra config of megatron_gpt_pretraining.py."
    )
    repo_dir: str = Field("/opt/NeMo", description="The NeMo checkout in the image (examples/ is under it).")
    overrides: dict[str, str] = Field(default_factory=dict, description="Extra Hydra overrides (key: value).")
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")

    @field_validator("data_prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/shared/"):
            raise ValueError(f"{v!r} must be a path under /shared/ (the FSx file system every worker mounts)")
        return v


class CustomWorkload(RunConfig):
    """Bring your own training code: any image and command, run once per node."""

    RECIPE: ClassVar[str] = "custom"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "train", "tensorboard")

    recipe: Literal["custom"] = Field(description="custom")
    command: list[str] = Field(min_length=1, description="Command run on every node (e.g. torchrun ...).")
    processes_per_node: int = Field(1, ge=1, description="Processes mpirun starts per node (1 for torchrun).")
    working_dir: str | None = Field(None, description="Working directory of the command.")
    tensorboard: bool = Field(False, description="TensorBoard over /shared/<workload>.")
    steps: int | None = Field(None, ge=1, description="Optimizer steps of the run, for its cost estimate.")
    checkpoint_every_steps: int = Field(
        500, ge=1, description="Exported as CHECKPOINT_EVERY_STEPS; the command saves to $CHECKPOINT_DIR that often."
    )

    @property
    def optimizer_steps(self) -> int | None:
        return self.steps

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        if self.processes_per_node > instance.ranks_per_node:
            return [
                f"{key}.processesPerNode: {self.processes_per_node} is more than the {instance.ranks_per_node}"
                f" accelerator ranks of a {instance.name}"
            ]
        return []

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_every_steps

    @property
    def checkpoints_kept(self) -> int:
        return 1


class BertNeuronWorkload(RunConfig):
    """BERT-large phase-1 pretraining on Trainium, data parallel (the Neuron BERT tutorial)."""

    RECIPE: ClassVar[str] = "bert-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "bert-neuronx"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "dataset", "train", "tensorboard")

    recipe: Literal["bert-neuron"] = Field(description="bert-neuron")
    training: BertTrainingConfig = Field(default_factory=BertTrainingConfig, description="Steps and schedule.")
    data: BertDataConfig = Field(default_factory=BertDataConfig, description="Tokenized dataset.")
    repo_dir: str = Field(
        "/opt/aws-neuron-samples",
        description="The aws-neuron-samples checkout in the image (the BERT example is under it).",
    )
    tensorboard: bool = Field(True, description="TensorBoard over /shared/<workload>.")

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @property
    def checkpoint_interval(self) -> None:
        return None  # the script checkpoints per dataset shard, not per step

    @property
    def checkpoints_kept(self) -> int:
        return self.training.checkpoints_to_keep

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        ranks = self.nodes * instance.ranks_per_node
        if self.training.grad_accum(ranks) is None:
            t = self.training
            return [
                f"{key}.training.globalBatchSize: {t.global_batch_size} is not divisible by {ranks} NeuronCores x"
                f" batchSize {t.batch_size} = {ranks * t.batch_size}"
            ]
        return []


class DdpCpuWorkload(RunConfig):
    """PyTorch DDP over gloo on the system nodes' CPUs, the first run of a platform: the MPI operator,
    Kueue, the shared volume, checkpoints, a restart and a resume, with a public image."""

    RECIPE: ClassVar[str] = "ddp-cpu"
    RUNS_ON_CPU: ClassVar[bool] = True
    STEPS: ClassVar[tuple[str, ...]] = ("train",)

    recipe: Literal["ddp-cpu"] = Field(description="ddp-cpu")
    node_group: str = Field(SYSTEM_NODE_GROUP, description="The system node group (`system`): it trains on its CPUs.")
    image: str | None = Field(images.PUBLIC_CPU_IMAGE, description="PyTorch, Open MPI and sshd; default: public.")
    processes_per_node: int = Field(2, ge=1, le=64, description="gloo ranks torchrun starts per node (<= its vCPUs).")
    steps: int = Field(200, ge=1, le=1_000_000, description="Optimizer steps of the run.")
    checkpoint_every_steps: int = Field(50, ge=1, description="Steps between checkpoints in $CHECKPOINT_DIR.")
    checkpoints_to_keep: int = Field(2, ge=1, le=100, description="Checkpoints kept on the shared file system.")
    interrupt_once_at_step: int | None = Field(
        None, ge=1, description="Stop the first attempt once, after the first checkpoint at or past this step, so the"
        " launcher's restart and the resume from that checkpoint are proven; the run fails if it never resumed."
    )  # fmt: skip

    @model_validator(mode="after")
    def _interrupt_before_the_end(self) -> DdpCpuWorkload:
        stop = self.interrupt_once_at_step
        if stop is not None and stop >= self.steps:
            raise KeyProblem(
                "interruptOnceAtStep", f"{stop} is not before the last step ({self.steps}): nothing to resume"
            )
        if stop is not None and self.max_retries < 1:
            raise KeyProblem("maxRetries", "0 leaves no restart to resume after interruptOnceAtStep; use at least 1")
        return self

    @property
    def optimizer_steps(self) -> int:
        return self.steps

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoint_every_steps

    @property
    def checkpoints_kept(self) -> int:
        return self.checkpoints_to_keep

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        hc = self.health_check
        unused = [
            n
            for n, v in (
                ("messageSize", hc.message_size),
                ("minBusBandwidthGBPerSecond", hc.min_bus_bandwidth_gb_per_second),
            )
            if v
        ]
        problems = [f"{key}.healthCheck.{n}: the CPU gate runs no collective test; leave it out" for n in unused]
        if self.processes_per_node > instance.cpu_worker_vcpus:
            problems.append(
                f"{key}.processesPerNode: {self.processes_per_node} is more than the {instance.cpu_worker_vcpus} vCPUs"
                f" a worker gets on a {instance.name} (a quarter of a system node)"
            )
        return problems


Run = Llama2NeuronWorkload | NemoGpuWorkload | BertNeuronWorkload | CustomWorkload | DdpCpuWorkload
WorkloadConfig = Annotated[Run, Field(discriminator="recipe")]
RECIPES: dict[str, type[RunConfig]] = {model.RECIPE: model for model in get_args(Run)}
"""Recipe name -> its config model."""
