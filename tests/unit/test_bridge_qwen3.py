"""Qwen3 8B on the megatron-bridge recipe (tests/upstream/megatron-bridge-0.6.0.yaml): its library
recipes read Qwen/Qwen3-8B at a pinned commit, so that commit is what the hub step stages and the
import and export read offline; a revision other than the one a library recipe reads is refused,
for Llama too (its recipes read `main`); no published figure, so no throughput estimate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from estimates.bridge import BridgeShape, published_row
from facts import megatron_bridge as bridge
from tests import upstream
from tests.conftest import plan_exit, stack_plan
from tests.unit.test_megatron_bridge import _stack
from tests.upstream.arguments import containers, invocations, script

BRIDGE = upstream.facts("megatron-bridge-0.6.0")
QWEN3 = bridge.MODELS["qwen3_8b"]
QWEN_RUN = BridgeShape("qwen3_8b", "sft", "bf16", nodes=2, global_batch_size=32, seq_length=2048)
SFT = {"model": "qwen3_8b", "mode": "sft", "data": {"source": "jsonl", "datasetRoot": "/shared/d"}}


def _scripts(stack: str, workload: str) -> list[str]:
    objs = [
        r["inputs"]
        for r in stack_plan(stack)["resources"]
        if r["type"].startswith("kubernetes:") and r["inputs"].get("metadata", {}).get("name", "").startswith(workload)
    ]
    return [script(c) for _, c in containers(objs)]


def test_the_example_stages_imports_trains_and_exports_the_pinned_revision() -> None:
    scripts = "\n".join(_scripts("p5en-megatron-bridge", "qwen3-sft"))
    rev = BRIDGE["recipes"]["qwen3_8b_sft_config"]["hf_revision"]
    assert rev == QWEN3.revision
    (download,) = [w for w in invocations(scripts, "hf") if w[:1] == ["download"]]
    assert download[:4] == ["download", "Qwen/Qwen3-8B", "--revision", rev]
    conversions = invocations(scripts, bridge.RUN_CONVERSION)
    assert sorted(w[0] for w in conversions) == ["export", "import"]
    for words in conversions:  # the staged snapshot of that revision (a revision would be resolved online)
        assert "--hf-revision" not in words and words[words.index("--hf-model") + 1].endswith(f"/snapshots/{rev}")
    (train,) = invocations(scripts, bridge.RUN_RECIPE)
    assert train[train.index("--recipe") + 1] == "qwen3_8b_sft_config"


def test_the_llama_runs_render_as_before() -> None:
    """Llama's recipes read `main`: nothing to add to the conversion worker's call."""
    scripts = "\n".join(_scripts("p5en-megatron-bridge", "sft-"))
    assert "--hf-revision" not in scripts and " --revision main " in scripts


@pytest.mark.parametrize(
    ("run", "line"),
    [
        (
            {**SFT, "hfRevision": "main"},
            f"workloads.w.hfRevision: main is not the revision the qwen3_8b_sft_config recipe reads Qwen/Qwen3-8B at"
            f" ({QWEN3.revision})",
        ),
        (
            {"hfRevision": "refs/pr/1"},
            "workloads.w.hfRevision: refs/pr/1 is not the revision the llama31_8b_pretrain_config recipe reads",
        ),
    ],
)
def test_a_revision_the_recipe_does_not_read_is_refused(run: dict[str, Any], line: str, tmp_path: Path) -> None:
    code, err = plan_exit(_stack(run), tmp_path)
    assert code == 2 and "Traceback" not in err, err
    assert any(x.startswith(line) for x in err.splitlines()), err


def test_the_pinned_revision_may_be_named(tmp_path: Path) -> None:
    assert plan_exit(_stack({**SFT, "hfRevision": QWEN3.revision}), tmp_path) == (0, "")


def test_no_published_figure_applies_so_the_step_time_is_unknown(tmp_path: Path) -> None:
    for itype in bridge.SYSTEM_OF_INSTANCE:
        assert published_row(QWEN_RUN, itype) is None
    (cost,) = [r for r in stack_plan("p5en-megatron-bridge")["cost"]["trainingRuns"] if r["name"] == "qwen3-sft"]
    assert cost["total"] is None and "no published step time applies" in cost["stepTimeBasis"]
