"""Models that fit where they run, refused at plan time naming the key (exit 2). Before, each of
these was accepted and the server crash-looped on the cluster while `pulumi up` reported success:

- vLLM 0.24.0 refuses to start when the KV cache left beside the weights at
  gpu_memory_utilization 0.9 cannot hold one max_model_len sequence
  (v1/core/kv_cache_utils.py check_enough_kv_cache_memory): Llama 3.1 70B on 2 H100 at 65,536
  tokens needs 20 GiB of KV cache (2 x 80 layers x 8 KV heads x 128 x 2 bytes a token: NeMo's
  Llama31Config70B, tests/upstream/served-shapes-llama31.yaml) beside 131.5 GiB of weights in
  2 x 80 GiB x 0.9;
- attention heads not divisible by tensor parallelism (vllm/config/model.py
  verify_with_parallel_config), e.g. a trained 20-head model at tensorParallel 8;
- maxModelLen above the model's max_position_embeddings (Qwen3 8B: 40,960, Megatron Bridge's
  Qwen3ModelProvider, tests/upstream/served-shapes-qwen3.yaml);
- replicas beyond the team's quota and borrowing: Kueue 0.19.2 admits each replica's pods
  against the team's ClusterQueue, the rest stay pending (only one replica was checked).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.conftest import plan_exit, run_plan, stack_values

NS = "llm-training-eks:"


def server(stack: str, name: str, **keys: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    run = values[NS + "workloads"][name]
    for key, value in keys.items():
        if key == "model":
            run["model"].update(value)
        else:
            run[key] = value
    return values


def llama70b(max_model_len: int) -> dict[str, Any]:
    model = {"hub": "meta-llama/Llama-3.1-70B-Instruct", "parametersBillions": 70.6}
    return server(
        "p5-serve-405b",
        "llama405",
        model=model,
        nodes=1,
        tensorParallel=2,
        pipelineParallel=1,
        maxModelLen=max_model_len,
    )


def refused(values: dict[str, Any], tmp_path: Path, key: str, *words: str) -> str:
    code, err = plan_exit(values, tmp_path)
    assert code == 2, err
    line = next((ln for ln in err.splitlines() if key in ln), err)
    assert all(w in line for w in words), line
    return line


def test_a_context_whose_kv_cache_does_not_fit_beside_the_weights_is_refused(tmp_path: Path) -> None:
    line = refused(llama70b(65536), tmp_path, "workloads.llama405.maxModelLen", "20.0 GiB of KV cache")
    assert "leave 12.5 GiB" in line and "lower maxModelLen (to 39,936)" in line, line
    # Half the context fits: 10 GiB of KV cache in the 12.5 GiB the weights leave.
    run_plan(llama70b(32768), "p5-serve-405b")


def test_heads_that_tensor_parallelism_does_not_split_are_refused(tmp_path: Path) -> None:
    values = server("p5-train-serve", "chat", tensorParallel=8)
    values[NS + "workloads"]["llama"]["model"].update({"hiddenSize": 2560, "numAttentionHeads": 20, "numKvHeads": 20})
    values[NS + "workloads"]["llama"]["model"]["tensorParallel"] = 4
    refused(values, tmp_path, "workloads.chat.tensorParallel", "20 attention heads", "1, 2, 4, 5, 10, 20")


def test_a_context_longer_than_the_models_positions_is_refused(tmp_path: Path) -> None:
    values = server("trn2-serve", "qwen", maxModelLen=65536)
    refused(values, tmp_path, "workloads.qwen.maxModelLen", "40960 positions")


def test_replicas_beyond_the_teams_quota_are_refused(tmp_path: Path) -> None:
    values = server("p5-train-serve", "chat", replicas=16, team="serve")
    values[NS + "teams"] = {"serve": {"nodeGroup": "p5", "nodes": 1, "borrowingLimitNodes": 0}}
    values[NS + "workloads"]["llama"]["team"] = "serve"  # the served run's /shared is its team's
    values[NS + "queueing"] = {**values.get(NS + "queueing", {}), "defaultQueue": True}
    refused(values, tmp_path, "workloads.chat.replicas", "16 replicas take 2 nodes", "at most 8 replicas")
    values[NS + "workloads"]["chat"]["replicas"] = 8
    code, err = plan_exit(values, tmp_path)
    assert code == 0, err


def test_a_served_model_beside_the_checkpoints_must_fit_the_file_system(tmp_path: Path) -> None:
    """405B's 812 GB of bf16 weights on a 1,200 GiB file system, of which 80% is for the files
    the runs keep (estimates.checkpoints.STORAGE_SHARE): 1,031 GB."""
    values = copy.deepcopy(stack_values("p5-serve-405b"))
    values[NS + "storage"]["storageCapacityGib"] = 1200
    # A replica then reads its weights for 16 min: Kueue's recovery must outwait it (another rule).
    values.setdefault(NS + "queueing", {})["recoveryTimeoutMinutes"] = 120
    code, err = plan_exit(values, tmp_path)
    assert code == 0, err  # one 405B fits
    second = copy.deepcopy(values[NS + "workloads"]["llama405"])
    second["model"]["hub"] = "meta-llama/Llama-3.1-405B"
    values[NS + "workloads"]["base405"] = second
    refused(values, tmp_path, "storage.storageCapacityGib", "workloads.base405: 812 GB", "grow the file system")


def hub_timeout(capacity_gib: int, per_tib: int = 125) -> int:
    values = copy.deepcopy(stack_values("p5-serve-405b"))
    values[NS + "storage"].update({"storageCapacityGib": capacity_gib, "throughputPerTib": per_tib})
    # A replica then takes as long to read the weights: Kueue must wait for it (another rule).
    values.setdefault(NS + "queueing", {}).update(podsReadyTimeoutMinutes=240, recoveryTimeoutMinutes=240)
    plan = run_plan(values, "p5-serve-405b")
    (job,) = [r for r in plan["resources"] if r["type"] == "kubernetes:batch/v1:Job" and "-hub-" in r["name"]]
    return int(job["inputs"]["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])


def test_the_hub_download_is_awaited_as_long_as_the_model_takes_to_land() -> None:
    """FSx for Lustre's aggregate throughput is TiB x MB/s per TiB (PERSISTENT_2's 125 tier: FSx
    performance page): 1,200 GiB write 146 MB/s, so 405B's 812 GB take ~5,540 s
    against the fixed 3,600 s `pulumi up` waited before. The wait allows twice that, plus 10 min."""
    small = hub_timeout(1200)
    assert small > 2 * 5500, small
    # Eight times the throughput: the wait shrinks, never below the hour it always had.
    assert 3600 <= hub_timeout(1200, 1000) < small
