"""Model FLOPs per trained token: one formula for every recipe, so MFUs compare like with like.

The formula is Megatron Core's `num_floating_point_operations` (NVIDIA/Megatron-LM core_r0.19.0,
16ad357e, megatron/training/training.py:549-845, `transformer_flops`, dense layers and standard
attention; tests/upstream/megatron-core-flops-r0.19.0.yaml): 3 (forward and backward) x 2 (a
multiply-add) x, per layer, the q, k, v and output projections, the causal attention scores and
values (half the s x s mask: 6 x q x s per token), the MLP (three matrices with SwiGLU), plus the
logit layer over the padded vocabulary. Embedding lookups, norms and activation recomputation are
not counted. It is the formula behind NVIDIA's published Megatron Bridge model TFLOP/s (it
reproduces them: tests/unit/test_flops.py). PaLM's 6N + 12 L h s, which adds the embedding matrix
to N and counts the full, unmasked attention, counts 18.6% more for Llama 3 8B at a sequence of 8192.
"""

from __future__ import annotations

from facts.megatron_bridge import ModelShape

FORMULA = "Megatron Core 0.19.0's formula: causal attention and logits, no embedding or recompute"
"""How the plan names the formula (its MFU basis)."""


def flops_per_token(shape: ModelShape, seq_length: int, head_dim: int | None = None) -> float:
    """Model FLOPs of one trained token of a Llama-style decoder (SwiGLU MLP; `shape.vocab` the
    logit layer's, Megatron's padded one where it pads) at `seq_length`, forward and backward, by
    Megatron Core's formula; `head_dim` the channels per head where not hidden / heads."""
    m = shape
    head_dim = head_dim or m.hidden // m.heads
    q, kv = head_dim * m.heads, head_dim * m.kv_heads
    factor = 3 * 2  # forward + backward (x3), multiply-add (x2)
    projections = m.hidden * (q + 2 * kv) + q * m.hidden
    attention = q * seq_length  # QK^T and (QK^T)V over half of the causal mask: 2 / 2
    mlp = m.hidden * m.ffn_hidden * 3  # SwiGLU: three matrices
    return factor * (m.layers * (projections + attention + mlp) + m.hidden * m.vocab)
