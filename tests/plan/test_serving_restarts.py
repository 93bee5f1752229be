"""A Neuron server across restarts, replicas and edits, and Kueue's recovery timeout.

- Compile cache (tests/upstream/vllm-neuron-compile-cache.yaml: the Neuron SDK's vLLM Neuron docs,
  compilation_cache.md, and the vLLM user guide): the trn2 image's plugin caches under
  VLLM_CACHE_ROOT (by default ~/.cache/vllm, here the pod's /tmp scratch: lost at every restart)
  and waits 600 s on another process's compile; the trn1/inf2 plugin loads NEURON_COMPILED_ARTIFACTS
  whatever configuration it was compiled for. The cache is on /shared, keyed by the model, its
  revision, TP, max length, batch and image; the timeouts are the modeled compile.
- Writable working directory (vllm-neuron 0.2.0, neuronx_distributed_model_loader.py): the plugin
  writes local-models/ under its working directory, root's in the image.
- Recovery (Kueue v0.19.2 apis/config/v1beta2/configuration_types.go RecoveryTimeout): a replica
  that restarts is evicted and requeued if not ready again within recoveryTimeoutMinutes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from facts import serving
from tests import upstream
from tests.conftest import plan_exit, run_plan, stack_plan, stack_values

FACTS = upstream.facts("vllm-neuron-compile-cache")
NS = "llm-training-eks:"
STACK = "trn2-serve"


def _values(stack: str = STACK) -> dict[str, Any]:
    return copy.deepcopy(stack_values(stack))


def _server(plan: dict[str, Any]) -> dict[str, Any]:
    (d,) = [
        r["inputs"]
        for r in plan["resources"]
        if r["inputs"].get("kind") == "Deployment" and r["name"].endswith("-serve")
    ]
    (c,) = d["spec"]["template"]["spec"]["containers"]
    return c


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container["env"]}


def _dirs_script(plan: dict[str, Any]) -> str:
    (job,) = [
        r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "Job" and r["name"].endswith("-dirs")
    ]
    return str(job["spec"]["template"]["spec"]["containers"][0]["command"][-1])


def test_the_compile_cache_is_on_shared_keyed_and_the_timeouts_are_the_compile() -> None:
    plan = stack_plan(STACK)
    env = _env(_server(plan))
    plugin = FACTS["vllm_024_plugin"]
    root = env[plugin["cache_root_env"]]
    assert root.startswith("/shared/") and "len8192" in root and "tp4" in root, root
    for timeout in (plugin["compile_wait_timeout_env"], plugin["compile_timeout_env"]):
        assert int(env[timeout]) >= serving.NEURON_COMPILE_SECONDS > plugin["compile_wait_timeout_default_seconds"]
    artifacts = env[FACTS["nxdi_plugin"]["artifacts_env"]]
    assert artifacts.startswith(root.rsplit("/", 1)[0]), (artifacts, root)


def test_a_new_max_length_compiles_anew_and_more_replicas_reuse_the_cache() -> None:
    """The 0.16 plugin would load the old graph for a new maxModelLen: the directory must change."""
    before = _env(_server(stack_plan(STACK)))
    longer = _values()
    longer[f"{NS}workloads"]["qwen"]["maxModelLen"] = 16384
    after = _env(_server(run_plan(longer, STACK)))
    for key in (FACTS["vllm_024_plugin"]["cache_root_env"], FACTS["nxdi_plugin"]["artifacts_env"]):
        assert before[key] != after[key], key
    fewer = _values()
    fewer[f"{NS}workloads"]["qwen"]["replicas"] = 1
    same = _env(_server(run_plan(fewer, STACK)))
    assert same[FACTS["vllm_024_plugin"]["cache_root_env"]] == before[FACTS["vllm_024_plugin"]["cache_root_env"]]


def test_a_trn1_server_has_a_working_directory_it_can_write() -> None:
    values = _values()
    values[f"{NS}nodeGroups"][0]["instanceType"] = "trn1.32xlarge"
    values[f"{NS}nodeGroups"][0]["name"] = "trn2"
    values[f"{NS}workloads"]["qwen"]["tensorParallel"] = 2  # one trn1 device (2 NeuronCores)
    plan = run_plan(values, STACK)
    container = _server(plan)
    work = container.get("workingDir", "")
    assert work.startswith("/shared/"), (
        f"{FACTS['nxdi_plugin']['writes_relative_to_working_directory']}/ under {work!r}"
    )
    script = _dirs_script(plan)
    assert "mkdir -p" in script and work in script.split("chown", 1)[1], script


def test_a_restart_longer_than_the_recovery_timeout_is_refused(tmp_path: Path) -> None:
    values = _values()
    values[f"{NS}queueing"].pop("recoveryTimeoutMinutes", None)
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and "queueing.recoveryTimeoutMinutes" in err and "66-minute" in err, err


def test_a_405b_replica_from_slow_storage_is_refused_too(tmp_path: Path) -> None:
    """Llama 3.1 405B read at 125 MB/s per TiB of 1.2 TiB: a restart takes longer than 15 minutes."""
    values = _values("p5-serve-405b")
    values[f"{NS}storage"].update(storageCapacityGib=4800, throughputPerTib=125)
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and "queueing.recoveryTimeoutMinutes" in err, err
