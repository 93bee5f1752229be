"""What training runs share: the transformer shape and parallelism, the optimizer schedule,
the data sources of the Llama2 recipe, and the health gate before training."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from config.base import KeyProblem, Model, check_image
from facts import instances

# Llama2 shapes (Meta's Llama 2 model cards and the Data on EKS Llama2-7B example) with
# parallelism and batch sizes that fit trn1 nodes (32 NeuronCores each): 7B is the Data on
# EKS run; 13B and 70B add pipeline stages so the weights fit in device memory. Any field can
# be overridden in the stack.
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


class HealthCheckConfig(Model):
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
        return check_image(v)


class ModelConfig(Model):
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
            raise KeyProblem(
                "hiddenSize", f"{self.hidden_size} is not divisible by numAttentionHeads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_kv_heads:
            raise KeyProblem(
                "numKvHeads", f"{self.num_kv_heads} does not divide numAttentionHeads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.tensor_parallel:
            raise KeyProblem(
                "tensorParallel",
                f"{self.tensor_parallel} does not divide numAttentionHeads {self.num_attention_heads}",
            )
        if self.num_layers % self.pipeline_parallel:
            raise KeyProblem(
                "pipelineParallel", f"{self.pipeline_parallel} does not divide numLayers {self.num_layers}"
            )
        if self.global_batch_size % self.micro_batch_size:
            raise KeyProblem(
                "globalBatchSize",
                f"{self.global_batch_size} is not a multiple of microBatchSize {self.micro_batch_size}",
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

    @model_validator(mode="after")
    def _schedule(self) -> TrainingConfig:
        if self.min_learning_rate > self.learning_rate:
            raise KeyProblem("minLearningRate", f"{self.min_learning_rate} is above learningRate {self.learning_rate}")
        if self.warmup_steps + self.constant_steps >= self.max_steps:
            raise KeyProblem(
                "warmupSteps",
                f"warmupSteps + constantSteps ({self.warmup_steps + self.constant_steps}) must be below"
                f" maxSteps {self.max_steps}",
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
        if not re.fullmatch(r"[\w.\-]+/[\w.\-]+", v):
            raise ValueError(f"{v!r} is not a Hugging Face repo id like owner/name")
        return v


def parallelism_problems(key: str, m: ModelConfig, nodes: int, instance: instances.InstanceType) -> list[str]:
    """TP x PP divides the ranks, the global batch divides into data-parallel micro batches,
    and tensor parallelism stays within one node."""
    per_node = instance.ranks_per_node
    ranks = nodes * per_node
    model_parallel = m.tensor_parallel * m.pipeline_parallel
    if ranks % model_parallel:
        return [
            f"{key}.model.tensorParallel: TP {m.tensor_parallel} x PP {m.pipeline_parallel} = {model_parallel}"
            f" does not divide the {ranks} ranks ({nodes} nodes x {per_node})"
        ]
    problems = []
    dp = ranks // model_parallel
    if m.global_batch_size % (dp * m.micro_batch_size):
        problems.append(
            f"{key}.model.globalBatchSize: {m.global_batch_size} is not divisible by data-parallel size {dp}"
            f" x microBatchSize {m.micro_batch_size} = {dp * m.micro_batch_size}"
        )
    if m.tensor_parallel > per_node:
        problems.append(
            f"{key}.model.tensorParallel: {m.tensor_parallel} spans nodes; keep it at most"
            f" {per_node} (the ranks of one {instance.name})"
        )
    return problems
