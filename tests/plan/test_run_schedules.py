"""The plan of every example stack shows each training run's learning-rate schedule and its length
with validation (estimates/schedule.py, estimates/run_length.py), one line each, apart from the
throughput line; and what the Neuron scripts are given is that schedule (--warmup_steps and
--max_steps of neuronx-distributed v2.28.0 tp_zero1_llama_hf_pretrain.py and aws-neuron-samples
v2.27.0 dp_bert_large_hf_pretrain_hdf5.py, whose linear decay ends at --max_steps)."""

from __future__ import annotations

import pytest

from facts.names import component_type
from tests.conftest import EXAMPLE_STACKS, stack_plan
from tools.offline.plan_table import render_table

WORKLOAD = component_type("workloads", "Workload")


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_training_run_shows_its_schedule_and_length(stack: str) -> None:
    plan = stack_plan(stack)
    runs = [r for r in plan["resources"] if r["type"] == WORKLOAD and r["inputs"].get("kind") == "training"]
    table = render_table(plan).splitlines()
    for run in runs:
        block = table[table.index(f"Training {run['name']}") :]
        block = block[: next((i for i, line in enumerate(block[1:], 1) if not line.startswith("    ")), len(block))]
        assert any(line.startswith("    schedule: ") for line in block), (run["name"], block)
        assert any(line.startswith("    length: ") for line in block), (run["name"], block)
        assert run["inputs"]["length"]["steps"] >= 1


@pytest.mark.parametrize(("stack", "recipe"), [("trn1-llama3", "llama3-nxd"), ("trn1-bert", "bert-neuron")])
def test_the_neuron_scripts_get_the_schedule_the_plan_shows(stack: str, recipe: str) -> None:
    plan = stack_plan(stack)
    runs = [r for r in plan["resources"] if r["type"] == WORKLOAD and r["inputs"].get("recipe") == recipe]
    assert runs
    text = " ".join(str(r["inputs"]) for r in plan["resources"] if r["type"].startswith("kubernetes:"))
    for run in runs:
        s = run["inputs"]["schedule"]
        assert f"--warmup_steps={s['warmupSteps']}" in text and f"--max_steps={s['decayEnd']}" in text
        assert s["style"] == "linear" and s["minLrRatio"] == 0
