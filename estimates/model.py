"""A decoder's size from its shape: parameters (what a checkpoint holds). Its model FLOPs per
trained token (what MFU counts) are estimates/flops.py's, one formula for every recipe."""

from __future__ import annotations

from dataclasses import dataclass

LLAMA2_VOCAB = 32000
"""Llama 2's tokenizer vocabulary (Meta's model card); embedding and output layers are untied."""


@dataclass(frozen=True)
class DecoderShape:
    """The transformer shape of a Llama-style decoder (a recipe's config builds it from its keys)."""

    hidden_size: int
    ffn_hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    seq_length: int


def padded_vocab(vocab: int, divisible_by: int, tensor_parallel: int) -> int:
    """Megatron's padded vocabulary (NeMo's _vocab_size_with_padding): up to a multiple of
    make_vocab_size_divisible_by x the tensor-parallel size."""
    multiple = divisible_by * tensor_parallel
    return -(-vocab // multiple) * multiple


def llama_parameters(m: DecoderShape, vocab: int = LLAMA2_VOCAB) -> int:
    """Parameters of a Llama-style decoder: untied embedding and output layer, per layer
    attention (q and o full, k and v per KV head), SwiGLU MLP (three matrices) and two
    RMSNorms, and the final norm."""
    h = m.hidden_size
    kv = h // m.num_attention_heads * m.num_kv_heads
    attention = 2 * h * h + 2 * h * kv
    mlp = 3 * h * m.ffn_hidden_size
    return 2 * vocab * h + m.num_layers * (attention + mlp + 2 * h) + h
