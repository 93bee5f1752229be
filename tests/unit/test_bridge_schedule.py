"""The megatron-bridge recipe's learning-rate schedule and validation over the run's own steps.

The library recipes' schedules are Megatron Bridge 0.6.0's (c9325115; tests/upstream/megatron-bridge-0.6.0.yaml
schedule_bases, schedule_sets, schedule_rules) and the learning rate each step gets is Megatron Core
core_r0.19.0's (megatron/core/optimizer_param_scheduler.py `get_lr`; tests/upstream/megatron-lm-core_r0.19.0.yaml
lr_scheduler). The tests replay what a launch does: the library recipe's values, then the run's
rendered overrides over them (Hydra, as run_recipe.py applies them), then ConfigContainer.validate's
defaults, then the learning rate at every step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import config
from facts import megatron_bridge as bridge
from tests import upstream
from tests.conftest import plan_exit, stack_values
from tests.unit.test_megatron_bridge import _stack
from tests.upstream.arguments import bridge_overrides_apply
from workloads.manifests.megatron_bridge import recipe_overrides

BRIDGE = upstream.facts("megatron-bridge-0.6.0")
MCORE = upstream.facts("megatron-lm-core_r0.19.0")
KEYS = (
    "scheduler.lr_warmup_iters",
    "scheduler.lr_decay_iters",
    "optimizer.lr",
    "optimizer.min_lr",
    "validation.eval_interval",
    "validation.eval_iters",
)


def library_values(recipe: str) -> dict[str, Any]:
    """What the library recipe sets, its function's assignments over its base's (as recorded upstream)."""
    name = {"qwen3_8b_pretrain_config": "_pretrain_common"}.get(recipe) or BRIDGE["recipes"][recipe]["base"]
    return {**BRIDGE["schedule_bases"][name], **BRIDGE["schedule_sets"][recipe]}


def launched(run: Any) -> dict[str, Any]:
    """The schedule a launch of `run` trains with: the library recipe's values, the run's rendered
    overrides over them, then ConfigContainer.validate (decay None: train_iters; a warm-up at or
    past the decay capped below it)."""
    overrides = recipe_overrides("w", run, SimpleNamespace(shared_mount="/shared"))  # type: ignore[arg-type]
    values = library_values(run.library_recipe.name)
    for word in overrides:
        key, value = word.split("=", 1)
        if key in (*KEYS, "train.train_iters"):
            values[key] = float(value) if "." in value or "e" in value else int(value)
    assert BRIDGE["schedule_rules"]["decay_default"] == "train.train_iters"
    if values["scheduler.lr_decay_iters"] is None:
        values["scheduler.lr_decay_iters"] = values["train.train_iters"]
    decay = values["scheduler.lr_decay_iters"]
    values["scheduler.lr_warmup_iters"] = min(values["scheduler.lr_warmup_iters"], decay - 1)
    return values


def lr_at(step: int, v: dict[str, Any]) -> float:
    """Megatron Core's get_lr (cosine): linear warm-up, cosine to min_lr at the decay's end, min_lr after."""
    assert MCORE["lr_scheduler"]["past_decay"] == "min_lr"
    lr, floor = v["optimizer.lr"], v["optimizer.min_lr"]
    warmup, decay = v["scheduler.lr_warmup_iters"], v["scheduler.lr_decay_iters"]
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    if step > decay:
        return floor
    ratio = (step - warmup) / (decay - warmup)
    return floor + (lr - floor) * 0.5 * (math.cos(math.pi * ratio) + 1.0)


def _run(name: str) -> Any:
    cfg = config.parse(config.from_stack_values(json.loads(json.dumps(stack_values("p5en-megatron-bridge")))))
    return cfg.workloads[name]


@pytest.mark.parametrize(
    "recipe", sorted({m.recipe(mode).name for m in bridge.MODELS.values() for mode in ("pretrain", "sft")})
)
def test_each_library_schedule_is_what_upstream_sets(recipe: str) -> None:
    """facts/megatron_bridge.py's RecipeSchedule of each library recipe, against its source."""
    (r,) = (
        m.recipe(mode) for m in bridge.MODELS.values() for mode in ("pretrain", "sft") if m.recipe(mode).name == recipe
    )  # type: ignore[arg-type]
    v = library_values(recipe)
    assert (r.schedule.warmup_iters, r.schedule.decay_iters, r.schedule.train_iters) == (
        v["scheduler.lr_warmup_iters"],
        v["scheduler.lr_decay_iters"],
        v["train.train_iters"],
    )
    assert (r.schedule.lr, r.schedule.min_lr) == (v["optimizer.lr"], v["optimizer.min_lr"])
    assert (r.schedule.eval_interval, r.schedule.eval_iters) == (
        v["validation.eval_interval"],
        v["validation.eval_iters"],
    )


def test_the_qwen3_sft_example_trains_every_step() -> None:
    """Qwen3 SFT's recipe decays over 100 steps to min_lr 0: with only train_iters overridden, steps
    101-1,000 of the 1,000-step example would train at a learning rate of 0."""
    run = _run("qwen3-sft")
    v = launched(run)
    steps = v["train.train_iters"]
    assert steps == 1000
    idle = [s for s in range(1, steps) if lr_at(s, v) == 0.0]  # the last step ends the decay, at the floor
    assert idle == [], f"{len(idle)} of {steps} steps train at lr 0 (decay ends at {v['scheduler.lr_decay_iters']})"
    assert v["scheduler.lr_decay_iters"] == steps and v["scheduler.lr_warmup_iters"] == 100  # 10% as the recipe's
    assert run.lr_schedule.line().startswith("warm-up 100 steps, cosine decay to step 1,000, min lr 0%")


def test_the_llama_pretrain_example_is_not_all_warm_up() -> None:
    """Llama 3.1 pretrain warms up for 2,000 steps: two thirds of the 3,000-step example."""
    v = launched(_run("pretrain"))
    assert v["scheduler.lr_warmup_iters"] < 0.1 * v["train.train_iters"]
    peak = max(range(1, v["train.train_iters"] + 1), key=lambda s: lr_at(s, v))
    assert peak < 0.1 * v["train.train_iters"]
    assert v["optimizer.min_lr"] == pytest.approx(0.1 * v["optimizer.lr"])


@pytest.mark.parametrize("name", ["pretrain", "sft", "qwen3-sft"])
def test_every_example_run_decays_to_its_last_step_and_hydra_takes_the_keys(name: str) -> None:
    run = _run(name)
    v = launched(run)
    assert v["scheduler.lr_decay_iters"] == v["train.train_iters"] == run.training.train_iters
    assert lr_at(v["train.train_iters"], v) == pytest.approx(v["optimizer.min_lr"])
    overrides = recipe_overrides("w", run, SimpleNamespace(shared_mount="/shared"))  # type: ignore[arg-type]
    bridge_overrides_apply("local-jsonl" if run.mode == "sft" else "mock", overrides)


@pytest.mark.parametrize(
    ("schedule", "line"),
    [
        ({"warmupSteps": 1000}, "workloads.w.schedule.warmupSteps: warm-up 1,000 steps reaches step 1,000"),
        ({"warmupFraction": 0.5, "decaySteps": 100}, "workloads.w.schedule.decaySteps: decay ends at step 100"),
        ({"decaySteps": 500}, "workloads.w.schedule.decaySteps: decay ends at step 500 of 1,000: the last 500"),
        ({"warmupSteps": 10, "warmupFraction": 0.1}, "workloads.w.schedule.warmupFraction: set warmupSteps or"),
        ({"minLrRatio": 2}, "workloads.w.schedule.minLrRatio: Input should be less than or equal to 1"),
    ],
)
def test_a_schedule_that_cannot_fit_is_refused_naming_the_key(
    schedule: dict[str, Any], line: str, tmp_path: Path
) -> None:
    code, err = plan_exit(_stack({"training": {"trainIters": 1000}, "schedule": schedule}), tmp_path)
    assert code == 2 and "Traceback" not in err
    assert any(x.startswith(line) for x in err.splitlines()), err


def test_keys_set_the_schedule_and_a_longer_decay_is_the_start_of_a_longer_run() -> None:
    run = _run("sft").model_copy(
        update={"schedule": config.workloads.schedule.ScheduleConfig(warmupSteps=20, decaySteps=4000, minLrRatio=0.1)}
    )
    v = launched(run)
    assert (v["scheduler.lr_warmup_iters"], v["scheduler.lr_decay_iters"]) == (20, 4000)
    assert v["optimizer.min_lr"] == pytest.approx(0.1 * v["optimizer.lr"])
    assert lr_at(1000, v) > 0.5 * v["optimizer.lr"]


def test_validation_is_in_the_runs_length() -> None:
    """Bridge's SFT recipes validate every 30 steps for 32 iterations, and once after the last step."""
    assert "step % validation.eval_interval == 0" in BRIDGE["schedule_rules"]["validation_when"]
    length = _run("qwen3-sft").run_length
    assert length.validation is not None
    assert (length.validation.passes(1000), length.validation.iterations(1000)) == (34, 1088)
    assert length.validation_share == pytest.approx(1088 / 3 / 1000)
    assert "+36% of the steps' time" in length.line(None, None)
