"""Recipe `llama3-nxd`: Llama 3 / 3.1 8B pretraining on trn1/trn1n with NxD (neuronx-distributed's
tensor parallel + ZeRO-1 example), on the last Neuron SDK that supports it (2.28): maintenance-only
(its builder: workloads/manifests/llama3_nxd.py).

The shape is upstream's 8B config.json (examples/training/llama/tp_zero1_llama_hf_pretrain/
8B_config_llama3 and 8B_config_llama3.1 of neuronx-distributed v2.28.0), the schedule and
parallelism those of tp_zero1_llama3_8B_hf_pretrain.sh; tests/upstream/neuronx-distributed-v2.28.0.yaml
holds both.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
from config.problems import problem
from config.workloads.base import TrainingRun
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, RecipeDocs, RunExport, Support
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.flops import flops_per_token
from estimates.schedule import Schedule
from estimates.startup import CompileTime
from estimates.step_time import PerNodeSample, PublishedStepTime, SampleRun, StepTime
from facts import instances, versions
from facts.megatron_bridge import ModelShape

# Llama 3 8B (Meta-Llama-3-8B and Llama-3.1-8B share it): upstream's config.json.
VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 128256, 4096, 14336, 32, 32, 8
SEQ_LENGTH = 8192
"""--seq_len: get_dataset.py cuts Llama 3's corpus into blocks of 8192 tokens (the dataset fixes it)."""
NEURON_CORES_PER_PROCESS_GROUP = 32
"""NEURON_RT_NUM_CORES of upstream's script: the NeuronCores of one trn1.32xlarge, one rank each."""
LLAMA31_8B_SEQ_PER_SECOND_PER_TRN1_NODE = 47.95 / 32
"""Neuron performance sample (aws-neuron-sdk v2.28.0, about-neuron/benchmarks/trn1/training_data_decoder.csv):
Llama-3.1-8B pre-training, 32 trn1.32xlarge/trn1n.32xlarge, TP=32 DP=32 ZeRO-1, global batch 1024,
sequence 8192, Neuron 2.24.0: 47.95 sequences/s, scaled linearly per node."""
TRN1_FAMILIES = ("trn1", "trn1n")


def parameters_saved(kv_replicator: int) -> int:
    """Parameters in an NxD checkpoint of the 8B model: untied embedding and output layer, per
    layer q and o, k and v replicated `kv_replicator` times by GQAQKVColumnParallelLinear
    (kv_size_multiplier), the SwiGLU MLP and two RMSNorms, and the final norm."""
    kv = HIDDEN // HEADS * KV_HEADS
    layer = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * kv * kv_replicator + 3 * HIDDEN * FFN + 2 * HIDDEN
    return 2 * VOCAB * HIDDEN + LAYERS * layer + HIDDEN


MODEL_PARAMETERS = parameters_saved(1)
"""Llama 3 8B: 8.03 billion."""


SAMPLE = PerNodeSample(
    LLAMA31_8B_SEQ_PER_SECOND_PER_TRN1_NODE,
    "TP 32",
    tuple(name for name, t in instances.CATALOG.items() if t.family in TRN1_FAMILIES),
    "Neuron 2.24.0 sample: Llama-3.1-8B, 32 trn1.32xlarge, TP 32 DP 32 ZeRO-1, global batch 1024, seq 8192, BF16:"
    " 47.95 sequences/s",
    nodes=32,
    global_batch_size=1024,
)
"""A step at the sample's shape (TP 32; the sequence is 8192 always) on trn1 nodes: the global
batch at the sample's sequences per second per node."""


class Llama3NxdModel(Model):
    """Llama 3 8B: which of upstream's configs, and how it is split and batched."""

    version: Literal["3", "3.1"] = Field(
        "3", description="Upstream's config directory: `3` (Meta-Llama-3-8B) or `3.1` (Llama-3.1-8B, RoPE scaling)."
    )
    tensor_parallel: int = Field(32, ge=1, description="Tensor-parallel degree (--tensor_parallel_size).")
    kv_replicator: int = Field(
        4, ge=1, description="Times the 8 key/value heads are replicated to fill TP (--kv_replicator)."
    )
    micro_batch_size: int = Field(
        1, ge=1, description="Sequences per data-parallel rank per micro step (--batch_size)."
    )
    global_batch_size: int = Field(
        1024, ge=1, description="Sequences per optimizer step (gradient accumulation fills it)."
    )

    @model_validator(mode="after")
    def _qkv(self) -> Llama3NxdModel:
        # GQAQKVColumnParallelLinear (neuronx_distributed/modules/qkv_linear.py) asserts both.
        tp, kv = self.tensor_parallel, self.kv_replicator
        if tp % kv:
            raise KeyProblem("kvReplicator", f"{kv} does not divide tensorParallel {tp}", "conflict")
        if (HIDDEN // HEADS * KV_HEADS * kv) % tp or HIDDEN % tp:
            raise KeyProblem("tensorParallel", f"{tp} does not divide the key/value width x kvReplicator", "conflict")
        return self


class Llama3NxdTraining(Model):
    """Steps, learning-rate schedule and checkpoints (tp_zero1_llama_hf_pretrain.py options)."""

    max_steps: int = Field(10000, ge=1, description="Optimizer steps (--max_steps; upstream's TOTAL_STEPS).")
    learning_rate: float = Field(1.5e-4, gt=0, description="Peak learning rate (--lr).")
    warmup_steps: int = Field(100, ge=0, description="Linear warmup steps (--warmup_steps).")
    checkpoint_every_steps: int = Field(100, ge=1, description="Save a checkpoint every N steps (--checkpoint_freq).")
    checkpoints_to_keep: int = Field(
        2, ge=1, le=20, description="Newest checkpoints kept (--num_kept_checkpoint); the file system must hold them."
    )
    precompile_steps: int = Field(
        2, ge=1, description="Steps neuron_parallel_compile traces (upstream's compile run: 2)."
    )

    @model_validator(mode="after")
    def _warmup(self) -> Llama3NxdTraining:
        if self.warmup_steps >= self.max_steps:
            raise KeyProblem("warmupSteps", f"{self.warmup_steps} must be below maxSteps {self.max_steps}", "conflict")
        return self


class Llama3NxdData(Model):
    """The tokenizer; the corpus is upstream's get_dataset.py's (wikicorpus raw_en, in blocks of seqLength)."""

    tokenizer: str = Field(
        "meta-llama/Meta-Llama-3-8B", description="Hugging Face model repo of the tokenizer (gated: needs the token)."
    )

    @field_validator("tokenizer")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not matches(r"[A-Za-z0-9_.\-]{1,96}/[A-Za-z0-9_.\-]{1,96}", v):
            raise Refusal(f"{v!r} is not a Hugging Face repo id like owner/name", "invalid")
        return v


class Llama3NxdWorkload(TrainingRun):
    """Llama 3 8B pretraining on trn1/trn1n with NxD (TP + ZeRO-1) on Neuron SDK 2.28: maintenance-only,
    NxD's training APIs end there; new Trainium training is TorchNeuron on trn2/trn3."""

    RECIPE: ClassVar[str] = "llama3-nxd"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "neuronx-distributed"
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = "nxd"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "secret", "tokenizer", "dataset", "train", "tensorboard")
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = "downloads the gated Llama 3 tokenizer"
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        10,
        "nxd.save_checkpoint with upstream's mixed precision (use_gpu_compatible_precision 1: autocast, bf16"
        " parameters, fp32 master weights not saved, use_master_weights_in_ckpt False) and AdamW_FP32OptimParams'"
        " two fp32 moments under ZeRO-1: 2 + 8; k and v counted kvReplicator times",
    )
    STEP_TIME: ClassVar[StepTime] = PublishedStepTime(
        source="aws-neuron-sdk v2.28.0 about-neuron/benchmarks/trn1/training_data_decoder.csv: Llama-3.1-8B"
        " pre-training, 32 trn1.32xlarge, TP=32 DP=32 ZeRO-1, global batch 1024, sequence 8192, Neuron 2.24.0:"
        " 47.95 sequences/s (TP 32 on trn1/trn1n only, scaled linearly per node)",
        basis="estimated from the Neuron 2.24.0 Llama-3.1-8B sample",
        estimate=SAMPLE.step_seconds,
        setup=SAMPLE.setup,
    )
    COMPILE: ClassVar[CompileTime] = CompileTime(
        None,
        "none published: the NxD Llama tutorial of aws-neuron-sdk v2.28.0 (training_llama_tp_zero1.rst)"
        " precompiles with neuron_parallel_compile and gives no time",
    )
    CONVERSION: ClassVar[Converter] = RunExport(
        "neuronx-distributed v2.28.0 `convert_checkpoints.py --convert_to_full_state` at the end of the run: one"
        " torch.save'd state dict with Hugging Face names (checkpoint_converter.py save_full), served as"
        " pytorch_model.bin, with upstream's config.json and the tokenizer",
        "neuronx-distributed-v2.28.0",
        "convertToHuggingFace",
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="neuronx-distributed v2.28.0 (`examples/training/llama`: `tp_zero1_llama_hf_pretrain.py`,"
        " `tp_zero1_llama3_8B_hf_pretrain.sh`, `get_dataset.py`, `convert_checkpoints.py`); awsome-distributed-ai"
        " `3.test_cases/pytorch/neuronx-distributed/llama3/kubernetes`",
        image="Neuron SDK 2.28.0 DLC, PyTorch 2.9.0, neuronx-distributed 0.17",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "secret": "Secret (HF token)",
            "tokenizer": "tokenizer Job",
            "dataset": "dataset Job (get_dataset.py: wikicorpus, tokenized into blocks)",
            "train": "training MPIJob (health gate, `neuron_parallel_compile` precompile, training,"
            " Hugging Face export with `convert_checkpoints.py`)",
            "tensorboard": "TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "trn1, trn1n",
            "Neuron SDK 2.28.0, PyTorch 2.9.0 (PyTorch/XLA), neuronx-distributed 0.17",
            "maintenance",
            "NxD Training and the NxD Core training APIs end with Neuron 2.28 (announce-eos-nxdt-nxd-core-training:"
            " stay on 2.28 and PyTorch 2.9 until ready to migrate); TorchNeuron does not target trn1",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("trn1-llama3",)
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("neuronx-distributed-v2.28.0", "huggingface-hub-0.27.1"),
        "the options of tp_zero1_llama_hf_pretrain.py, get_dataset.py and convert_checkpoints.py (their argparse),"
        " the config directories and paths of the examples in the image; huggingface-cli download's options",
    )

    recipe: Literal["llama3-nxd"] = Field(description="llama3-nxd (maintenance-only: Neuron SDK 2.28, trn1/trn1n)")
    model: Llama3NxdModel = Field(default_factory=Llama3NxdModel, description="Model config, parallelism, batch.")
    training: Llama3NxdTraining = Field(default_factory=Llama3NxdTraining, description="Steps and schedule.")
    data: Llama3NxdData = Field(default_factory=Llama3NxdData, description="Tokenizer.")
    convert_to_hugging_face: bool = Field(
        True,
        description="After training, convert the newest checkpoint to one full state dict with Hugging Face"
        " parameter names (convert_checkpoints.py --convert_to_full_state), with config.json and the tokenizer.",
    )
    tensorboard: bool = Field(True, description="TensorBoard over /shared/<workload>.")

    @model_validator(mode="after")
    def _convertible(self) -> Llama3NxdWorkload:
        # checkpoint_converter.py splits each fused qkv shard into three equal parts (find_size):
        # right only when the replicated key/value heads are as many as the query heads.
        if self.convert_to_hugging_face and self.model.kv_replicator * KV_HEADS != HEADS:
            raise KeyProblem(
                "convertToHuggingFace",
                f"the converter splits a fused qkv shard into three equal parts, which holds only with"
                f" model.kvReplicator {HEADS // KV_HEADS} (not {self.model.kv_replicator}); set that, or false",
                "conflict",
            )
        return self

    @property
    def data_parallel(self) -> int:
        """Data-parallel ranks per node count: one rank per NeuronCore, TP of them per replica."""
        return self.nodes * NEURON_CORES_PER_PROCESS_GROUP // self.model.tensor_parallel

    @property
    def grad_accum(self) -> int | None:
        """Micro steps per optimizer step (upstream's ACC_STEPS = GBS / MBS / DP); None if it does not divide."""
        per_micro = self.data_parallel * self.model.micro_batch_size
        return self.model.global_batch_size // per_micro if self.model.global_batch_size % per_micro == 0 else None

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @property
    def lr_schedule(self) -> Schedule:
        """tp_zero1_llama_hf_pretrain.py's get_linear_schedule_with_warmup over --max_steps: linear
        warm-up, then linear decay to 0 at the last step (neuronx-distributed v2.28.0)."""
        t = self.training
        return Schedule(t.max_steps, t.warmup_steps, t.max_steps, 0.0, "linear", "training.warmupSteps, maxSteps")

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
    def checkpoint_parameters(self) -> int:
        return parameters_saved(self.model.kv_replicator)

    @property
    def tokens_per_step(self) -> int:
        return self.model.global_batch_size * SEQ_LENGTH

    @property
    def model_flops_per_token(self) -> float:
        return flops_per_token(ModelShape(LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB), SEQ_LENGTH)

    @property
    def step_input(self) -> SampleRun:
        """What the Neuron sample is matched on (tensor parallelism) and the batch a step trains."""
        return SampleRun(self.nodes, self.model.global_batch_size, f"TP {self.model.tensor_parallel}")

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        if instance.family not in TRN1_FAMILIES:
            return [
                problem(
                    f"{key}.nodeGroup",
                    "not-supported",
                    f"recipe {self.RECIPE} runs on trn1/trn1n (32 NeuronCores a node, as upstream's script"
                    f" sets NEURON_RT_NUM_CORES), not {instance.name}; Trainium2 trains with TorchNeuron",
                )
            ]
        m, ranks = self.model, self.nodes * NEURON_CORES_PER_PROCESS_GROUP
        if ranks % m.tensor_parallel or m.tensor_parallel > NEURON_CORES_PER_PROCESS_GROUP:
            return [
                problem(
                    f"{key}.model.tensorParallel",
                    "conflict",
                    f"{m.tensor_parallel} must divide the {NEURON_CORES_PER_PROCESS_GROUP} NeuronCores of a node",
                )
            ]
        if self.grad_accum is None:
            return [
                problem(
                    f"{key}.model.globalBatchSize",
                    "conflict",
                    f"{m.global_batch_size} is not divisible by data-parallel size"
                    f" {self.data_parallel} x microBatchSize {m.micro_batch_size}",
                )
            ]
        return []
