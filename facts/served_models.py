"""The attention shape of the Hub models a server is known to serve: what sizes its KV cache and
how its heads split over tensor parallelism. A Hub model not listed here is checked by its
weights alone (its config.json is read on the cluster, not at plan time).

Sources (tests/upstream/served-shapes-llama31.yaml, served-shapes-qwen3.yaml; held by
tests/unit/test_served_models.py):
- Llama 3.1: NeMo `nemo/collections/llm/gpt/model/llama.py` (commit 6130ca0, its shapes "copied
  from the corresponding HF model"): Llama31Config8B/70B/405B layers, heads, seq_length 131072,
  and Llama3Config's num_query_groups 8.
- Qwen3: Megatron Bridge `src/megatron/bridge/models/qwen/qwen_provider.py`: Qwen3ModelProvider's
  kv_channels 128, num_query_groups 8, max_position_embeddings 40960; Qwen3ModelProvider8B's 36
  layers and 32 heads.
"""

from __future__ import annotations

from dataclasses import dataclass

KV_BYTES = 2
"""bf16 keys and values: vLLM's KV cache dtype `auto` follows the model's dtype."""


@dataclass(frozen=True)
class AttentionShape:
    """What vLLM sizes a model's KV cache and splits its attention by."""

    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    max_position_embeddings: int | None = None

    def kv_bytes_per_token(self, tensor_parallel: int = 1) -> int:
        """Keys and values of one token in every layer, over a replica's tensor-parallel ranks: a
        rank holds kv_heads / tp heads, or one replicated head where tp exceeds kv_heads."""
        heads = max(self.kv_heads, tensor_parallel)
        return 2 * self.layers * heads * self.head_dim * KV_BYTES


_LLAMA31 = {
    "8B": AttentionShape(32, 32, 8, 128, 131072),
    "70B": AttentionShape(80, 64, 8, 128, 131072),
    "405B": AttentionShape(126, 128, 8, 128, 131072),
}
HUB_SHAPES: dict[str, AttentionShape] = {
    **{f"meta-llama/Llama-3.1-{size}{kind}": shape for size, shape in _LLAMA31.items() for kind in ("", "-Instruct")},
    **{f"meta-llama/Meta-Llama-3.1-{size}{kind}": s for size, s in _LLAMA31.items() for kind in ("", "-Instruct")},
    "Qwen/Qwen3-8B": AttentionShape(36, 32, 8, 128, 40960),
}
"""Hub repository -> its attention shape (the repositories the examples and docs name)."""
