"""What training runs share: the transformer shape and parallelism, the optimizer schedule,
the data sources and tokenizers of the recipes, and the health gate at the start of training."""

# size: the shapes, schedules, data and health gate every training recipe reads, side by side
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
from config.problems import problem
from estimates.schedule import LONGEST_FLOOR_SHARE
from facts import instances, needs, nodegroups

# Llama2 shapes, parallelism and batch sizes of neuronx-nemo-megatron's launch scripts
# (2.21_release: llama_7b.sh, llama_13b.sh, llama_70b.sh; tests/upstream/neuronx-nemo-megatron-2.21.yaml),
# which the Data on EKS example runs for 7B on 4 trn1 nodes. 70B uses grouped-query attention
# (8 KV heads) and 16 pipeline stages, so one replica spans 4 trn1 nodes. Any field can be
# overridden in the stack.
LLAMA2_PRESETS: dict[str, dict[str, int | float]] = {
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
        "initMethodStd": 0.021,
        "layernormEpsilon": 1e-5,
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
        "initMethodStd": 0.02,
        "layernormEpsilon": 1e-6,
    },
    "70b": {
        "seqLength": 4096,
        "hiddenSize": 8192,
        "ffnHiddenSize": 28672,
        "numLayers": 80,
        "numAttentionHeads": 64,
        "numKvHeads": 8,
        "tensorParallel": 8,
        "pipelineParallel": 16,
        "microBatchSize": 1,
        "globalBatchSize": 512,
        "initMethodStd": 0.02,
        "layernormEpsilon": 1e-5,
    },
}


GBPS_KEY = "minBusBandwidthGbps"
"""The floor's old key: it said Gbps, but the gate always compared it with the bus bandwidth nccl-tests and
nccom-test print in GB/s (their `busbw` column and "Avg bus bandwidth" line)."""


class HealthCheckConfig(Model):
    """The checks every training launch runs on its own nodes, with its own image, before training."""

    enabled: bool = Field(
        True,
        description="Per-node checks, then an nccom-test (Neuron) or nccl-tests (GPU) all-reduce, at the start"
        " of every training launch, with the training image.",
    )
    min_bus_bandwidth_gb_per_second: float | None = Field(
        None,
        gt=0,
        alias="minBusBandwidthGBPerSecond",
        description="Fail below this all-reduce bus bandwidth in GB/s (gigabytes per second, the unit of the tests'"
        " busbw); default per instance type.",
        json_schema_extra={"x-default": "per instance type (`facts/instances.py`)"},
    )
    message_size: str | None = Field(
        None,
        description="All-reduce size, e.g. 2G; default per instance type.",
        json_schema_extra={"x-default": "per instance type: `2G` (p5: `16G`; Trainium: `1G`)"},
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if not isinstance(data, dict) or GBPS_KEY not in data:
            return data
        old = data[GBPS_KEY]
        value = f"{old:g}" if isinstance(old, (int, float)) and not isinstance(old, bool) else "<value>"
        bits = f"; if you meant {value} Gbps, that is {old / 8:g} GB/s" if value != "<value>" else ""
        raise KeyProblem(
            GBPS_KEY,
            f"renamed to minBusBandwidthGBPerSecond: the gate compares the floor with the bus bandwidth nccl-tests"
            f" and nccom-test report in GB/s, as it always did, so write minBusBandwidthGBPerSecond: {value}{bits}",
            "invalid",
        )

    @field_validator("message_size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None and not matches(r"[1-9][0-9]{0,5}[KMG]?", v):
            raise Refusal(f"{v!r} is not a size like 512M or 2G", "invalid")
        return v

    @model_validator(mode="after")
    def _applied(self) -> HealthCheckConfig:
        unused = [k for k in ("min_bus_bandwidth_gb_per_second", "message_size") if getattr(self, k) is not None]
        if not self.enabled and unused:
            key = {"min_bus_bandwidth_gb_per_second": "minBusBandwidthGBPerSecond", "message_size": "messageSize"}
            raise KeyProblem(
                key[unused[0]],
                "is not applied: enabled is false, so no test runs; leave it out, or turn the check on",
                "conflict",
            )
        return self


class ModelConfig(Model):
    """Transformer shape, parallelism and batch sizes; unset fields come from the preset."""

    preset: Literal["7b", "13b", "70b"] = Field(
        "7b", description="Llama 2 size whose shape and parallelism the other `model` keys default to."
    )
    seq_length: int = Field(
        ge=128, description="Sequence length (tokens).", json_schema_extra={"x-default": "from `preset`"}
    )
    hidden_size: int = Field(ge=64, description="Hidden size.", json_schema_extra={"x-default": "from `preset`"})
    ffn_hidden_size: int = Field(
        ge=64, description="Feed-forward hidden size.", json_schema_extra={"x-default": "from `preset`"}
    )
    num_layers: int = Field(ge=1, description="Transformer layers.", json_schema_extra={"x-default": "from `preset`"})
    num_attention_heads: int = Field(
        ge=1, description="Attention heads.", json_schema_extra={"x-default": "from `preset`"}
    )
    num_kv_heads: int = Field(
        ge=1,
        description="Key/value heads (grouped-query attention when fewer).",
        json_schema_extra={"x-default": "from `preset`"},
    )
    tensor_parallel: int = Field(
        ge=1, description="Tensor-parallel degree (TP).", json_schema_extra={"x-default": "from `preset`"}
    )
    pipeline_parallel: int = Field(
        ge=1, description="Pipeline-parallel degree (PP).", json_schema_extra={"x-default": "from `preset`"}
    )
    sequence_parallel: bool = Field(True, description="Sequence parallelism (with TP > 1).")
    micro_batch_size: int = Field(
        ge=1, description="Sequences per rank per micro step.", json_schema_extra={"x-default": "from `preset`"}
    )
    global_batch_size: int = Field(
        ge=1, description="Sequences per optimizer step.", json_schema_extra={"x-default": "from `preset`"}
    )
    init_method_std: float = Field(
        gt=0,
        description="Standard deviation of the weight initialisation.",
        json_schema_extra={"x-default": "from `preset`"},
    )
    layernorm_epsilon: float = Field(
        gt=0, description="RMSNorm epsilon.", json_schema_extra={"x-default": "from `preset`"}
    )

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
            raise KeyProblem(
                "hiddenSize",
                f"{self.hidden_size} is not divisible by numAttentionHeads {self.num_attention_heads}",
                "conflict",
            )
        if self.num_attention_heads % self.num_kv_heads:
            raise KeyProblem(
                "numKvHeads",
                f"{self.num_kv_heads} does not divide numAttentionHeads {self.num_attention_heads}",
                "conflict",
            )
        if self.num_attention_heads % self.tensor_parallel:
            raise KeyProblem(
                "tensorParallel",
                f"{self.tensor_parallel} does not divide numAttentionHeads {self.num_attention_heads}",
                "conflict",
            )
        if self.num_kv_heads % self.tensor_parallel:
            # Megatron splits the key/value heads over the tensor-parallel ranks and asserts they
            # divide: megatron-core attention.py `divide(num_query_groups, world_size)` (NeMo GPU),
            # neuronx-nemo-megatron transformer.py `safe_divide(num_kv_heads, world_size)`.
            raise KeyProblem(
                "tensorParallel",
                f"{self.tensor_parallel} does not divide numKvHeads {self.num_kv_heads}: Megatron splits the"
                " key/value heads over the tensor-parallel ranks and refuses a remainder",
                "conflict",
            )
        if self.sequence_parallel and self.tensor_parallel > 1 and self.seq_length % self.tensor_parallel:
            # Megatron Core's scatter to the sequence-parallel region asserts it in the first forward
            # (core mappings.py _split_along_first_dim; neuronx-distributed's the same:
            # tests/upstream/megatron-sequence-parallel.yaml).
            raise KeyProblem(
                "seqLength",
                f"{self.seq_length} tokens do not split over tensorParallel {self.tensor_parallel} with sequence"
                " parallelism (Megatron splits the sequence over the TP ranks)",
                "conflict",
                allowed=f"a multiple of {self.tensor_parallel}, or sequenceParallel: false",
            )
        if self.num_layers % self.pipeline_parallel:
            raise KeyProblem(
                "pipelineParallel", f"{self.pipeline_parallel} does not divide numLayers {self.num_layers}", "conflict"
            )
        if self.global_batch_size % self.micro_batch_size:
            raise KeyProblem(
                "globalBatchSize",
                f"{self.global_batch_size} is not a multiple of microBatchSize {self.micro_batch_size}",
                "conflict",
            )
        return self


class TrainingConfig(Model):
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
    checkpoints_to_keep: int = Field(
        2,
        ge=1,
        le=20,
        description="Newest checkpoints kept; the file system must hold them (config check), older ones are deleted.",
    )

    @model_validator(mode="after")
    def _schedule(self) -> TrainingConfig:
        if self.min_learning_rate > self.learning_rate:
            raise KeyProblem(
                "minLearningRate", f"{self.min_learning_rate} is above learningRate {self.learning_rate}", "invalid"
            )
        if self.warmup_steps + self.constant_steps >= self.max_steps:
            raise KeyProblem(
                "warmupSteps",
                f"warmupSteps + constantSteps ({self.warmup_steps + self.constant_steps}) must be below"
                f" maxSteps {self.max_steps}",
                "conflict",
            )
        if self.constant_steps > LONGEST_FLOOR_SHARE * self.max_steps:  # estimates.schedule.problems says why
            raise KeyProblem(
                "constantSteps",
                f"{self.constant_steps} of maxSteps {self.max_steps} train at minLearningRate after the decay; keep it"
                f" at most {int(LONGEST_FLOOR_SHARE * self.max_steps)}",
                "conflict",
            )
        return self


class Llama2DataConfig(Model):
    """Where the tokenizer and the pretraining corpus come from (Hugging Face Hub)."""

    tokenizer: str = Field("meta-llama/Llama-2-7b-hf", description="Hugging Face model repo of the tokenizer.")
    dataset: str = Field(
        "togethercomputer/RedPajama-Data-1T-Sample", description="Hugging Face dataset repo of JSONL files."
    )
    include: str = Field("*.jsonl", description="Files of the dataset to download and tokenize (glob).")

    @field_validator("tokenizer", "dataset")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not matches(r"[A-Za-z0-9_.\-]{1,96}/[A-Za-z0-9_.\-]{1,96}", v):
            raise Refusal(f"{v!r} is not a Hugging Face repo id like owner/name", "invalid")
        return v


# NeMo's megatron tokenizer downloads the GPT-2 BPE files at run time (megatron_utils.py of
# NeMo r2.0.0rc1); the nemo image fetches them once at build time, here.
GPT2_VOCAB = "/opt/tokenizers/gpt2/vocab.json"
GPT2_MERGES = "/opt/tokenizers/gpt2/merges.txt"
MEGATRON_DEFAULT_TYPE = "GPT2BPETokenizer"


class NemoTokenizerConfig(Model):
    """The tokenizer NeMo builds the model with (its vocabulary size); it must be the one the
    data was tokenized with. NeMo's llama config leaves `model.tokenizer.model` mandatory, so
    something is always set. Default: the GPT-2 BPE files baked into the nemo image."""

    library: Literal["megatron", "sentencepiece", "huggingface"] = Field(
        "megatron",
        description="NeMo tokenizer library (`model.tokenizer.library`): the tokenizer the data was made with.",
    )
    type: str | None = Field(
        None,
        description="megatron: the tokenizer name; huggingface: the model name or a directory.",
        json_schema_extra={"x-default": "`GPT2BPETokenizer` (megatron)"},
    )
    model: str | None = Field(
        None, description="sentencepiece: the `tokenizer.model` file under `/shared` (required with `sentencepiece`)."
    )
    vocab_file: str | None = Field(
        None,
        description="megatron: the vocabulary file.",
        json_schema_extra={"x-default": "the image's GPT-2 vocabulary in `/opt/tokenizers/gpt2/`"},
    )
    merge_file: str | None = Field(
        None,
        description="megatron: the merges file.",
        json_schema_extra={"x-default": "the image's GPT-2 merges in `/opt/tokenizers/gpt2/`"},
    )

    @model_validator(mode="after")
    def _complete(self) -> NemoTokenizerConfig:
        if self.library == "sentencepiece" and not self.model:
            raise KeyProblem("model", "required with library sentencepiece (the tokenizer.model file)", "required")
        if self.library == "huggingface" and not self.type:
            raise KeyProblem("type", "required with library huggingface (a model name or directory)", "required")
        if self.library != "megatron" and (self.vocab_file or self.merge_file):
            raise KeyProblem("vocabFile", "only for library megatron", "conflict")
        return self

    @property
    def effective_type(self) -> str | None:
        """model.tokenizer.type as rendered: megatron's default is GPT2BPETokenizer."""
        return self.type or (MEGATRON_DEFAULT_TYPE if self.library == "megatron" else None)

    @property
    def hub_repo(self) -> needs.HubRepo | None:
        """The Hub repository NeMo's AutoTokenizer reads for this tokenizer (None: none): a megatron
        type reads its repository even with vocab and merges files given; huggingface a Hub id."""
        return needs.tokenizer_repo(self.library, self.effective_type)


# BERT-large phase 1 of the Neuron tutorial (aws-neuron-samples v2.27.0 dp_bert_hf_pretrain and
# the torch-neuronx BERT tutorial page): batch 16 per NeuronCore, global batch 16384 whatever
# the node count (the tutorial divides gradient accumulation by the nodes), lr 4e-4, 2000
# warmup steps, 28125 steps, a checkpoint after every dataset shard, the last one kept.
BERT_DATASET = "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"


class BertTrainingConfig(Model):
    """BERT-large phase-1 pretraining schedule (dp_bert_large_hf_pretrain_hdf5.py options)."""

    max_steps: int = Field(28125, ge=1, description="Optimizer steps (--max_steps; the LR schedule's length).")
    batch_size: int = Field(16, ge=1, description="Sequences per NeuronCore per micro step (--batch_size).")
    global_batch_size: int = Field(16384, ge=1, description="Sequences per optimizer step, whatever the node count.")
    learning_rate: float = Field(4e-4, gt=0, description="Peak learning rate (--lr).")
    warmup_steps: int = Field(2000, ge=0, description="Linear warmup steps (--warmup_steps).")
    shards_per_checkpoint: int = Field(
        1, ge=1, description="Dataset shards between checkpoints (--shards_per_ckpt; the script saves per shard)."
    )
    checkpoints_to_keep: int = Field(1, ge=1, le=20, description="Newest checkpoints kept (--num_ckpts_to_keep).")
    precompile_steps: int = Field(10, ge=1, description="Steps neuron_parallel_compile traces (--steps_this_run).")

    @model_validator(mode="after")
    def _warmup(self) -> BertTrainingConfig:
        if self.warmup_steps >= self.max_steps:
            raise KeyProblem("warmupSteps", f"{self.warmup_steps} must be below maxSteps {self.max_steps}", "conflict")
        return self

    def grad_accum(self, ranks: int) -> int | None:
        """Micro steps per optimizer step on `ranks` NeuronCores, or None if they do not divide."""
        per_micro_step = ranks * self.batch_size
        if self.global_batch_size % per_micro_step:
            return None
        return self.global_batch_size // per_micro_step


class BertDataConfig(Model):
    """Where the tokenized HDF5 shards come from (the tutorial's public archive)."""

    archive: str = Field(
        BERT_DATASET,
        description="s3:// URL of a tar of tokenized HDF5 shards, unpacked onto `/shared` (default: the tutorial's).",
    )

    @field_validator("archive")
    @classmethod
    def _s3(cls, v: str) -> str:
        if not matches(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]/[!-~]+\.tar", v):
            raise Refusal(f"{v!r} is not an s3:// URL of a .tar archive", "invalid")
        return v


def parallelism_problems(key: str, m: ModelConfig, nodes: int, instance: instances.InstanceType) -> list[str]:
    """TP x PP divides the ranks, the global batch divides into data-parallel micro batches,
    and tensor parallelism stays within one node."""
    placed = nodegroups.placement(instance, nodes)
    per_node, ranks = placed.ranks_per_node, placed.ranks
    model_parallel = m.tensor_parallel * m.pipeline_parallel
    if ranks % model_parallel:
        return [
            problem(
                f"{key}.model.tensorParallel",
                "conflict",
                f"TP {m.tensor_parallel} x PP {m.pipeline_parallel} = {model_parallel}"
                f" does not divide the {ranks} ranks ({nodes} nodes x {per_node})",
            )
        ]
    problems: list[str] = []
    dp = ranks // model_parallel
    if m.global_batch_size % (dp * m.micro_batch_size):
        problems.append(
            problem(
                f"{key}.model.globalBatchSize",
                "conflict",
                f"{m.global_batch_size} is not divisible by data-parallel size {dp}"
                f" x microBatchSize {m.micro_batch_size} = {dp * m.micro_batch_size}",
            )
        )
    if m.tensor_parallel > per_node:
        problems.append(
            problem(
                f"{key}.model.tensorParallel",
                "conflict",
                f"{m.tensor_parallel} spans nodes; keep it at most {per_node} (the ranks of one {instance.name})",
            )
        )
    return problems
