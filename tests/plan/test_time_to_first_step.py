"""Time to a run's first step, and Kueue's patience for it.

The image is on every node of a run's group before the run (the image check Job, one pod per
node), so Kueue's pods-ready timeout, counted from the MPIJob's admission until every pod is
ready, waits only for the launcher's pull on a system node; the plan of every example stack
with a training run says how long each part takes from published figures
(tests/upstream/time-to-first-step.yaml), and the config refuses a timeout shorter than the
launcher's pull of the largest image a system node can hold.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import config
from config import ConfigError, checks
from config.workloads import BertNeuronWorkload, Llama2NeuronWorkload
from estimates import startup
from tests import upstream
from tests.conftest import ALL_IN_ONE_STACKS, stack_plan, stack_values
from tools import plan as plan_mod
from tools.offline.plan_table import render_table

FACTS = upstream.facts("time-to-first-step")
WORKLOAD = "llm-training-eks:workloads:Workload"


def test_the_model_uses_the_published_figures() -> None:
    assert (FACTS["ecr_pull"]["gb"], FACTS["ecr_pull"]["seconds"]) == (startup.PULL_GB, startup.PULL_SECONDS)
    assert Llama2NeuronWorkload.COMPILE.miss_minutes == FACTS["llama2_neuron_precompile_minutes"]
    assert BertNeuronWorkload.COMPILE.miss_minutes == FACTS["bert_large_precompile_minutes"]


def _runs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs with a first step (a server has none), as their components say."""
    return [r for r in plan["resources"] if r["type"].endswith(":Workload") and r["inputs"]["kind"] != "serving"]


@pytest.mark.parametrize("stack", [s for s in ALL_IN_ONE_STACKS if _runs(stack_plan(s))])
def test_every_run_prints_its_time_to_first_step_and_kueue_covers_it(stack: str) -> None:
    plan = stack_plan(stack)
    table = render_table(plan)
    runs = _runs(plan)
    assert table.count("first step: image ~") == len(runs), f"{stack}: a run without its time to first step"
    cfg = config.parse(config.from_stack_values(stack_values(stack)))
    system = cfg.system_node_group
    covered = startup.covered_image_gb(cfg.queueing.pods_ready_timeout_minutes, system.instance, prepulled=True)
    # The timeout covers a launcher pull of the largest image a system node holds.
    assert covered * 1e9 >= system.root_volume_size_gib * 1024**3, (stack, covered)


def _image_checks(stack: str) -> list[dict[str, Any]]:
    objects = plan_mod.kubernetes_objects(stack_plan(stack))
    return [o for o in objects if o["kind"] == "Job" and "-image-" in o["metadata"]["name"]]


@pytest.mark.parametrize("stack", [s for s in ALL_IN_ONE_STACKS if _image_checks(s)])
def test_the_image_check_pulls_the_image_onto_every_node_of_the_group(stack: str) -> None:
    cfg = config.parse(config.from_stack_values(stack_values(stack)))
    sizes = {g.name: g.desired_size for g in cfg.node_groups}
    sizes.setdefault("system", cfg.system_node_group.desired_size)
    for job in _image_checks(stack):
        spec = job["spec"]
        group = spec["template"]["spec"]["nodeSelector"]
        (name,) = group.values()
        assert spec.get("parallelism") == spec.get("completions") == sizes[name], job["metadata"]["name"]
        (term,) = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_a_timeout_shorter_than_the_launchers_pull_is_refused() -> None:
    values = copy.deepcopy(stack_values("trn1-llama2"))
    cfg = config.parse(config.from_stack_values(values))
    need = startup.minimum_timeout_minutes(cfg.system_node_group.root_volume_size_gib, cfg.system_node_group.instance)
    values["llm-training-eks:queueing"] = {"podsReadyTimeoutMinutes": need - 1}
    with pytest.raises(ConfigError) as refused:
        config.parse(config.from_stack_values(values))
    (problem,) = [p for p in str(refused.value).splitlines() if p.startswith("queueing.podsReadyTimeoutMinutes")]
    assert f"{need - 1} min does not cover" in problem and f"use {need} or more" in problem
    values["llm-training-eks:queueing"] = {"podsReadyTimeoutMinutes": need}
    cfg = config.parse(config.from_stack_values(values))
    assert not [p for p in checks.config_problems(cfg) if p.startswith("queueing.podsReadyTimeoutMinutes")]
