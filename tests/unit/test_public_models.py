"""A public model does not demand the stack's Hugging Face token. Megatron Bridge's recipes stage
Llama 3.1's gated repositories and Qwen3's public one (Qwen/Qwen3-8B, ungated on the Hub: the
stand-in Hub of tests/launch serves it without a token); before, every megatron-bridge run, Qwen3
too, made `pulumi up` refuse a stack without `huggingFaceToken`."""

from __future__ import annotations

import pytest

from tests.unit.test_config import _load_errors
from tests.unit.test_megatron_bridge import _stack

NS = "llm-training-eks:"


@pytest.mark.parametrize(("model", "demanded"), [("qwen3_8b", False), ("llama31_8b", True)])
def test_only_a_gated_model_demands_the_token(model: str, demanded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    values = _stack({"model": model})
    del values[NS + "huggingFaceToken"]
    lines = [x for x in _load_errors(values, monkeypatch) if x.startswith("huggingFaceToken")]
    assert bool(lines) == demanded, lines
