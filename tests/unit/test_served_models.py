"""facts/served_models.py against the configs NeMo and Megatron Bridge hold for each Hub model."""

from __future__ import annotations

from typing import Any

import pytest

from facts.served_models import HUB_SHAPES, AttentionShape
from tests import upstream

HELD = {**upstream.facts("served-shapes-llama31"), **upstream.facts("served-shapes-qwen3")}


def _shape(f: dict[str, Any]) -> AttentionShape:
    head_dim = f.get("kv_channels") or f["hidden_size"] // f["num_attention_heads"]
    return AttentionShape(f["num_layers"], f["num_attention_heads"], f["num_query_groups"], head_dim, f["seq_length"])


@pytest.mark.parametrize("repo", sorted(HUB_SHAPES))
def test_every_listed_shape_is_its_upstream_config(repo: str) -> None:
    held = repo.replace("Meta-Llama", "Llama").removesuffix("-Instruct")
    assert HUB_SHAPES[repo] == _shape(HELD[held])


def test_llama_70b_at_64k_needs_20_gib_of_kv_cache() -> None:
    """The issue's figure: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 320 KiB a token."""
    shape = HUB_SHAPES["meta-llama/Llama-3.1-70B-Instruct"]
    assert shape.kv_bytes_per_token() * 65536 / 2**30 == 20.0
    # Tensor parallelism above the KV heads replicates them: 16 ranks hold 16 heads' worth.
    assert shape.kv_bytes_per_token(16) == 2 * shape.kv_bytes_per_token(8)
