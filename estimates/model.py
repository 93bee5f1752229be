"""A decoder's size and work from its shape: parameters (what a checkpoint holds) and model
FLOPs per trained token (what MFU counts)."""

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


def transformer_flops_per_token(parameters: int, layers: int, hidden: int, seq_length: int) -> float:
    """Model FLOPs of one trained token of a decoder, forward and backward: 6 per parameter plus
    the attention's 12 x layers x hidden x sequence length (Chowdhery et al. 2022, PaLM,
    appendix B: "model FLOPs utilization"; no recomputation counted)."""
    return 6.0 * parameters + 12.0 * layers * hidden * seq_length


def llama_flops_per_token(m: DecoderShape, vocab: int = LLAMA2_VOCAB) -> float:
    """Model FLOPs per trained token of a Llama-style decoder of shape `m`."""
    return transformer_flops_per_token(llama_parameters(m, vocab), m.num_layers, m.hidden_size, m.seq_length)
