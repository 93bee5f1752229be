"""How big a run's checkpoints are, how long one interval's take to write to the shared file
system, and whether the file system can hold the ones a run keeps.

Sizes are estimates from the model shape: parameters x bytes per parameter of what the
framework saves. Each recipe states its own `CheckpointModel` (config/workloads/<recipe>.py);
nothing here knows a recipe by name. Write time assumes the whole file system's throughput
goes to the checkpoint (FSx for Lustre: storage TiB x throughput tier), which is the best case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from config.storage import StorageConfig
from config.training import ModelConfig

GIB = 1024**3
TB = 1000**4
LLAMA2_VOCAB = 32000
"""Llama 2's tokenizer vocabulary (Meta's model card); embedding and output layers are untied."""
STORAGE_SHARE = 0.8
"""Share of the file system the kept checkpoints may fill; the rest is for data, logs, caches."""
MAX_WRITE_SHARE = 0.02
"""The example stacks keep checkpoint writing at or under 2% of training time."""


@dataclass(frozen=True)
class CheckpointSize:
    """How a recipe's checkpoints are sized: the run's parameters (from its model shape) x the
    bytes each parameter takes in what the framework saves (weights plus optimizer state)."""

    bytes_per_parameter: int
    why: str
    """What the framework saves per parameter, and where that is read (the source of the number)."""
    written_per_interval: int = 1
    """Checkpoints written at each checkpoint interval (the write time counts each)."""
    kept_beyond: int = 0
    """Checkpoints the framework keeps beyond the run's `checkpointsToKeep` (a `last` copy)."""


@dataclass(frozen=True)
class NotSized:
    """A recipe whose checkpoints the project does not size, and why (no storage check, no write time)."""

    why: str


CheckpointModel = CheckpointSize | NotSized
"""What a recipe says about its checkpoints."""


def shown_seconds(seconds: float) -> float:
    """Seconds to three decimals for the plan, or to three significant digits below a millisecond,
    so a short step never shows (or computes a cost) as zero."""
    return round(seconds, 3) or float(f"{seconds:.3g}")


def padded_vocab(vocab: int, divisible_by: int, tensor_parallel: int) -> int:
    """Megatron's padded vocabulary (NeMo's _vocab_size_with_padding): up to a multiple of
    make_vocab_size_divisible_by x the tensor-parallel size."""
    multiple = divisible_by * tensor_parallel
    return -(-vocab // multiple) * multiple


def llama_parameters(m: ModelConfig, vocab: int = LLAMA2_VOCAB) -> int:
    """Parameters of a Llama-style decoder: untied embedding and output layer, per layer
    attention (q and o full, k and v per KV head), SwiGLU MLP (three matrices) and two
    RMSNorms, and the final norm."""
    h = m.hidden_size
    kv = h // m.num_attention_heads * m.num_kv_heads
    attention = 2 * h * h + 2 * h * kv
    mlp = 3 * h * m.ffn_hidden_size
    return 2 * vocab * h + m.num_layers * (attention + mlp + 2 * h) + h


def transformer_flops_per_token(parameters: int, layers: int, hidden: int, seq_length: int) -> float:
    """Model FLOPs of one trained token of a decoder, forward and backward: 6 per parameter plus
    the attention's 12 x layers x hidden x sequence length (Chowdhery et al. 2022, PaLM,
    appendix B: "model FLOPs utilization"; no recomputation counted)."""
    return 6.0 * parameters + 12.0 * layers * hidden * seq_length


def write_mb_per_second(storage: StorageConfig) -> float:
    """Aggregate throughput of the file system, MB/s (FSx: TiB x MB/s per TiB; SCRATCH_2's
    baseline is 200 MB/s per TiB)."""
    per_tib = storage.throughput_per_tib if storage.persistent else 200
    return storage.storage_capacity_gib / 1024 * per_tib


@dataclass(frozen=True)
class CheckpointPlan:
    """One run's checkpoints against the file system."""

    size_bytes: int
    kept: int
    write_seconds: float
    interval_steps: int | None
    """Steps between checkpoints; None when the framework counts otherwise (BERT: per shard)."""
    step_seconds: float | None
    writes: int | None = None
    """Checkpoints the whole run writes, where the recipe counts them as its framework does."""
    total_steps: int | None = None
    """Optimizer steps of the whole run, where the config says: an interval longer than the run
    still writes once, at its end, so the share is counted over the run."""
    assumes: str = ""
    """What the size assumes that the config does not state (the vocabulary)."""
    per_interval: int = 1
    """Checkpoints written at each interval (write_seconds counts them all)."""

    @property
    def kept_bytes(self) -> int:
        return self.size_bytes * self.kept

    @property
    def write_share(self) -> float | None:
        """Share of training time spent writing checkpoints (None: step time or interval unknown)."""
        if self.interval_steps is None or self.step_seconds is None:
            return None
        steps = min(self.interval_steps, self.total_steps or self.interval_steps)
        return self.write_seconds / (self.write_seconds + steps * self.step_seconds)

    def shortest_interval(self, share: float = MAX_WRITE_SHARE) -> int | None:
        """The fewest steps between checkpoints that keeps writing at or under `share` of training
        time (None: step time unknown)."""
        if self.step_seconds is None:
            return None
        return math.ceil(self.write_seconds * (1 - share) / (share * self.step_seconds))

    def as_dict(self) -> dict[str, object]:
        share = self.write_share
        out: dict[str, object] = {
            "sizeGB": round(self.size_bytes / 1e9, 1),
            "kept": self.kept,
            "writeSeconds": round(self.write_seconds),
            "everySteps": self.interval_steps,
            "stepSeconds": None if self.step_seconds is None else shown_seconds(self.step_seconds),
            "writeShare": None if share is None else round(share, 4),
            "writesPerInterval": self.per_interval,
            **({"assumes": self.assumes} if self.assumes else {}),
        }
        if self.writes is not None:
            out["writes"] = self.writes
        return out


def plan(
    model: CheckpointModel,
    parameters: int | None,
    kept: int,
    interval_steps: int | None,
    storage: StorageConfig,
    step_seconds: float | None = None,
    writes: int | None = None,
    total_steps: int | None = None,
    assumes: str = "",
) -> CheckpointPlan | None:
    """The checkpoint plan of one run (None when its recipe does not size its checkpoints, or
    the run has no parameter count): `kept` the run keeps, plus what the framework keeps beyond;
    the write time of every checkpoint one interval writes."""
    if isinstance(model, NotSized) or parameters is None:
        return None
    size = parameters * model.bytes_per_parameter
    seconds = model.written_per_interval * size / (write_mb_per_second(storage) * 1e6)
    kept += model.kept_beyond
    per = model.written_per_interval
    return CheckpointPlan(size, kept, seconds, interval_steps, step_seconds, writes, total_steps, assumes, per)
