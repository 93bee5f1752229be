"""Parallelism the frameworks refuse at their first step is refused at plan time (exit 2 naming
the key), each rule as its framework states it at the pinned version:
- TorchTitan (tests/upstream/torchtitan-parallelism.yaml, pytorch/torchtitan c537bca6
  torchtitan/models/common/decoder.py:149/154 and cfd67d392 qwen3/parallelize.py:78): tensor
  parallel divides the heads and the KV heads; the sequence is a multiple of 2 x TP;
- Megatron Core core_r0.19.0 (tests/upstream/megatron-sequence-parallel.yaml,
  megatron/core/tensor_parallel/mappings.py:73): with sequence parallelism the sequence (per
  context-parallel rank) divides over the tensor-parallel ranks; the same in core_v0.8.0 (NeMo GPU)
  and neuronx-distributed v2.28.0 (mappings.py:85).
The model shapes are the pinned configs the recipes read (torchtitan-config-cli.yaml qwen3_8b)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import config
from config.workloads.torchtitan_neuron import QWEN3_8B
from facts import megatron_bridge as bridge
from tests import upstream
from tests.conftest import plan_exit
from tests.unit.test_trainium_recipes import _problems, _with

TITAN = upstream.facts("torchtitan-parallelism")["plan_rule"]
TITAN_SHAPE = upstream.facts("torchtitan-config-cli")["qwen3_8b"]


def _lines(values: dict[str, object], path: str) -> list[str]:
    return [p for p in _problems(values) if p.startswith(path + ":")]


def test_the_titan_shape_is_torchtitans_qwen3_8b_config() -> None:
    """The heads the rule divides are torchtitan/models/qwen3/__init__.py's "8B" at c537bca6."""
    assert {
        "vocab_size": QWEN3_8B["vocab"],
        "dim": QWEN3_8B["hidden"],
        "n_layers": QWEN3_8B["layers"],
        "n_heads": QWEN3_8B["heads"],
        "n_kv_heads": QWEN3_8B["kv_heads"],
        "head_dim": QWEN3_8B["head_dim"],
        "hidden_dim": QWEN3_8B["ffn"],
    } == TITAN_SHAPE


@pytest.mark.parametrize("tp", [16, 32, 64])
def test_titan_tp_that_leaves_a_rank_part_of_a_kv_head_is_refused(tp: int) -> None:
    """Qwen3-8B has 8 KV heads: TP 16/32/64 divides a trn2 node's 64 ranks but not the heads."""
    assert "n_kv_heads" in TITAN["tp_divides"]
    lines = _lines(
        _with("trn2-torchtitan", "titan", **{"model.tensorParallel": tp}), "workloads.titan.model.tensorParallel"
    )
    assert len(lines) == 1, lines
    assert f"{TITAN_SHAPE['n_kv_heads']} KV heads" in lines[0] and "1, 2, 4, 8" in lines[0], lines[0]
    assert lines[0].kind == "conflict" and lines[0].allowed == "1, 2, 4, 8"  # type: ignore[attr-defined]


def test_titan_sequence_that_tp_does_not_split_evenly_is_refused() -> None:
    """The lower end asserts seq_len % (TP x 2 x CP): 4100 tokens over TP 4 is refused (4100 = 8 x 512.5)."""
    factor = TITAN["seq_len_multiple_of_tp_times"]
    lines = _lines(_with("trn2-torchtitan", "titan", **{"model.seqLength": 4100}), "workloads.titan.model.seqLength")
    assert len(lines) == 1 and f"multiple of {factor * 4}" in lines[0], lines


def test_titan_shape_unknown_is_not_guessed() -> None:
    """Another Hugging Face repo: its heads are not recorded, so only the node rule applies."""
    values = _with("trn2-torchtitan", "titan", **{"model.tensorParallel": 16, "model.huggingFaceRepo": "org/other"})
    config.parse_stack_values(values)


def test_bridge_sequence_parallel_sequence_must_split_over_tp() -> None:
    """Llama 3.1 8B SFT (library recipe TP 2) with sequence parallelism at seq 4097."""
    values = _with(
        "p5en-megatron-bridge",
        "sft",
        **{"parallelism.sequenceParallel": True, "training.seqLength": 4097},
    )
    lines = _lines(values, "workloads.sft.training.seqLength")
    assert len(lines) == 1 and "sequence parallelism" in lines[0] and "tensorParallel 2" in lines[0], lines
    # without sequence parallelism the same sequence is accepted
    config.parse_stack_values(_with("p5en-megatron-bridge", "sft", **{"training.seqLength": 4097}))


def test_nemo_sequence_parallel_sequence_must_split_over_tp(tmp_path: Path) -> None:
    """NeMo GPU (Megatron Core) with the 7b preset's TP 4 override and sequence parallelism on."""
    values = _with("p4de-nemo", "nemo", **{"model.seqLength": 4098})
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and "Traceback" not in err, err
    line = next(line for line in err.splitlines() if "workloads.nemo.model.seqLength" in line)
    assert "sequence parallelism" in line and "tensorParallel 4" in line, line


def test_the_rules_are_read_at_the_versions_the_images_run() -> None:
    """Next release: the Megatron Core rule is read at the image's Megatron Core, the TorchTitan
    rules at both ends of the range the fork's CLI is held to; a bump of either fails here until the
    rules are re-read."""
    sp = upstream.load("megatron-sequence-parallel")["source"]
    assert sp["commit"] == bridge.MCORE_COMMIT and sp["ref"] == f"core_r{bridge.MCORE_VERSION}"
    titan, cli = upstream.load("torchtitan-parallelism")["source"], upstream.load("torchtitan-config-cli")["source"]
    assert titan["commit"] == cli["commit"]
    lower = re.search(r"lower end ([0-9a-f]{40})", cli["also"])
    assert lower is not None and lower.group(1) in titan["also"]


def test_an_edit_to_tp_16_is_exit_2_before_anything_changes(tmp_path: Path) -> None:
    """Next change: the deployed trn2 TorchTitan run edited to TP 16 never reaches `pulumi up` (was
    accepted, then failed at TorchTitan's start on every node)."""
    code, err = plan_exit(_with("trn2-torchtitan", "titan", **{"model.tensorParallel": 16}), tmp_path)
    assert code == 2 and "Traceback" not in err, err
    assert any(line.startswith("workloads.titan.model.tensorParallel: 16 must divide") for line in err.splitlines()), (
        err
    )
