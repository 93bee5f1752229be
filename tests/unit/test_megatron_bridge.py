"""The megatron-bridge recipe: what a stack may say (refused with exit 2 where Megatron Core or
Bridge would refuse it at start-up, naming the key), the checkpoint share rule, the modelled
throughput, and the seams of its pods (the Hub reached only by the staging Job, every rank
offline, the token mounted only where it is read)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra.errors import ConfigCompositionException

import config
from estimates.bridge import published_row, step_seconds
from facts import instances
from facts import megatron_bridge as bridge
from tests.conftest import plan_exit, stack_plan, stack_values
from tests.unit.test_recipes import built_with
from tests.upstream.arguments import bridge_overrides_apply, containers, invocations, script
from workloads.manifests.megatron_bridge import recipe_overrides

P5EN = {"name": "gpu", "instanceType": "p5en.48xlarge", "desiredSize": 4, "availabilityZone": "us-east-1a"}
RUN = {"recipe": "megatron-bridge", "nodeGroup": "gpu", "nodes": 2, "runId": "r1"}


def _stack(run: dict[str, Any], storage: dict[str, Any] | None = None, token: Any = None) -> dict[str, Any]:
    return {
        "aws:region": "us-east-1",
        "llm-training-eks:cluster": {"publicAccessCidrs": ["203.0.113.10/32"]},
        "llm-training-eks:network": {"availabilityZones": ["us-east-1a", "us-east-1b"]},
        "llm-training-eks:nodeGroups": [P5EN],
        "llm-training-eks:huggingFaceToken": token or {"secure": "PLACEHOLDER"},
        "llm-training-eks:storage": {"availabilityZone": "us-east-1a"}
        | (storage or {"storageCapacityGib": 2400, "throughputPerTib": 1000}),
        "llm-training-eks:workloads": {"w": {**RUN, **run}},
    }


@pytest.mark.parametrize(
    ("run", "line"),
    [
        (
            {"model": "llama31_70b", "parallelism": {"tensorParallel": 3}},
            "workloads.w.parallelism.tensorParallel: 3 must divide the 64 attention heads",
        ),
        (
            {"model": "llama31_70b", "mode": "sft", "data": {"source": "jsonl", "datasetRoot": "/shared/d"}},
            "workloads.w.nodes: 16 GPUs are not a multiple of TP x PP x CP = 32",
        ),
        (
            {"parallelism": {"pipelineParallel": 3}},
            "workloads.w.parallelism.pipelineParallel: 3 stages x 1",
        ),
        ({"training": {"globalBatchSize": 100}}, "workloads.w.training.globalBatchSize: 100 is not a multiple"),
        ({"training": {"seqLength": 4098}}, "workloads.w.training.seqLength: 4098 must be a multiple of 2 x"),
        ({"mode": "sft"}, "workloads.w.data.source: mock is not data for sft; use jsonl"),
        ({"data": {"source": "indexed"}}, "workloads.w.data.paths: indexed data needs at least one prefix"),
        ({"data": {"source": "indexed", "paths": ["/data/x"]}}, "workloads.w.data.paths: '/data/x' must be a path"),
        ({"overrides": {"+checkpoint.foo": "1"}}, "workloads.w.overrides: '+checkpoint.foo' is not a ConfigContainer"),
        ({"parallelism": {"tensorParallel": 16}}, "workloads.w.parallelism.tensorParallel: Input should be less"),
    ],
)
def test_what_megatron_would_refuse_is_refused_naming_the_key(run: dict[str, Any], line: str, tmp_path: Path) -> None:
    code, err = plan_exit(_stack(run), tmp_path)
    assert code == 2 and "Traceback" not in err
    assert any(x.startswith(line) for x in err.splitlines()), err


def test_a_gpu_the_images_nccl_has_no_kernels_for_is_refused(tmp_path: Path) -> None:
    p4de = {"name": "gpu", "instanceType": "p4de.24xlarge", "desiredSize": 4, "availabilityZone": "us-east-1a"}
    code, err = plan_exit({**_stack({}), "llm-training-eks:nodeGroups": [p4de]}, tmp_path)
    assert code == 2 and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("workloads.w.nodeGroup:")]
    assert "built for sm_90, sm_100, sm_103 only" in line and "A100 GPUs of p4de.24xlarge need sm_80" in line, line
    fit = line.split("use a node group of ")[1].split(", or name")[0].split(", ")
    assert sorted(fit) == sorted(
        t.name
        for t in instances.ACCELERATED.values()
        if bridge.GPU_SM.get(t.accelerator_name or "") in bridge.IMAGE_SM_TARGETS
    ), line


def test_a_run_whose_checkpoints_take_more_than_2_percent_is_refused_with_the_interval_that_fits(
    tmp_path: Path,
) -> None:
    run = {
        "precision": "fp8-cs",
        "parallelism": {"contextParallel": 1},
        "training": {"globalBatchSize": 128, "seqLength": 8192, "trainIters": 50000},
        "checkpoints": {"saveInterval": 100},
    }
    small = {"storageCapacityGib": 1200, "throughputPerTib": 125}
    code, err = plan_exit(_stack(run, small), tmp_path)
    assert code == 2, err
    (line,) = [x for x in err.splitlines() if x.startswith("workloads.w.checkpoints.saveInterval:")]
    assert "of training time to write" in line and "at most 2%" in line
    fits = int(line.split("use ")[1].split(" steps")[0])
    code, err = plan_exit(_stack({**run, "checkpoints": {"saveInterval": fits}}, small), tmp_path)
    assert code == 0, err
    code, err = plan_exit(_stack({**run, "checkpoints": {"saveInterval": fits - 1}}, small), tmp_path)
    assert code == 2, err


def test_an_interval_longer_than_the_run_still_writes_its_last_checkpoint(tmp_path: Path) -> None:
    """Bridge saves at the last step too: a run too short for even that one write within 2% is
    refused however long its interval, and the message says no interval fits (not one beyond the run)."""
    run = {"precision": "fp8-cs", "training": {"globalBatchSize": 128, "seqLength": 8192, "trainIters": 3000}}
    small = {"storageCapacityGib": 1200, "throughputPerTib": 250}
    for interval in (100, 3000, 100000):
        code, err = plan_exit(_stack({**run, "checkpoints": {"saveInterval": interval}}, small), tmp_path)
        assert code == 2, err
        (line,) = [x for x in err.splitlines() if x.startswith("workloads.w.checkpoints.saveInterval:")]
        assert "no interval fits a run of 3000 steps" in line and "raise storage.throughputPerTib" in line, line
    faster = {"storageCapacityGib": 1200, "throughputPerTib": 1000}
    code, err = plan_exit(_stack({**run, "checkpoints": {"saveInterval": 3000}}, faster), tmp_path)
    assert code == 0, err


def _run(extra: dict[str, Any]) -> Any:
    big = {"storageCapacityGib": 4800, "throughputPerTib": 1000}
    cfg = config.parse(config.from_stack_values(_stack({"checkpoints": {"saveInterval": 1000}, **extra}, big, "hf_x")))
    return cfg.workloads["w"]


def test_the_step_is_the_published_tokens_per_gpu_over_the_runs_tokens() -> None:
    run = _run({"precision": "fp8-cs", "training": {"globalBatchSize": 128, "seqLength": 8192}})
    row = published_row(run.step_input, "p5en.48xlarge")
    assert row is not None and row.system == "DGX-H100" and row.tokens_per_second_per_gpu == 14451
    assert step_seconds(run.step_input, "p5en.48xlarge") == pytest.approx(128 * 8192 / (14451 * 16))
    # nothing is extrapolated: another precision, sequence length or GPU has no estimate
    bf16 = _run({"training": {"globalBatchSize": 128, "seqLength": 8192}})
    assert step_seconds(bf16.step_input, "p5en.48xlarge") is None
    assert (
        step_seconds(_run({"precision": "fp8-cs", "training": {"seqLength": 4096}}).step_input, "p5en.48xlarge") is None
    )
    assert step_seconds(run.step_input, "p4de.24xlarge") is None


def test_the_plan_shows_throughput_and_the_mfu_it_implies() -> None:
    plan = stack_plan("p5en-megatron-bridge")
    (pretrain,) = [r for r in plan["resources"] if r["type"].endswith(":Workload") and r["name"] == "pretrain"]
    t = pretrain["inputs"]["throughput"]
    assert t["tokensPerSecond"] == 14451 * 16 and t["tokensPerSecondPerGpu"] == 14451
    assert t["mfu"] == pytest.approx(744 / 1978.9, abs=1e-3)  # the FP8 run against the FP8 peak (test_flops.py)
    assert "DGX-H100" in t["published"] and "TP1 PP1 CP1 FSDP8" in t["published"]
    ck = pretrain["inputs"]["checkpoints"]
    assert ck["writes"] == 3 and ck["kept"] == 3 and ck["writeShare"] <= 0.02
    (sft,) = [r for r in plan["resources"] if r["type"].endswith(":Workload") and r["name"] == "sft"]
    assert "tokensPerSecond" not in sft["inputs"]["throughput"]
    assert sft["inputs"]["throughput"]["loads"]["loadSeconds"] > 0


def test_only_the_staging_job_reaches_the_hub_and_every_rank_reads_offline() -> None:
    steps = built_with("megatron-bridge", {})
    hub = [s for s in steps if s.role == "hub"]
    assert len(hub) == 1
    for step in steps:
        for role, c in containers([step.obj]):
            text = script(c)
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            labels = step.obj["spec"]["template"]["metadata"]["labels"] if step.obj["kind"] == "Job" else {}
            internet = labels.get("llm-training-eks/egress") == "internet"
            assert ("hf download" in text) == (step.role == "hub") == internet, step.name
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            assert ("/etc/huggingface" in mounts) == (step.role == "hub"), step.name
            if "run_recipe.py" in text or "run_conversion.py" in text:
                assert env.get("HF_HUB_OFFLINE") == env.get("TRANSFORMERS_OFFLINE") == "1", (step.name, role)
                assert env.get("HF_HUB_CACHE") == "/shared/hf-hub", (step.name, role)  # the tenant's cache


def test_indexed_data_and_70b_overrides_apply_to_the_recorded_config() -> None:
    steps = built_with("megatron-bridge", {"mode": "pretrain", "data": {"source": "indexed", "paths": ["/shared/a"]}})
    (train,) = [s for s in steps if s.obj["kind"] == "MPIJob"]
    text = script(train.obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0])
    (words,) = invocations(text, bridge.RUN_RECIPE)
    assert words[:6] == [
        "--recipe",
        "llama31_8b_pretrain_config",
        "--mode",
        "pretrain",
        "--dataset",
        "megatron-indexed",
    ]
    bridge_overrides_apply("megatron-indexed", words[6:])
    assert "dataset.data_path=[/shared/a]" in words
    with pytest.raises(ConfigCompositionException, match=r"Could not override 'dataset\.dataset_root'"):
        bridge_overrides_apply("megatron-indexed", ["dataset.dataset_root=/shared/a"])
    # the 70B recipe's interleaved pipeline (VP 5) and sequence parallelism, in its overrides
    run = _run({"model": "llama31_70b", "nodes": 4, "training": {"seqLength": 8192}})
    overrides = recipe_overrides("w", run, SimpleNamespace(shared_mount="/shared"))  # type: ignore[arg-type]
    assert {"model.virtual_pipeline_model_parallel_size=5", "model.sequence_parallel=true"} <= set(overrides)
    bridge_overrides_apply("mock", overrides)


def test_the_example_stack_is_held_to_the_same_rules() -> None:
    values = json.loads(json.dumps(stack_values("p5en-megatron-bridge")))
    values["llm-training-eks:storage"] = {"storageCapacityGib": 1200, "throughputPerTib": 125}
    with pytest.raises(config.ConfigError, match=r"workloads\.pretrain\.checkpoints\.saveInterval"):
        config.parse(config.from_stack_values(values))
