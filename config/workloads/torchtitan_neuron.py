"""Recipe `torchtitan-neuron`: TorchTitan pre-training on Trainium2 with TorchNeuron (Neuron SDK 2.33,
public beta; TorchTitan Neuron 0.2.2+neuron.1), FSDP2 and TP (its builder:
workloads/manifests/torchtitan_neuron.py).

A run names a TorchTitan Neuron config function (`--module` / `--config`, the fork's Python config
registry; there is no TOML job config since upstream's refactor after v0.2.2) and overrides
only what the run owns: steps, where outputs and checkpoints go, the checkpoint schedule, the
staged Hugging Face assets and the dataset. The flags are held against pytorch/torchtitan over
the range of commits the fork can be based on (tests/upstream/torchtitan-config-cli.yaml).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
from config.problems import problem
from config.workloads.base import TrainingRun
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, RecipeDocs, RunExport, Support
from config.workloads.schedule import ScheduleConfig
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.flops import flops_per_token
from estimates.schedule import LibrarySchedule, Schedule
from estimates.startup import CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from facts import instances, versions
from facts.megatron_bridge import ModelShape
from facts.nodegroups import placement

QWEN3_8B = {"vocab": 151936, "hidden": 4096, "layers": 36, "heads": 32, "kv_heads": 8, "head_dim": 128, "ffn": 12288}
"""torchtitan's Qwen3 "8B" model config (torchtitan/models/qwen3/__init__.py), untied embeddings."""


def qwen3_8b_parameters() -> int:
    """Embedding and output layer, per layer q/k/v/o, the SwiGLU MLP, two RMSNorms and the q/k norms,
    and the final norm: 8.19 billion."""
    q = QWEN3_8B
    h, attn, kv = q["hidden"], q["heads"] * q["head_dim"], q["kv_heads"] * q["head_dim"]
    layer = 2 * h * attn + 2 * h * kv + 3 * h * q["ffn"] + 2 * h + 2 * q["head_dim"]
    return 2 * q["vocab"] * h + q["layers"] * layer + h


MODULE_RE = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
FUNCTION_RE = r"[A-Za-z_][A-Za-z0-9_]*"


class TorchTitanModel(Model):
    """The TorchTitan Neuron config function a run starts from, and the Hugging Face repo its
    tokenizer and config come from."""

    module: str = Field(
        "torchtitan_neuron.models.qwen3",
        description="Python module of the config registry (`--module`), as the TorchTitan Neuron docs name it.",
    )
    config: str = Field(
        "qwen3_8b_tp4_fsdp16_sac",
        description="Config function of that module (`--config`): model, parallelism and optimizer choices.",
    )
    hugging_face_repo: str = Field(
        "Qwen/Qwen3-8B",
        description="Hugging Face repo of the model's tokenizer and config.json (an ungated repo: the assets Job"
        " has no token).",
    )
    tensor_parallel: int = Field(
        4,
        ge=1,
        description="Tensor-parallel degree (`--parallelism.tensor_parallel_degree`); FSDP shards over the rest.",
    )
    seq_length: int = Field(4096, ge=128, description="Sequence length (`--training.seq_len`).")
    local_batch_size: int = Field(
        1, ge=1, description="Sequences per data-parallel rank (`--training.local_batch_size`)."
    )
    global_batch_size: int = Field(
        64, ge=1, description="Sequences per step (`--training.global_batch_size`); gradient accumulation fills it."
    )

    @field_validator("module")
    @classmethod
    def _module(cls, v: str) -> str:
        if not matches(MODULE_RE, v):
            raise Refusal(f"{v!r} is not a Python module path like torchtitan_neuron.models.qwen3", "invalid")
        return v

    @field_validator("config")
    @classmethod
    def _function(cls, v: str) -> str:
        if not matches(FUNCTION_RE, v):
            raise Refusal(f"{v!r} is not a Python function name like qwen3_8b_tp4_fsdp16_sac", "invalid")
        return v

    @field_validator("hugging_face_repo")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not matches(r"[A-Za-z0-9_.\-]{1,96}/[A-Za-z0-9_.\-]{1,96}", v):
            raise Refusal(f"{v!r} is not a Hugging Face repo id like owner/name", "invalid")
        return v


class TorchTitanData(Model):
    """Where the training text comes from; every rank reads it with no internet."""

    dataset: Literal["c4_test", "c4"] = Field(
        "c4_test",
        description="TorchTitan dataset (`--dataloader.dataset`): `c4_test`, the small split in the checkout, or `c4`"
        " read from `datasetPath` (upstream streams it from huggingface.co on every rank, which the training pods"
        " cannot reach).",
    )
    dataset_path: str | None = Field(
        None, description="A copy of allenai/c4 under /shared (`--dataloader.dataset_path`); required with `c4`."
    )

    @model_validator(mode="after")
    def _offline(self) -> TorchTitanData:
        if self.dataset == "c4" and self.dataset_path is None:
            raise KeyProblem(
                "datasetPath",
                "required with dataset c4: upstream streams allenai/c4 from huggingface.co on every rank and the"
                " training pods have no internet; stage a copy under /shared and name it here",
                "required",
            )
        if self.dataset_path is not None and not self.dataset_path.startswith("/shared/"):
            raise KeyProblem(
                "datasetPath", f"{self.dataset_path!r} must be under /shared/ (every worker mounts it)", "invalid"
            )
        return self


class TorchTitanTraining(Model):
    """Steps and checkpoints (TorchTitan's DCP checkpoint manager)."""

    max_steps: int = Field(1000, ge=1, description="Training steps (`--training.steps`).")
    checkpoint_every_steps: int = Field(250, ge=1, description="Steps between checkpoints (`--checkpoint.interval`).")
    checkpoints_to_keep: int = Field(
        2, ge=1, le=20, description="Newest checkpoints kept (`--checkpoint.keep_latest_k`)."
    )


TORCHTITAN_SCHEDULE = LibrarySchedule(200, None, 10000, 1.0, 0.0, "linear")
"""TorchTitan's own lr_scheduler defaults (warm-up 200 steps of training.steps' default 10,000, linear decay
over every later step to min_lr_factor 0; tests/upstream/torchtitan-config-cli.yaml): what a run sizes to
its steps, whatever the fork's config function sets (the run renders every lr_scheduler key)."""


class TorchTitanNeuronWorkload(TrainingRun):
    """TorchTitan pre-training on Trainium2 (trn2) with TorchNeuron: Neuron SDK 2.33, public beta."""

    RECIPE: ClassVar[str] = "torchtitan-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "torchtitan"
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = "torchneuron"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "assets", "train", "tensorboard")
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        12,
        "TorchTitan's DCP checkpoint: fp32 parameters (training.dtype float32, bf16 only as FSDP's mixed precision)"
        " and AdamW's two fp32 moments; the last one is the model alone, in bf16, as Hugging Face safetensors",
    )
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "no TorchTitan Neuron throughput is published (Neuron 2.33 documentation: tutorials and best practices,"
        " no performance table for Trn2 training); set stepSeconds from a measured step"
    )
    COMPILE: ClassVar[CompileTime] = CompileTime(
        0,
        "eager mode, as the TorchTitan Neuron basic tutorial runs it; with compile: true the Neuron compiler runs"
        " at the first steps, for a time no page publishes",
        hit="none",
    )
    CONVERSION: ClassVar[Converter] = RunExport(
        "TorchTitan's `--checkpoint.last_save_in_hf` at the last step: bf16 safetensors with their index, the"
        " repo's config.json and tokenizer copied beside them",
        "torchtitan-config-cli",
        "huggingFaceExport",
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="TorchTitan Neuron 0.2.2+neuron.1 (Neuron 2.33.0 docs: `torchrun -m torchtitan.train --module"
        " torchtitan_neuron.models.qwen3 --config qwen3_8b_tp4_fsdp16_sac`); CLI held to pytorch/torchtitan"
        " `cfd67d392`..`c537bca6`",
        image="Neuron SDK 2.33.0 (TorchNeuron 2.14.3.0, PyTorch 2.14), Ubuntu 26.04, EFA installer 1.51.0",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "assets": "Hugging Face assets Job (tokenizer and config.json, `scripts/download_hf_assets.py`)",
            "train": "training MPIJob (health gate, torchrun `torchtitan.train`, DCP checkpoints and resume, the last"
            " checkpoint in Hugging Face format)",
            "tensorboard": "TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "trn2, trn2u (Trn2 UltraServers)",
            "Neuron SDK 2.33.0, TorchNeuron 2.14.3.0 (PyTorch 2.14), TorchTitan Neuron 0.2.2+neuron.1",
            "beta",
            "TorchNeuron and TorchTitan Neuron are a public beta in Neuron 2.33.0, for Trn2 and Trn3 only",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("trn2-torchtitan", "trn2")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("torchtitan-config-cli",),
        "the torchtitan.train flags (config sections and fields, present at both ends of the upstream range the"
        " fork can be based on) and scripts/download_hf_assets.py's options",
    )

    recipe: Literal["torchtitan-neuron"] = Field(description="torchtitan-neuron (beta: Neuron SDK 2.33, trn2/trn3)")
    model: TorchTitanModel = Field(default_factory=TorchTitanModel, description="Config function and assets.")
    data: TorchTitanData = Field(default_factory=TorchTitanData, description="Training text.")
    training: TorchTitanTraining = Field(default_factory=TorchTitanTraining, description="Steps and checkpoints.")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="Learning-rate schedule.")
    compile: bool = Field(
        False, description="torch.compile with the Neuron backend (`--compile.enable --compile.backend neuron`)."
    )
    hugging_face_export: bool = Field(
        True,
        description="Write the last checkpoint as Hugging Face safetensors in bf16 (`--checkpoint.last_save_in_hf`),"
        " with the repo's config.json and tokenizer beside it.",
    )
    repo_dir: str = Field(
        "/opt/torchtitan-neuron", description="The torchtitan-neuron checkout in the image (torchrun runs there)."
    )
    tensorboard: bool = Field(True, description="TensorBoard over /shared/<workload>.")

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @model_validator(mode="after")
    def _schedule_fits(self) -> TorchTitanNeuronWorkload:
        self.schedule.refuse_misfit(TORCHTITAN_SCHEDULE, self.training.max_steps)
        return self

    @property
    def lr_schedule(self) -> Schedule:
        return self.schedule.sized(TORCHTITAN_SCHEDULE, self.training.max_steps)

    @property
    def checkpoint_interval(self) -> int:
        return self.training.checkpoint_every_steps

    @property
    def checkpoint_interval_key(self) -> str:
        return "training.checkpointEverySteps"

    @property
    def checkpoints_kept(self) -> int:
        return self.training.checkpoints_to_keep

    @property
    def checkpoint_parameters(self) -> int | None:
        """Known for the Qwen3-8B configs only (the default); another model's size is not."""
        return qwen3_8b_parameters() if self.model.hugging_face_repo == "Qwen/Qwen3-8B" else None

    @property
    def tokens_per_step(self) -> int:
        return self.model.global_batch_size * self.model.seq_length

    @property
    def model_flops_per_token(self) -> float | None:
        if self.checkpoint_parameters is None:
            return None  # another repo's shape is not recorded
        q = QWEN3_8B
        shape = ModelShape(q["layers"], q["hidden"], q["ffn"], q["heads"], q["kv_heads"], q["vocab"], qk_norm=True)
        return flops_per_token(shape, self.model.seq_length, head_dim=q["head_dim"])

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """TP divides a node's ranks; the global batch is a whole number of micro batches of the
        data-parallel ranks (TorchTitan refuses it at start otherwise); and what TorchTitan refuses
        of the model's shape (shape_problems)."""
        if instance.family not in versions.TORCHNEURON_FAMILIES:
            return []  # config/checks/runs.py versions_fit names the node group
        m, per_node = self.model, instance.ranks_per_node
        if per_node % m.tensor_parallel:
            return [
                problem(
                    f"{key}.model.tensorParallel",
                    "conflict",
                    f"{m.tensor_parallel} does not divide the {per_node} ranks of a node",
                )
            ]
        dp = placement(instance, self.nodes).ranks // m.tensor_parallel
        if m.global_batch_size % (dp * m.local_batch_size):
            return [
                problem(
                    f"{key}.model.globalBatchSize",
                    "conflict",
                    f"{m.global_batch_size} is not a multiple of {dp} data-parallel ranks x"
                    f" localBatchSize {m.local_batch_size}",
                )
            ]
        return self.shape_problems(key)

    def shape_problems(self, key: str) -> list[str]:
        """What TorchTitan refuses of TP against the model it builds, at either end of the upstream
        range the fork can be based on (tests/upstream/torchtitan-parallelism.yaml): TP divides the
        heads and the KV heads (c537bca6 decoder.py:149/154 raise at start; cfd67d392 fails the
        first forward's view of a half head), and the sequence is a multiple of 2 x TP (cfd67d392
        qwen3/parallelize.py:78, tp x 2 x cp). Only for the Qwen3-8B config whose shape is recorded."""
        if self.checkpoint_parameters is None:
            return []  # another repo's heads are not recorded: not guessed
        m, q = self.model, QWEN3_8B
        tp, heads, kv = m.tensor_parallel, q["heads"], q["kv_heads"]
        out: list[str] = []
        if heads % tp or kv % tp:
            valid = ", ".join(str(d) for d in range(1, kv + 1) if kv % d == 0 and heads % d == 0)
            out.append(
                problem(
                    f"{key}.model.tensorParallel",
                    "conflict",
                    f"{tp} must divide the {heads} attention heads and {kv} KV heads of {m.hugging_face_repo}"
                    f" (TorchTitan splits whole heads over the tensor-parallel ranks): {valid}",
                    value=str(tp),
                    allowed=valid,
                )
            )
        if m.seq_length % (2 * tp):
            out.append(
                problem(
                    f"{key}.model.seqLength",
                    "conflict",
                    f"{m.seq_length} must be a multiple of {2 * tp} (2 x tensorParallel {tp}: TorchTitan's"
                    " sequence-length divisor, sequence parallelism over TP)",
                    value=str(m.seq_length),
                    allowed=f"a multiple of {2 * tp}",
                )
            )
        return out
