"""Throughput and MFU that compare like with like: one FLOP-per-token formula
for every recipe, Megatron Core's at core_r0.19.0 (tests/upstream/megatron-core-flops-r0.19.0.yaml,
NVIDIA/Megatron-LM 16ad357e megatron/training/training.py:549-845), which reproduces NVIDIA's
published Megatron Bridge model TFLOP/s (tests/upstream/megatron-bridge-performance.yaml, Bridge
0.6.0 c9325115); MFU against the dense peak of the precision the run uses
(tests/upstream/gpu-peak-flops-2026-11.yaml, tests/upstream/neuron-architecture-v2.32.0.yaml); and
the plan says how the published setup differs from the run's."""

from __future__ import annotations

import pytest

import config
from config.workloads.llama3_nxd import FFN, HEADS, HIDDEN, KV_HEADS, LAYERS, MODEL_PARAMETERS, SEQ_LENGTH, VOCAB
from estimates import throughput
from estimates.flops import flops_per_token
from facts import megatron_bridge as bridge
from facts import peak_flops
from tests import upstream
from tests.conftest import stack_plan, stack_values
from tests.unit.test_trainium_recipes import _with
from tools.offline.plan_table import render_table

FORMULA = upstream.facts("megatron-core-flops-r0.19.0")
GPU = upstream.facts("gpu-peak-flops-2026-11")
ARCH = upstream.facts("neuron-architecture-v2.32.0")


def _flops(model: str, seq: int) -> float:
    return flops_per_token(bridge.MODELS[model].shape, seq)


def _run(stack: str, name: str) -> dict[str, object]:
    (run,) = [r for r in stack_plan(stack)["resources"] if r["type"].endswith(":Workload") and r["name"] == name]
    return run["inputs"]["throughput"]  # type: ignore[no-any-return]


def test_the_formula_is_megatron_cores_terms() -> None:
    """One layer by hand from the recorded terms: 3 x 2 x (projections + causal core + SwiGLU MLP), plus logits."""
    f = FORMULA["forward_backward_expansion_factor"] * FORMULA["fma_expansion_factor"]
    h, q, kv, ffn, s, v = 4096, 4096, 1024, 14336, 8192, 128256
    by_hand = f * ((h * (q + 2 * kv) + q * h) + q * s + h * ffn * FORMULA["ffn_expansion_factor"]["swiglu"]) + f * h * v
    assert flops_per_token(bridge.ModelShape(1, h, ffn, 32, 8, v), s) == by_hand
    assert FORMULA["causal_half"] and not FORMULA["embedding_counted"]


@pytest.mark.parametrize("row", bridge.PUBLISHED, ids=lambda r: f"{r.model}-{r.mode}-{r.system}")
def test_the_formula_reproduces_nvidias_published_model_tflops(row: bridge.PublishedRun) -> None:
    """tokens/s/GPU x FLOPs per token = the row's model TFLOP/s/GPU: 743.8 for 744, 1576.2 for 1576,
    709.4 for 710; 747.5 for 731 (the 70B pre-training row is 2.3% off in NVIDIA's own figures)."""
    tflops = _flops(row.model, row.seq_length) * row.tokens_per_second_per_gpu / 1e12
    assert tflops == pytest.approx(row.model_tflops_per_gpu, rel=0.025)


def test_every_recipe_counts_the_same_work_for_the_same_model() -> None:
    """Llama 3 8B at 8192 tokens: the NxD recipe and the Bridge recipe count the same 51.47 GFLOP per
    token; PaLM's 6N + 12 L h s, the NxD recipe's formula before, counts 18.6% more."""
    nxd = flops_per_token(bridge.ModelShape(LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB), SEQ_LENGTH)
    assert nxd == _flops("llama31_8b", 8192) == pytest.approx(51.47e9, rel=1e-3)
    palm = 6 * MODEL_PARAMETERS + 12 * LAYERS * HIDDEN * SEQ_LENGTH
    assert palm / nxd == pytest.approx(1.186, abs=1e-3)


def test_the_peaks_are_the_pages() -> None:
    """Per GPU: H100 SXM5 (and H200, the same GPU) and B200 HGX, dense BF16 and FP8; per Trainium node:
    trn2 20.8 dense FP8 PFLOPS; trn1's page has one FP8/FP16/BF16/TF32 row (trn1-arch.rst:33)."""
    assert peak_flops.GPU_PEAK_TFLOPS["H100"] == {
        "bf16": GPU["H100_SXM5_bf16_dense"],
        "fp8": GPU["H100_SXM5_fp8_dense"],
    }
    assert peak_flops.GPU_PEAK_TFLOPS["H200"] == peak_flops.GPU_PEAK_TFLOPS["H100"]
    b200 = {"bf16": GPU["B200_HGX_1000W_bf16_dense"], "fp8": GPU["B200_HGX_1000W_fp8_dense"]}
    assert peak_flops.GPU_PEAK_TFLOPS["B200"] == b200
    for name, p in peak_flops.PEAK_FP8.items():
        facts = ARCH[name]
        fp8 = facts["fp8_pflops"] * 1000 if "fp8_pflops" in facts else facts["bf16_tflops"]
        assert p.tflops == pytest.approx(fp8), name
    assert ARCH["trn1_fp8_is_bf16_row"]
    p5en = peak_flops.peak("p5en.48xlarge", "fp8")
    assert p5en is not None and p5en.tflops == pytest.approx(8 * GPU["H100_SXM5_fp8_dense"])
    assert peak_flops.peak("p6-b300.48xlarge", "bf16") is None and peak_flops.peak("p4de.24xlarge", "bf16") is None


def test_an_fp8_run_is_measured_against_the_fp8_peak() -> None:
    """The p5en FP8 pre-training: 744 model TFLOP/s/GPU is 37.6% of the dense FP8 peak, not 75.2%
    (it was against the BF16 peak)."""
    t = _run("p5en-megatron-bridge", "pretrain")
    expected = _flops("llama31_8b", 8192) * 14451 / (GPU["H100_SXM5_fp8_dense"] * 1e12)
    assert t["mfu"] == pytest.approx(expected, abs=1e-4) and 0.37 < expected < 0.38
    assert "dense FP8 peak" in str(t["mfuBasis"]) and "Megatron Core 0.19.0" in str(t["mfuBasis"])


def test_the_plan_says_how_the_published_row_differs_from_the_run() -> None:
    """NVIDIA's row: one DGX-H100 node, FSDP 8, the tuned performance recipe; the run: 2 p5en nodes
    over EFA, no FSDP, the library recipe."""
    published = str(_run("p5en-megatron-bridge", "pretrain")["published"])
    assert "TP1 PP1 CP1 FSDP8" in published  # what was measured
    for differs in ("H200", "2 nodes over EFA, not 1", "no FSDP", "library recipe llama31_8b_pretrain_config"):
        assert differs in published.split("this run differs:")[1], differs


def test_the_neuron_sample_says_how_the_run_differs() -> None:
    t = _run("trn1-llama3", "llama3")
    assert "32 trn1.32xlarge" in str(t["published"]) and "4 nodes, not 32" in str(t["published"])
    flops = flops_per_token(bridge.ModelShape(LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB), SEQ_LENGTH)
    assert t["mfu"] == pytest.approx(
        flops * t["tokensPerSecond"] / (4 * ARCH["trn1.32xlarge"]["bf16_tflops"] * 1e12), abs=1e-3
    )  # type: ignore[operator]


@pytest.mark.parametrize(
    "stack", ["p5en-megatron-bridge", "trn1-llama3", "trn1-llama2", "trn2-torchtitan", "p4de-nemo", "trn1-bert"]
)
def test_every_training_run_states_its_mfu_basis(stack: str) -> None:
    """The MFU with its formula and peak, or why there is none, on every training run's line."""
    plan = stack_plan(stack)
    runs = [r for r in plan["resources"] if r["type"].endswith(":Workload") and "throughput" in r["inputs"]]
    trains = [r for r in runs if r["inputs"]["throughput"]["stepTimeBasis"] != "it trains nothing"]
    assert trains
    for run in trains:
        assert run["inputs"]["throughput"]["mfuBasis"], run["name"]
    lines = [line for line in render_table(plan).splitlines() if "throughput:" in line]
    assert len(lines) == len(trains) and all("MFU" in line for line in lines), lines


def test_the_formula_is_read_at_the_megatron_core_the_image_ships() -> None:
    """Next release: a bump of the container's Megatron Core fails here until the formula is re-read."""
    source = upstream.load("megatron-core-flops-r0.19.0")["source"]
    assert source["commit"] == bridge.MCORE_COMMIT and source["ref"] == f"core_r{bridge.MCORE_VERSION}"


def test_scaling_a_run_keeps_its_mfu_and_says_its_new_setup() -> None:
    """Next change: the FP8 pre-training edited from 2 to 4 p5en nodes (the group with it). The
    estimate scales per GPU, so the step halves and the MFU stays; what differs from the published
    one-node row now says 4 nodes."""
    # twice the speed: checkpoints every 1000 steps would pass 2% of the time; 1500 is the edit's too
    values = _with("p5en-megatron-bridge", "pretrain", nodes=4, **{"checkpoints.saveInterval": 1500})
    values["llm-training-eks:nodeGroups"][0]["desiredSize"] = 4
    plans = []
    for stack in (stack_values("p5en-megatron-bridge"), values):
        run = config.parse_stack_values(stack).workloads["pretrain"]
        step = run.step_estimate("p5en.48xlarge")
        assert step is not None
        plans.append(throughput.plan(run.work("p5en.48xlarge"), "p5en.48xlarge", *step))
    before, after = plans
    assert after["stepSeconds"] == pytest.approx(before["stepSeconds"] / 2, abs=1e-3)  # type: ignore[operator]
    assert after["mfu"] == before["mfu"]
    assert "4 nodes over EFA, not 1" in str(after["published"]) and "2 nodes" not in str(after["published"])
