"""What every workload says, whatever its kind and recipe; the three kinds (training, serving,
acceptance), each with only its own interface; and what each recipe must state about itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from config.base import IMAGE_TAG_RE, RUN_ID_RE, KeyProblem, Refusal, check_image, matches
from config.run_env import ProcessEnv
from config.training import HealthCheckConfig, ModelConfig, parallelism_problems
from config.workloads.recipe import Arguments, Converter, ExampleStacks, RecipeDocs
from estimates import run_length, schedule, step_time
from estimates.checkpoints import CheckpointInput, CheckpointModel
from estimates.startup import CompileTime
from estimates.step_time import StepTime
from estimates.throughput import RunWork
from facts import images, instances, needs, versions
from facts.peak_flops import Precision


def _without_unused(schema: dict[str, Any], model: type[Any]) -> None:
    """A recipe's JSON Schema leaves out the keys it does not take (its UNUSED_KEYS)."""
    for name in getattr(model, "UNUSED_KEYS", ()):
        schema.get("properties", {}).pop(to_camel(name), None)


Kind = Literal["training", "serving", "acceptance"]
"""What a workload is: a training run, a server, or an acceptance run of new capacity."""


class RunConfig(ProcessEnv):
    """What every workload says, whatever its kind and recipe. A recipe subclasses the base of
    its kind (TrainingRun, ServingRun, AcceptanceRun below), never this class directly.

    A recipe subclass states its facts as class attributes: the accelerator it needs
    (None: any), the ECR repository of its image (None: the stack must name `image`), and
    the steps it plans, in order (the builder in workloads/manifests/ emits exactly these);
    and, each stated by the recipe itself (inherited from a shared base like MegatronRun at
    most, never from another recipe; RECIPE_FACTS and its kind's KIND_FACTS list them, a test holds
    every recipe to them): its step-time source, docs row, example stacks, the upstream facts its
    script arguments are held against and, a training run, its checkpoint model.
    """

    model_config = ConfigDict(json_schema_extra=_without_unused)

    RECIPE: ClassVar[str]
    KIND: ClassVar[Kind]
    """The workload's kind, stated by the base of its kind: what the plan calls it and what it does."""
    KIND_FACTS: ClassVar[tuple[str, ...]] = ()
    """What every recipe of this kind states itself, beside RECIPE_FACTS."""
    ACCELERATOR: ClassVar[instances.Accelerator | None] = None
    REPOSITORY: ClassVar[str | None] = None
    STEPS: ClassVar[tuple[str, ...]]
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = None
    """Why the recipe needs the stack's Hugging Face token; None: it does not."""
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = None
    """How the recipe trains on Neuron (its SDK and instance family are checked against it,
    facts/versions.py); None: any framework its SDK has (bring-your-own code)."""
    PUBLIC_IMAGES: ClassVar[bool] = False
    """The recipe runs a pinned public image per accelerator (facts.serving) unless `image` is set."""
    RUNS_ON_CPU: ClassVar[bool] = False
    """The recipe trains on CPUs, on the system node group (no accelerator, no EFA)."""
    STEP_TIME: ClassVar[StepTime]
    COMPILE: ClassVar[CompileTime]
    """The graph compile before the first step (estimates.startup)."""
    """The published measurement its step time is estimated from, or why there is none."""
    DOCS: ClassVar[RecipeDocs]
    """Its row of the recipe table: what it follows upstream, its image, its steps."""
    EXAMPLE_STACKS: ClassVar[ExampleStacks]
    """The example stacks that run it."""
    ARGUMENTS: ClassVar[Arguments]
    """The upstream facts its script arguments are held against, or why they are not."""
    CONVERSION: ClassVar[Converter]
    """How a finished run becomes a Hugging Face model for serving (recipe vllm-serve), or why not."""
    UNUSED_KEYS: ClassVar[tuple[str, ...]] = ()
    """Keys of every run that this recipe does not take (refused when set, left out of the reference)."""

    node_group: str = Field(description="Name of the node group (nodeGroups[].name) the run uses.")
    nodes: int = Field(ge=1, description="Nodes of the run, one worker pod each; at most the node group's `maxSize`.")
    run_id: str = Field(
        description=(
            "Run id: 1-20 lowercase letters, digits and hyphens; a new value starts a new run (`<name>-<runId>` "
            "must differ between runs)."
        )
    )
    image: str | None = Field(
        None,
        description=(
            "Any image with an explicit tag or digest, instead of the recipe's repository; required for `custom`."
        ),
        json_schema_extra={"x-default": "`<repository URL>:<imageTag>`"},
    )
    image_tag: str | None = Field(
        None,
        description="Tag in the recipe's ECR repository; not `latest` (tags are immutable).",
        json_schema_extra={"x-default": "the tag the stack builds from `images/<repository>/`"},
    )
    neuron_sdk: str | None = Field(
        None,
        description="Neuron SDK of the image, checked against the node group's instance family (Neuron node groups).",
        json_schema_extra={"x-default": "from the image tag (`-sdk2.22.0-`) or the repository's Dockerfile"},
    )
    health_check: HealthCheckConfig = Field(default_factory=HealthCheckConfig, description="Pre-training gate.")
    step_seconds: float | None = Field(
        None,
        gt=0,
        description="Measured seconds per optimizer step; sets the run's cost and checkpoint share.",
        json_schema_extra={"x-default": "an estimate where a published sample exists"},
    )
    team: str | None = Field(
        None,
        description="A `teams` key: the run goes through that team's Kueue queue; required when teams exist.",
        json_schema_extra={"x-default": "none (the `default` queue)"},
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
            raise Refusal(f"{v!r} must be 1-20 lowercase letters, digits and hyphens, e.g. run-001", "invalid")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return check_image(v)

    @field_validator("image_tag")
    @classmethod
    def _tag(cls, v: str | None) -> str | None:
        if v is not None and (v == "latest" or not matches(IMAGE_TAG_RE, v)):
            raise Refusal(
                f"{v!r} is not an immutable image tag (ECR tags are immutable; 'latest' is not allowed)", "invalid"
            )
        return v

    @field_validator("neuron_sdk")
    @classmethod
    def _sdk(cls, v: str | None) -> str | None:
        if v is not None and not matches(r"2\.[0-9]+\.[0-9]+", v):
            raise Refusal(f"{v!r} is not a Neuron SDK version like 2.22.0", "invalid")
        return v

    @model_validator(mode="after")
    def _image_source(self) -> RunConfig:
        unused = [k for k in self.UNUSED_KEYS if k in self.model_fields_set]
        if unused:
            key = to_camel(unused[0])
            raise KeyProblem(key, f"not a key of recipe {self.RECIPE}", "not-supported")
        if self.image is not None and self.image_tag is not None:
            raise KeyProblem("imageTag", "give image or imageTag, not both", "conflict")
        if self.image is None and self.REPOSITORY is None and not self.PUBLIC_IMAGES:
            raise KeyProblem("image", f"required for recipe {self.RECIPE} (there is no default repository)", "required")
        return self

    @classmethod
    def built_image_trains_on(cls, instance: instances.InstanceType) -> bool:
        """Whether the stack's image of the recipe trains there (accelerator; Neuron framework and SDK)."""
        built = images.IMAGES.get(cls.REPOSITORY or "")
        if built is None or instance.accelerator != cls.ACCELERATOR:
            return False
        if instance.accelerator != "neuron" or built.neuron_sdk is None:
            return True
        framework, family = cls.NEURON_FRAMEWORK, instance.neuron_family
        return not versions.family_problems(family, framework=framework) + versions.problems(
            built.neuron_sdk, family, framework=framework, image=None
        )

    @property
    def hugging_face_token_for(self) -> str | None:
        return self.HUGGING_FACE_TOKEN_FOR  # why it needs the Hub token (None: it does not); a run may say otherwise

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
    def hub_repos(self) -> tuple[needs.HubRepo, ...]:
        """The Hub files its training program reads (staged on /shared before it runs)."""
        return ()

    def image_on(self, instance: instances.InstanceType) -> str | None:
        """The image the run's pods run on that instance type, when the config alone says
        (`image`, or a recipe's pinned public image); None: the recipe's ECR repository."""
        return self.image

    def runtime_on(self, instance: instances.InstanceType) -> images.Runtime | None:
        """What a pinned public image brings (None: the image's runtime is read as usual)."""
        return None

    def node_share(self, instance: instances.InstanceType) -> float:
        """Nodes' worth of the node group the run holds while it runs (its cost per hour)."""
        return self.nodes

    @property
    def load_balancers(self) -> int:
        """Load balancers AWS makes for the run's objects (billed by the hour besides its nodes)."""
        return 0

    def hourly_basis(
        self, instance: instances.InstanceType, mb_per_second: float, workloads: Mapping[str, RunConfig]
    ) -> str | None:
        """How the plan names a cost that is per hour by nature (a server), or None (a run with a
        length); `mb_per_second`: the shared file system's throughput, `workloads`: the stack's runs."""
        return None

    def modeled_seconds(self, instance: instances.InstanceType) -> tuple[float, str] | None:
        """Seconds the whole run lasts and how the plan names the model, for a run that has no
        optimizer steps but a modeled length (an acceptance run); None otherwise."""
        return None

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
    def tokens_per_step(self) -> int | None:
        """Tokens an optimizer step trains on (global batch x sequence length); None: unknown."""
        return None

    @property
    def model_flops_per_token(self) -> float | None:
        """Model FLOPs per trained token, forward and backward (for the plan's MFU); None: unknown."""
        return None

    @property
    def matmul_precision(self) -> Precision:
        """The precision of the run's matrix multiplies, whose peak its MFU is against."""
        return "bf16"

    @property
    def initial_weight_bytes(self) -> int | None:
        """Bytes of weights the run loads before its first step (0: it starts from random weights;
        None: unknown)."""
        return None

    @property
    def step_input(self) -> object:
        """What the recipe's published step time reads of the run (its STEP_TIME.estimate's first
        argument, a typed input of estimates/); None: the recipe has no published step time."""
        return None

    def step_estimate(self, instance_type: str) -> tuple[float, str] | None:
        """Seconds per optimizer step on `instance_type` from the recipe's published measurement,
        and how the plan names it (None: no published measurement applies)."""
        return step_time.estimated(self.STEP_TIME, self.step_input, instance_type)

    def work(self, instance_type: str) -> RunWork:
        """What the throughput estimate reads of the run on `instance_type` (estimates.throughput)."""
        support = self.DOCS.support
        return RunWork(
            nodes=self.nodes,
            tokens_per_step=self.tokens_per_step,
            flops_per_token=self.model_flops_per_token,
            precision=self.matmul_precision,
            published=step_time.published_setup(self.STEP_TIME, self.step_input, instance_type),
            support=None if support is None else support.status,
            initial_weight_bytes=self.initial_weight_bytes,
            checkpoint_bytes=self.resume_bytes,
        )

    @property
    def resume_bytes(self) -> int | None:
        """Bytes a restart reads back, its last checkpoint (None: the run writes none, or unsized)."""
        return None

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """The recipe's own rules against the instance type of its node group."""
        model = self.model_shape
        return parallelism_problems(key, model, self.nodes, instance) if model is not None else []


RECIPE_FACTS = ("STEP_TIME", "COMPILE", "DOCS", "EXAMPLE_STACKS", "ARGUMENTS", "STEPS", "CONVERSION")
"""What every recipe states itself, whatever its kind (a test names the recipe and the one it lacks)."""


class TrainingRun(RunConfig):
    """A run that trains a model for a number of optimizer steps and checkpoints as it goes: how
    often, how many it keeps, how big they are against the shared file system."""

    KIND: ClassVar[Kind] = "training"
    KIND_FACTS: ClassVar[tuple[str, ...]] = ("CHECKPOINTS",)
    CHECKPOINTS: ClassVar[CheckpointModel]
    """How big its checkpoints are (bytes per parameter and its source), or why they are not sized."""

    @property
    def checkpoint_interval(self) -> int | None:
        """Steps between checkpoints (None: not counted in steps)."""
        raise NotImplementedError

    @property
    def checkpoints_kept(self) -> int:
        """How many checkpoints the run keeps on the shared file system at once."""
        raise NotImplementedError

    @property
    def checkpoint_interval_key(self) -> str:
        """The run's key (below `workloads.<name>`) that sets `checkpoint_interval`, for messages."""
        return "checkpointEverySteps"

    @property
    def checkpoints_kept_key(self) -> str:
        """The run's key (below `workloads.<name>`) that sets how many checkpoints it keeps."""
        return "training.checkpointsToKeep"

    @property
    def checkpoint_writes(self) -> int | None:
        """Checkpoints the whole run writes, counted as its framework saves (None: not counted)."""
        return None

    @property
    def checkpoint_parameters(self) -> int | None:
        """Parameters a checkpoint holds (None: unknown, e.g. bring-your-own code)."""
        return None

    @property
    def checkpoint_assumes(self) -> str:
        """What the checkpoint size assumes beyond the config ("": nothing)."""
        return ""

    @property
    def checkpoint_input(self) -> CheckpointInput:
        """What the checkpoint estimate reads of the run (estimates.checkpoints.plan)."""
        # The run's length counts only where the recipe counts its writes as its framework does
        # (Bridge also saves at the last step, so an interval longer than the run still writes once).
        writes = self.checkpoint_writes
        return CheckpointInput(
            self.CHECKPOINTS,
            self.checkpoint_parameters,
            self.checkpoints_kept,
            self.checkpoint_interval,
            writes,
            None if writes is None else self.optimizer_steps,
            self.checkpoint_assumes,
        )

    @property
    def resume_bytes(self) -> int | None:
        return self.checkpoint_input.size_bytes

    @property
    def lr_schedule(self) -> schedule.Schedule | None:
        """The learning-rate schedule it trains with over its steps (None: not one the plan models)."""
        return None

    @property
    def run_length(self) -> run_length.RunLength | None:
        """Its steps and what else runs on its nodes (validation, export); None: not counted in steps."""
        return None if self.optimizer_steps is None else run_length.RunLength(self.optimizer_steps)


class ServingRun(RunConfig):
    """A server: replicas that stay up, no optimizer step and no checkpoint; its start (weights,
    engine, compile) and its cost per hour are its cost line's, not a first training step's."""

    KIND: ClassVar[Kind] = "serving"


class AcceptanceRun(RunConfig):
    """An acceptance run of new capacity: it trains nothing and writes no checkpoint; the stack's
    other runs on its node group are created only once it passed (workloads.deploy), so none
    competes with it for the group's quota while `pulumi up` waits."""

    KIND: ClassVar[Kind] = "acceptance"
