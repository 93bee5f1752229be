"""Recipe `megatron-bridge`: Llama 3.1 and Qwen3 pre-training and supervised fine-tuning with NVIDIA Megatron
Bridge 0.6.0 (NeMo Framework 26.08) on NVIDIA GPU nodes, with the Hugging Face -> Megatron import
and the Megatron -> Hugging Face export as steps of the run (its builder:
workloads/manifests/megatron_bridge.py; the facts it runs on: facts/megatron_bridge.py)."""
# size: the recipe, its data, parallelism checks and Bridge overrides, which one reader follows end to end

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
from config.workloads.base import TrainingRun
from config.workloads.bridge_parallelism import parallelism_problems
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, RecipeDocs, RunExport, Support
from config.workloads.schedule import ScheduleConfig, ValidationConfig, library
from estimates.bridge import STEP_TIME, BridgeShape
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.flops import flops_per_token
from estimates.run_length import RunLength
from estimates.schedule import Schedule
from estimates.startup import NO_COMPILE, CompileTime
from estimates.step_time import StepTime
from facts import instances, needs
from facts import megatron_bridge as bridge
from facts.peak_flops import Precision

SHARED = "/shared/"
RECIPE_DEFAULT = "the library recipe's (facts/megatron_bridge.py)"


def _under_shared(v: str) -> str:
    if not v.startswith(SHARED) or ".." in v.split("/"):
        raise Refusal(f"{v!r} must be a path under /shared/ (the FSx file system every worker mounts)", "invalid")
    return v


class BridgeDataConfig(Model):
    """Where the training data comes from: mock data, Megatron indexed data, or prompt-completion JSONL."""

    source: Literal["mock", "indexed", "jsonl"] = Field(
        "mock",
        description=(
            "mock: generated tokens (pretrain); indexed: Megatron .bin/.idx prefixes under /shared (pretrain); "
            "jsonl: training.jsonl and validation.jsonl with input/output columns under /shared (sft)."
        ),
    )
    paths: list[str] = Field(
        default_factory=list,
        description="indexed: the data prefixes (each with .bin and .idx files) under /shared.",
    )
    dataset_root: str | None = Field(
        None, description="jsonl: the directory under /shared with training.jsonl and validation.jsonl."
    )

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        return [_under_shared(p) for p in v]

    @field_validator("dataset_root")
    @classmethod
    def _root(cls, v: str | None) -> str | None:
        return None if v is None else _under_shared(v)

    @model_validator(mode="after")
    def _source_keys(self) -> BridgeDataConfig:
        if self.source == "indexed" and not self.paths:
            raise KeyProblem("paths", "indexed data needs at least one prefix under /shared", "required")
        if self.source != "indexed" and self.paths:
            raise KeyProblem("paths", f"only for source: indexed (source is {self.source})", "conflict")
        if self.source == "jsonl" and self.dataset_root is None:
            raise KeyProblem(
                "datasetRoot", "jsonl data needs the directory with training.jsonl and validation.jsonl", "required"
            )
        if self.source != "jsonl" and self.dataset_root is not None:
            raise KeyProblem("datasetRoot", f"only for source: jsonl (source is {self.source})", "conflict")
        return self


class BridgeParallelism(Model):
    """Model parallelism; unset keys take the library recipe's value."""

    tensor_parallel: int | None = Field(
        None,
        ge=1,
        le=8,
        description="Tensor-parallel size (TP), inside one node.",
        json_schema_extra={"x-default": RECIPE_DEFAULT},
    )
    pipeline_parallel: int | None = Field(
        None, ge=1, description="Pipeline-parallel size (PP).", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )
    context_parallel: int | None = Field(
        None, ge=1, description="Context-parallel size (CP).", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )
    virtual_pipeline: int | None = Field(
        None,
        ge=1,
        description="Virtual pipeline stages per pipeline rank (interleaved schedule); 1: none.",
        json_schema_extra={"x-default": RECIPE_DEFAULT},
    )
    sequence_parallel: bool | None = Field(
        None, description="Sequence parallelism (with TP > 1).", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )


class BridgeTraining(Model):
    """Length and batch of the run; unset batch keys take the library recipe's value."""

    train_iters: int = Field(1000, ge=1, description="Optimizer steps of the run (train.train_iters).")
    global_batch_size: int | None = Field(
        None, ge=1, description="Sequences per optimizer step.", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="Sequences per rank per micro step.", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )
    seq_length: int | None = Field(
        None, ge=128, description="Sequence length in tokens.", json_schema_extra={"x-default": RECIPE_DEFAULT}
    )


class BridgeCheckpoints(Model):
    """Megatron Bridge's torch_dist checkpoints under `/shared/runs/<workload>/<runId>/checkpoints`."""

    save_interval: int | None = Field(
        None,
        ge=1,
        description="Steps between checkpoints (also one at the last step); refused when writing them would take more"
        " than 2% of training time.",
        json_schema_extra={"x-default": RECIPE_DEFAULT},
    )
    keep: int = Field(
        2,
        ge=1,
        le=20,
        description="Newest checkpoints kept (checkpoint.most_recent_k); Bridge writes the next before it deletes the"
        " oldest, so the file system holds one more while it saves.",
    )


class MegatronBridgeWorkload(TrainingRun):
    """Llama 3.1 or Qwen3 pre-training or SFT with Megatron Bridge on NVIDIA GPU nodes (p5, p5en, p6-b200, p6-b300)."""

    RECIPE: ClassVar[str] = "megatron-bridge"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "nvidia"
    REPOSITORY: ClassVar[str | None] = "nemo-megatron-bridge"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "secret", "hub", "import", "train", "tensorboard")
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = (
        "stages the gated Llama 3.1 repositories (config, tokenizer, weights); Qwen3's is public"
    )
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        bridge.CHECKPOINT_BYTES_PER_PARAMETER,
        "Megatron Bridge's torch_dist checkpoint with the Llama recipes' optimizer settings: bf16 weights (2 bytes)"
        " and the distributed optimizer's fp32 main parameter, exp_avg and exp_avg_sq (12 bytes)",
    )
    STEP_TIME: ClassVar[StepTime] = STEP_TIME
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows=f"NVIDIA Megatron Bridge {bridge.BRIDGE_VERSION} (Megatron Core {bridge.MCORE_VERSION}):"
        " `scripts/training/run_recipe.py` with the `llama31_8b` / `llama31_70b` / `qwen3_8b` pretrain and SFT library"
        " recipes,"
        " `scripts/conversion/run_conversion.py` import and export",
        image="NGC nemo:26.08 + EFA installer 1.51.0 (aws-ofi-nccl 1.22.0), NCCL 2.30.7, nccl-tests 2.18.5",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "secret": "Secret (HF token)",
            "hub": "Hub staging Job (config, tokenizer; weights for an import)",
            "import": "Hugging Face -> Megatron import Job (SFT)",
            "train": "training MPIJob (health gate with nccl-tests over EFA, Bridge training offline, export to"
            " Hugging Face format)",
            "tensorboard": "TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "p5, p5e, p5en, p6-b200, p6-b300",
            f"NeMo Framework 26.08, Megatron Bridge {bridge.BRIDGE_VERSION}, Megatron Core {bridge.MCORE_VERSION}",
            "current",
            "the Megatron Bridge release in the NGC nemo:26.08 image that AWS's megatron-bridge test case locks"
            " (tests/upstream/nemo-framework-26.08.yaml)",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("p5en-megatron-bridge",)
    CONVERSION: ClassVar[Converter] = RunExport(
        "Megatron Bridge 0.6.0 `run_conversion.py export` at the end of the run: safetensors, config.json and the"
        " tokenizer (AutoBridge.save_hf_pretrained: hf_pretrained/base.py save_artifacts, ARTIFACTS ['tokenizer'])",
        "megatron-bridge-0.6.0",
        "export",
    )
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("megatron-bridge-0.6.0", "huggingface-hub-1.24.0"),
        "run_recipe.py's options, recipe names, datasets and its ConfigContainer overrides composed with Hydra in"
        " struct mode against the recorded config key sets (Megatron Bridge and Megatron Core); the conversion"
        " worker's options per command; `hf download`'s options",
    )

    recipe: Literal["megatron-bridge"] = Field(description="megatron-bridge")

    @property
    def hugging_face_token_for(self) -> str | None:
        """Qwen3's repository is public (no token); Llama 3.1's are gated."""
        return None if self.model.startswith("qwen") else self.HUGGING_FACE_TOKEN_FOR

    model: Literal["llama31_8b", "llama31_70b", "qwen3_8b"] = Field(
        "llama31_8b", description="The model (a Megatron Bridge library recipe family)."
    )
    mode: Literal["pretrain", "sft"] = Field(
        "pretrain", description="pretrain: from scratch; sft: full fine-tuning of the imported Hugging Face weights."
    )
    precision: Literal["bf16", "fp8-cs"] = Field(
        "bf16", description="bf16 mixed precision, or FP8 with current scaling (Hopper and Blackwell)."
    )
    hf_revision: str | None = Field(
        None,
        description="Hugging Face revision of the model repository staged: the one the library recipe reads offline"
        " (any other is refused).",
        json_schema_extra={"x-default": "the library recipe's: `main` (Llama 3.1), the pinned commit (Qwen3)"},
    )
    data: BridgeDataConfig = Field(default_factory=BridgeDataConfig, description="Training data.")
    parallelism: BridgeParallelism = Field(default_factory=BridgeParallelism, description="Model parallelism.")
    training: BridgeTraining = Field(default_factory=BridgeTraining, description="Steps and batch.")
    checkpoints: BridgeCheckpoints = Field(default_factory=BridgeCheckpoints, description="Checkpoints.")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="Learning-rate schedule.")
    validation: ValidationConfig = Field(default_factory=ValidationConfig, description="Validation passes.")
    export: bool = Field(
        True, description="Export the last checkpoint to Hugging Face format at the end of the run (its `hf` folder)."
    )
    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="Extra ConfigContainer overrides (`section.key: value`), passed after the recipe's own.",
    )
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")

    @field_validator("hf_revision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        if v is not None and not matches(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", v):
            raise Refusal(f"{v!r} is not a branch, tag or commit", "invalid")
        return v

    @model_validator(mode="after")
    def _revision_the_recipe_reads(self) -> MegatronBridgeWorkload:
        """Every rank's library recipe reads the repository's config and tokenizer at its own
        revision, offline: a snapshot of another revision has no refs entry it can resolve."""
        wanted = self.hf_model.revision
        if self.hf_revision is not None and self.hf_revision != wanted:
            raise KeyProblem(
                "hfRevision",
                f"{self.hf_revision} is not the revision the {self.library_recipe.name} recipe reads"
                f" {self.hf_model.hf_repo} at ({wanted}); offline, its ranks would find nothing staged:"
                f" leave hfRevision unset or set it to {wanted}",
                "conflict",
            )
        return self

    @model_validator(mode="after")
    def _schedule_fits(self) -> MegatronBridgeWorkload:
        self.schedule.refuse_misfit(library(self.library_recipe.schedule), self.training.train_iters)
        return self

    @property
    def lr_schedule(self) -> Schedule:
        return self.schedule.sized(library(self.library_recipe.schedule), self.training.train_iters)

    @property
    def run_length(self) -> RunLength:
        """Steps, validation every interval and after the last step, the import's and export's bf16 weights."""
        weights = self.checkpoint_parameters * bridge.WEIGHT_BYTES_PER_PARAMETER
        export, imported = weights if self.export else 0, weights if self.imports else 0
        return self.validation.length(self.library_recipe.schedule, self.training.train_iters, export, imported)

    @property
    def revision(self) -> str:
        """The revision staged, imported and exported: the one the library recipe reads."""
        return self.hf_revision or self.hf_model.revision

    @field_validator("overrides")
    @classmethod
    def _override_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not matches(r"[a-z_][a-z0-9_]*(\.[a-z0-9_]+)+", key):
                raise Refusal(
                    f"{key!r} is not a ConfigContainer field path like checkpoint.async_save (no +/~: Bridge skips a"
                    " key its config lacks)",
                    "invalid",
                )
        return v

    @model_validator(mode="after")
    def _data_fits_mode(self) -> MegatronBridgeWorkload:
        wanted = ("mock", "indexed") if self.mode == "pretrain" else ("jsonl",)
        if self.data.source not in wanted:
            raise KeyProblem(
                "data.source", f"{self.data.source} is not data for {self.mode}; use {' or '.join(wanted)}", "conflict"
            )
        return self

    @property
    def hf_model(self) -> bridge.BridgeModel:
        return bridge.MODELS[self.model]

    @property
    def library_recipe(self) -> bridge.LibraryRecipe:
        return self.hf_model.recipe(self.mode)

    @property
    def hub_repos(self) -> tuple[needs.HubRepo, ...]:
        """The model repository at the recipe's revision: the config every rank's recipe builds from and
        every tokenizer file a tokenizer snapshot reads (the Qwen3 recipes resolve one offline); for an
        import, the weights too."""
        required: tuple[str, ...] = (*bridge.HUB_CONFIG_FILES, *bridge.HUB_TOKENIZER_FILES)
        if self.imports:
            required += bridge.HUB_WEIGHT_FILES
        optional = tuple(
            dict.fromkeys(
                p for p in (*bridge.HUB_OPTIONAL_FILES, *bridge.HUB_TOKENIZER_SNAPSHOT_PATTERNS) if p not in required
            )
        )
        return (needs.HubRepo(self.hf_model.hf_repo, required, optional, self.revision),)

    @property
    def imports(self) -> bool:
        """SFT starts from the Hugging Face weights, imported once into a Megatron checkpoint."""
        return self.mode == "sft"

    def resolved(self) -> dict[str, int | bool]:
        """Parallelism, batch and sequence length: as configured, else the library recipe's."""
        r, p, t = self.library_recipe, self.parallelism, self.training
        return {
            "tp": p.tensor_parallel or r.tensor_parallel,
            "pp": p.pipeline_parallel or r.pipeline_parallel,
            "cp": p.context_parallel or r.context_parallel,
            "vp": p.virtual_pipeline if p.virtual_pipeline is not None else (r.virtual_pipeline or 1),
            "sp": p.sequence_parallel if p.sequence_parallel is not None else r.sequence_parallel,
            "gbs": t.global_batch_size or r.global_batch_size,
            "mbs": t.micro_batch_size or r.micro_batch_size,
            "seq": t.seq_length or r.seq_length,
        }

    @property
    def optimizer_steps(self) -> int:
        return self.training.train_iters

    @property
    def checkpoint_interval(self) -> int:
        return self.checkpoints.save_interval or self.library_recipe.save_interval

    @property
    def checkpoint_interval_key(self) -> str:
        return "checkpoints.saveInterval"

    @property
    def checkpoints_kept_key(self) -> str:
        return "checkpoints.keep"

    @property
    def checkpoints_kept(self) -> int:
        """most_recent_k, plus the one being written before the oldest is deleted."""
        return self.checkpoints.keep + 1

    @property
    def checkpoint_writes(self) -> int:
        """Checkpoints the run writes: one every interval and one at the last step when it is not on one."""
        return math.ceil(self.training.train_iters / self.checkpoint_interval)

    @property
    def checkpoint_parameters(self) -> int:
        return self.hf_model.shape.parameters

    @property
    def tokens_per_step(self) -> int:
        r = self.resolved()
        return int(r["gbs"]) * int(r["seq"])

    @property
    def initial_weight_bytes(self) -> int:
        """SFT loads the imported bf16 weights; pre-training starts from random weights. (The Hub
        download and the import run before, as their own Jobs.)"""
        return self.checkpoint_parameters * bridge.WEIGHT_BYTES_PER_PARAMETER if self.mode == "sft" else 0

    @property
    def step_input(self) -> BridgeShape:
        """What the published rows are matched on, the batch a step trains, and the setup the plan
        compares with the published row's (estimates.bridge)."""
        r = self.resolved()
        tp, pp, cp, vp, mbs = (int(r[k]) for k in ("tp", "pp", "cp", "vp", "mbs"))
        shape = (self.model, self.mode, self.precision, self.nodes, int(r["gbs"]), int(r["seq"]))
        return BridgeShape(*shape, tp, pp, cp, vp, mbs, self.library_recipe.name)

    @property
    def matmul_precision(self) -> Precision:
        """FP8 current scaling runs the linear layers' GEMMs in FP8."""
        return "fp8" if self.precision == "fp8-cs" else "bf16"

    @property
    def model_flops_per_token(self) -> float:
        return flops_per_token(self.hf_model.shape, int(self.resolved()["seq"]))

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """What Megatron Core refuses at start-up (tests/upstream/megatron-lm-core_r0.19.0.yaml
        parallelism_rules), and what Megatron Bridge refuses for context parallelism. (A GPU the
        image's NCCL has no kernels for is refused for every recipe: config/checks/runs.py.)"""
        return parallelism_problems(key, self.resolved(), self.hf_model.shape, self.model, self.nodes, instance)
