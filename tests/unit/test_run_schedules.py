"""Every training recipe's learning-rate schedule over the run's own steps, held to what its
script does at the pinned version, and every run's length with what else runs on its nodes:

- neuronx-distributed v2.28.0 tp_zero1_llama_hf_pretrain.py and aws-neuron-samples v2.27.0
  dp_bert_large_hf_pretrain_hdf5.py: transformers' get_linear_schedule_with_warmup over --max_steps
  (tests/upstream/neuronx-distributed-v2.28.0.yaml, dp-bert-hf-pretrain-v2.27.0.yaml lr_schedule);
- TorchTitan (pytorch/torchtitan cfd67d39..c537bca6, the range the Neuron fork can be based on):
  LRSchedulersContainer.Config, its fields and build() (tests/upstream/torchtitan-config-cli.yaml);
- NeMo's CosineAnnealing (WarmupAnnealHoldPolicy) for the Megatron recipes (nemo-gpu, llama2-neuron).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import config
from config import costs
from estimates import cost
from estimates.run_length import RunLength, Validation
from tests import upstream
from tests.conftest import plan_exit, stack_values
from workloads.manifests import torchtitan_neuron

TITAN = upstream.facts("torchtitan-config-cli")


def _cfg(stack: str, edit: dict[str, Any] | None = None) -> Any:
    values = json.loads(json.dumps(stack_values(stack)))
    for name, run in (edit or {}).items():
        values["llm-training-eks:workloads"][name].update(run)
    return config.parse(config.from_stack_values(values))


def _flags(words: list[str], prefix: str) -> dict[str, str]:
    return dict(w[2:].split("=", 1) for w in words if w.startswith(f"--{prefix}"))


@pytest.mark.parametrize(
    ("facts", "stack", "name"),
    [("neuronx-distributed-v2.28.0", "trn1-llama3", "llama3"), ("dp-bert-hf-pretrain-v2.27.0", "trn1-bert", "bert")],
)
def test_the_neuron_scripts_decay_linearly_to_zero_at_the_last_step(facts: str, stack: str, name: str) -> None:
    rule = upstream.facts(facts)["lr_schedule"]
    assert rule["function"].endswith("get_linear_schedule_with_warmup") and rule["floor"] == 0
    assert (rule["num_warmup_steps"], rule["num_training_steps"]) == ("--warmup_steps", "--max_steps")
    cfg = _cfg(stack)
    (run_name,) = [n for n, r in cfg.workloads.items() if r.recipe in ("llama3-nxd", "bert-neuron")][:1]
    run = cfg.workloads[run_name]
    s = run.lr_schedule
    assert (s.warmup_steps, s.decay_end, s.min_lr_ratio, s.style) == (
        run.training.warmup_steps,
        run.training.max_steps,
        0.0,
        "linear",
    )
    assert s.line().startswith(f"warm-up {s.warmup_steps:,} steps, linear decay to step {s.decay_end:,}, min lr 0%")


def titan_schedule(words: list[str], steps: int) -> dict[str, Any]:
    """What TorchTitan's build() trains with: its defaults, the rendered --lr_scheduler flags over
    them, a warm-up past total_steps cut, decay over round(total x decay_ratio) or every later step."""
    v: dict[str, Any] = dict(TITAN["lr_scheduler_defaults"])
    for key, value in _flags(words, "lr_scheduler.").items():
        v[key.split(".", 1)[1]] = value
    total = int(v["total_steps"]) if v["total_steps"] is not None else steps
    warmup = min(int(v["warmup_steps"]), total)
    ratio = v["decay_ratio"]
    decay = total - warmup if ratio is None else min(round(total * float(ratio)), total - warmup)
    return {"warmup": warmup, "decay_start": total - decay, "end": total, "type": v["decay_type"]}


def test_torchtitan_renders_every_scheduler_key_sized_to_the_run() -> None:
    """The fork's config function sets its scheduler for its own run; a run that renders none keeps
    it. Every LRSchedulersContainer.Config field is a command-line field at both ends of the range."""
    fields = set(TITAN["lr_scheduler_defaults"])
    for end in ("lower", "upper"):
        assert set(TITAN[end]["sections"]["lr_scheduler"]) == fields
    cfg = _cfg("trn2-torchtitan")
    (name, run), *_ = [(n, r) for n, r in cfg.workloads.items() if r.recipe == "torchtitan-neuron"]
    words = torchtitan_neuron.train_args(name, run, SimpleNamespace(shared_mount="/shared"))  # type: ignore[arg-type]
    assert set(_flags(words, "lr_scheduler.")) == {f"lr_scheduler.{f}" for f in fields}
    got = titan_schedule(words, run.training.max_steps)
    s = run.lr_schedule
    assert got == {
        "warmup": s.warmup_steps,
        "decay_start": s.warmup_steps,
        "end": run.training.max_steps,
        "type": "linear",
    }
    assert s.warmup_steps == round(run.training.max_steps * 200 / TITAN["training_steps_default"])


@pytest.mark.parametrize(
    ("stack", "run", "line"),
    [
        (
            "trn2-torchtitan",
            {"schedule": {"warmupSteps": 1000}},
            "schedule.warmupSteps: warm-up 1,000 steps reaches step 1,000",
        ),
        ("trn2-torchtitan", {"schedule": {"decaySteps": 300}}, "schedule.decaySteps: decay ends at step 300 of 1,000"),
        (
            "p4de-nemo",
            {"training": {"maxSteps": 1000, "warmupSteps": 100, "constantSteps": 500}},
            "training.constantSteps: 500 of maxSteps 1000 train at minLearningRate",
        ),
    ],
)
def test_a_schedule_that_cannot_fit_is_refused_naming_the_key(
    stack: str, run: dict[str, Any], line: str, tmp_path: Path
) -> None:
    values = json.loads(json.dumps(stack_values(stack)))
    runs = values["llm-training-eks:workloads"]
    name = next(n for n, r in runs.items() if r["recipe"] in ("torchtitan-neuron", "nemo-gpu"))
    for key, value in run.items():
        runs[name][key] = {**runs[name].get(key, {}), **value}
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and "Traceback" not in err
    assert any(x.startswith(f"workloads.{name}.{line}") for x in err.splitlines()), err


def test_the_megatron_recipes_hold_the_floor_for_constant_steps() -> None:
    cfg = _cfg("p4de-nemo")
    (run,) = [r for r in cfg.workloads.values() if r.recipe == "nemo-gpu"]
    s = run.lr_schedule
    t = run.training
    assert (s.warmup_steps, s.decay_end, s.style) == (t.warmup_steps, t.max_steps - t.constant_steps, "cosine")
    assert s.min_lr_ratio == pytest.approx(t.min_learning_rate / t.learning_rate)
    assert run.run_length.validation.passes(t.max_steps) == 1  # val_check_interval = max_steps, once at the end


def test_validation_import_and_export_are_in_the_cost() -> None:
    """Bridge's SFT recipes validate every 30 steps for 32 iterations: 1,088 forward iterations over
    1,000 steps, about a third of a step each (+36%), on the run's nodes, so in its cost; so are the
    import of the Hugging Face weights before the first step and the export after the last."""
    cfg = _cfg("p5en-megatron-bridge", {"qwen3-sft": {"stepSeconds": 5.0, "checkpoints": {"saveInterval": 500}}})
    bill = next(b for b in costs.run_bills(cfg) if b.name == "qwen3-sft")
    entry = cost.run_cost(bill, cfg.region, cost.Prices())
    length = cfg.workloads["qwen3-sft"].run_length
    export = length.export_seconds(cfg.storage.file_system.mb_per_second)
    imported = length.import_seconds(cfg.storage.file_system.mb_per_second)
    assert export > 0 and imported == export  # SFT imports the weights it later exports: the same bytes
    assert entry["hours"] == pytest.approx((1000 + 1088 / 3) * 5.0 / 3600 + (export + imported) / 3600, abs=1e-4)
    assert entry["besidesSeconds"] == round(1088 / 3 * 5.0 + export + imported)


def test_a_length_counts_passes_as_the_loop_does() -> None:
    v = Validation(30, 32)
    assert [v.passes(n) for n in (29, 30, 31, 60, 1000)] == [1, 1, 2, 2, 34]
    assert RunLength(1000, Validation(None, 4)).validation_steps == pytest.approx(4 / 3)
    assert RunLength(10).line(None, None) == "10 steps, no validation"
