"""The plan's modeled throughput: step time from the recipe's published sample, tokens/s, and the
MFU it implies (Megatron Core's FLOPs per token) against the dense BF16 peak of the Neuron architecture pages
(tests/upstream/neuron-architecture-v2.32.0.yaml, tests/upstream/neuron-sdk-2.28-2.33.yaml)."""

from __future__ import annotations

import pytest

import config
from config.workloads.llama3_nxd import MODEL_PARAMETERS
from estimates import throughput
from estimates.flops import flops_per_token
from facts.megatron_bridge import ModelShape
from facts.peak_flops import PEAK_BF16
from tests import upstream
from tests.conftest import stack_plan, stack_values
from tools.offline.plan_table import render_table

ARCH = upstream.facts("neuron-architecture-v2.32.0")
SAMPLE = upstream.facts("neuron-sdk-2.28-2.33")["trn1_llama31_8b_sample"]


def test_peaks_are_the_architecture_pages() -> None:
    for name, peak in PEAK_BF16.items():
        facts = ARCH[name]
        tflops = facts.get("bf16_tflops") or facts["bf16_pflops"] * 1000
        assert peak.tflops == pytest.approx(tflops), name


def _llama3(nodes: int) -> config.StackConfig:
    values = stack_values("trn1-llama3")
    values["llm-training-eks:workloads"]["llama3"]["nodes"] = nodes
    # 32 nodes step 8x faster: checkpoints kept under 2% of the time need a longer interval.
    values["llm-training-eks:workloads"]["llama3"]["training"] = {"checkpointEverySteps": 1000}
    values["llm-training-eks:nodeGroups"][0]["desiredSize"] = nodes
    return config.parse_stack_values(values)


def test_the_published_sample_is_reproduced_at_its_own_size() -> None:
    """At the sample's 32 nodes and global batch, the estimate is the sample: 47.95 sequences/s."""
    run = _llama3(SAMPLE["nodes"]).workloads["llama3"]
    step, _ = run.step_estimate("trn1.32xlarge")  # type: ignore[misc]
    assert SAMPLE["global_batch"] / step == pytest.approx(SAMPLE["seq_per_second"])
    plan = throughput.plan(run.work("trn1.32xlarge"), "trn1.32xlarge", step, "estimated")
    assert plan["tokensPerSecond"] == round(SAMPLE["seq_per_second"] * SAMPLE["sequence"])
    # Megatron Core's model FLOPs (estimates/flops.py; tests/unit/test_flops.py holds the formula).
    flops = flops_per_token(ModelShape(32, 4096, 14336, 32, 8, 128256), SAMPLE["sequence"])
    mfu = flops * SAMPLE["seq_per_second"] * SAMPLE["sequence"] / (ARCH["trn1.32xlarge"]["bf16_tflops"] * 1e12 * 32)
    assert plan["mfu"] == pytest.approx(mfu, abs=1e-4)
    assert 0.2 < mfu < 0.25  # a sanity bound: Llama 3 8B on trn1 in the sample's shape


def test_llama3_8b_has_8_billion_parameters() -> None:
    assert 8.0e9 < MODEL_PARAMETERS < 8.1e9


def test_unknown_is_left_out_and_said() -> None:
    run = config.parse_stack_values(stack_values("trn2-torchtitan")).workloads["titan"]
    plan = throughput.plan(
        run.work("trn2.48xlarge"), "trn2.48xlarge", None, "unknown: set workloads.<name>.stepSeconds"
    )
    assert "stepSeconds" not in plan and "mfu" not in plan and plan["support"] == "beta"


@pytest.mark.parametrize(
    ("stack", "line"),
    [
        ("trn1-llama3", "MFU 20.8%"),
        ("trn1-llama3", "support: maintenance"),
        ("trn2-torchtitan", "throughput: unknown"),
        ("trn2-torchtitan", "support: beta"),
        ("trn1-llama2", "support: end of support"),
    ],
)
def test_the_plan_table_shows_throughput_and_support(stack: str, line: str) -> None:
    assert line in render_table(stack_plan(stack))


@pytest.mark.parametrize("stack", ["p5en-megatron-bridge", "trn1-llama3", "trn2-torchtitan", "p4de-nemo", "trn1-bert"])
def test_every_recipe_goes_through_one_throughput_line(stack: str) -> None:
    """One shape for every recipe (estimates/throughput.py): the step time's basis, the
    recipe's support status and what it reads at start and on a restart; the table renders each run's the same
    way, a Bridge run's published MFU and a Trainium run's model MFU alike."""
    plan = stack_plan(stack)
    runs = [r for r in plan["resources"] if r["type"].endswith(":Workload")]
    assert runs
    for run in runs:
        t = run["inputs"]["throughput"]
        assert t["stepTimeBasis"] and t["support"], run["name"]
        # the pulls and the compile are the startup plan's (estimates/startup.py), once per run
        assert run["inputs"]["startup"]["compileBasis"], run["name"]
        if "checkpoints" in run["inputs"]:
            # a restart reads one checkpoint back at the throughput it was written at
            assert 0 < t["loads"]["resumeLoadSeconds"] <= run["inputs"]["checkpoints"]["writeSeconds"], run["name"]
    table = render_table(plan)
    assert table.count("throughput: ") == table.count("    support: ") == table.count("first step: image") == len(runs)
