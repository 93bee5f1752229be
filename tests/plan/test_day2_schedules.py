"""Day 2 on a training run's schedule: a run made longer (trainIters 1,000 -> 2,000 on the same
runId) restarts its training MPIJob, resumes from its latest checkpoint and decays over its new
length. Bridge's recipes resume with the config's schedule (override_opt_param_scheduler, Megatron
Bridge 0.6.0 recipes/utils/optimizer_utils.py; without it Megatron Core core_r0.19.0
OptimizerParamScheduler.load_state_dict asserts the checkpoint's decay equals the config's and every
rank fails at the resume): tests/upstream/megatron-bridge-0.6.0.yaml schedule_rules,
megatron-lm-core_r0.19.0.yaml lr_scheduler.on_load."""

from __future__ import annotations

import copy

from tests import upstream
from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
WORKLOAD = "llm-training-eks:workloads:Workload"


def _train(plan: dict, run: str) -> dict:
    (job,) = [r for r in plan["resources"] if r["type"] == MPIJOB and r["name"] == f"{run}-run-001-train"]
    return job


def _script(job: dict) -> str:
    return str(job["inputs"]["spec"])


def test_a_longer_run_resumes_with_the_schedule_of_its_new_length() -> None:
    assert upstream.facts("megatron-bridge-0.6.0")["schedule_rules"]["override_opt_param_scheduler"] is True
    assert upstream.facts("megatron-lm-core_r0.19.0")["lr_scheduler"]["on_load"]["neither"] == "assert equal"
    before = stack_plan("p5en-megatron-bridge")
    values = copy.deepcopy(stack_values("p5en-megatron-bridge"))
    values["llm-training-eks:workloads"]["qwen3-sft"]["training"]["trainIters"] = 2000
    after = run_plan(values, "p5en-megatron-bridge")
    old, new = _train(before, "qwen3-sft"), _train(after, "qwen3-sft")
    step = day2.diff(before, after).steps[new["urn"]]
    # The spec changes; workloads/deploy.py gives a training MPIJob replace_on_changes=["spec"] and
    # deleteBeforeReplace, so `pulumi up` restarts the run, one MPIJob at a time (day2.py reads the
    # deleteBeforeReplace the plan JSON carries; replaceOnChanges is not in the plan JSON yet).
    assert step.op in ("update", "replace") and all(p.startswith("spec") for p in step.changed), step
    assert new["deleteBeforeReplace"] is True
    assert "scheduler.lr_decay_iters=1000" in _script(old) and "scheduler.lr_decay_iters=2000" in _script(new)
    assert "scheduler.lr_warmup_iters=200" in _script(new)
    # the same checkpoint directory: the restart resumes where the run was, with the new schedule
    assert "checkpoint.load=/shared/runs/qwen3-sft/run-001/checkpoints" in _script(new).replace("\\\n", "")
    assert "override_opt_param_scheduler" not in _script(new)  # the recipe's True stands
    (component,) = [r for r in after["resources"] if r["type"] == WORKLOAD and r["name"] == "qwen3-sft"]
    assert component["inputs"]["schedule"]["decayEnd"] == 2000
    assert component["inputs"]["length"]["validationPasses"] == 2000 // 30 + 1
