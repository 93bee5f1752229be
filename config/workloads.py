"""Training runs (`workloads`): one model per recipe, discriminated by `recipe`."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field, field_validator, model_validator

from config.base import RUN_ID_RE, KeyProblem, Model, check_image
from config.training import (
    HealthCheckConfig,
    Llama2DataConfig,
    ModelConfig,
    TrainingConfig,
    parallelism_problems,
)
from facts import instances

# `workloads` is a map of named runs. Each run names its recipe; the recipe picks the model
# below (a union discriminated by `recipe`). A recipe model carries its facts as class
# attributes (the accelerator it needs, the ECR repository its image comes from, the steps it
# plans); its builder is one file in workloads/manifests/. Checks that need the node groups
# (unknown node group, accelerator mismatch, node count, ranks and parallelism) run after
# parsing, in config/checks.py, so each can name its key.


class RunConfig(Model):
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
        if not RUN_ID_RE.match(v):
            raise ValueError(f"{v!r} must be 1-20 lowercase letters, digits and hyphens, e.g. run-001")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return check_image(v)

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
    def _image_source(self) -> RunConfig:
        if self.image is None and self.image_tag is None:
            raise KeyProblem("imageTag", "required unless image is given (the tag in the recipe's ECR repository)")
        if self.image is not None and self.image_tag is not None:
            raise KeyProblem("imageTag", "give image or imageTag, not both")
        return self

    @property
    def model_shape(self) -> ModelConfig | None:
        """The transformer shape and parallelism, for recipes that train a Megatron model."""
        return None

    @property
    def optimizer_steps(self) -> int | None:
        """Optimizer steps of the whole run, where the config says (for its cost)."""
        return None

    @property
    def checkpoint_interval(self) -> int:
        """Steps between checkpoints."""
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


class Llama2NeuronWorkload(MegatronRun):
    """Llama2 pretraining on Trainium with neuronx-nemo-megatron (the Data on EKS Llama2 example)."""

    RECIPE: ClassVar[str] = "llama2-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "neuronx-nemo-megatron"
    STEPS: ClassVar[tuple[str, ...]] = (
        "secret",
        "tokenizer",
        "dataset",
        "tokenize",
        "precompile",
        "healthcheck",
        "train",
        "tensorboard",
        "shell",
    )
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = "downloads the gated Llama tokenizer"

    recipe: Literal["llama2-neuron"] = Field(description="llama2-neuron")
    data: Llama2DataConfig = Field(default_factory=Llama2DataConfig, description="Tokenizer and dataset.")
    code_dir: str = Field(
        "/workspace/neuronx-nemo-megatron/nemo/examples/nlp/language_modeling",
        description="Directory of megatron_gpt_pretraining.py in the image.",
    )
    precompile_steps: int = Field(10, ge=1, description="Steps neuron_parallel_compile traces.")
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")
    shell: bool = Field(False, description="A shell pod with /shared mounted.")


class NemoGpuWorkload(MegatronRun):
    """NVIDIA NeMo pretraining on GPU nodes (p4de, p5)."""

    RECIPE: ClassVar[str] = "nemo-gpu"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "nvidia"
    REPOSITORY: ClassVar[str | None] = "nemo"
    STEPS: ClassVar[tuple[str, ...]] = ("healthcheck", "train", "tensorboard")

    recipe: Literal["nemo-gpu"] = Field(description="nemo-gpu")
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


class CustomWorkload(RunConfig):
    """Bring your own training code: any image and command, run once per node."""

    RECIPE: ClassVar[str] = "custom"
    STEPS: ClassVar[tuple[str, ...]] = ("healthcheck", "train", "tensorboard")

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
            raise KeyProblem("image", "required for recipe custom (there is no default repository)")
        return self

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


Run = Llama2NeuronWorkload | NemoGpuWorkload | CustomWorkload
WorkloadConfig = Annotated[Run, Field(discriminator="recipe")]
RECIPES: dict[str, type[RunConfig]] = {model.RECIPE: model for model in get_args(Run)}
"""Recipe name -> its config model."""
