"""facts/leaderworkerset.py, the multi-node serving facts of facts/serving.py and Kueue's
LeaderWorkerSet integration, held to their sources: kubernetes-sigs/lws v0.9.0 (its API types, pod
webhook, chart and installation guide), vLLM 0.24.0's wheel (the multi-node launch without Ray),
Kueue v0.19.2 (the framework name and the LWS module its go.mod requires) and vllm-neuron (why a
Neuron replica stays within one node)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from config.teams import QueueingConfig
from facts import leaderworkerset as lws
from facts import serving
from infra import charts
from infra.queues import kueue_manager_config
from tests import upstream

LWS = upstream.facts("lws-v0.9.0")
VLLM = upstream.facts("vllm-v0.24.0")
KUEUE = upstream.facts("kueue-integrations-v0.19.2")
SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "leaderworkerset-v1.schema.json").read_text())


def test_the_api_and_the_values_rendered_are_lws_v0_9_0s() -> None:
    assert (LWS["api_version"], LWS["kind"]) == (lws.API_VERSION, lws.KIND)
    assert lws.RECREATE_GROUP in LWS["restart_policies"]
    assert lws.LEADER_CREATED in LWS["startup_policies"]
    assert {"leaderWorkerTemplate", "replicas", "startupPolicy"} <= set(LWS["spec_fields"])
    assert {"leaderTemplate", "workerTemplate", "size", "restartPolicy"} <= set(LWS["leader_worker_template_fields"])
    labels = LWS["labels"]
    assert (
        labels["name"],
        labels["group_index"],
        labels["worker_index"],
    ) == (lws.NAME_LABEL, lws.GROUP_INDEX_LABEL, lws.WORKER_INDEX_LABEL)
    assert set(lws.INJECTED_ENV) == set(LWS["injected_env"])
    # A worker resolves the leader before it is ready (the leader is ready only once they joined).
    assert LWS["headless_service_publishes_not_ready"] is True


def test_the_stored_crd_schema_is_the_one_of_the_facts() -> None:
    spec = SCHEMA["properties"]["spec"]
    template = spec["properties"]["leaderWorkerTemplate"]["properties"]
    assert sorted(spec["properties"]) == sorted(LWS["spec_fields"])
    assert template["restartPolicy"]["enum"] == LWS["restart_policies"]
    assert spec["properties"]["startupPolicy"]["enum"] == LWS["startup_policies"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"leaderWorkerTemplate": {"restartPolicy": "Always"}}}, SCHEMA)


def test_the_controller_is_the_released_chart_pinned_to_its_own_image() -> None:
    assert (LWS["chart"], LWS["chart_version"], LWS["namespace"]) == (lws.CHART, lws.CHART_VERSION, lws.NAMESPACE)
    assert charts.LWS.chart == lws.CHART and charts.LWS_NAMESPACE == lws.NAMESPACE
    values = charts.lws_values(lws.CHART_VERSION)
    manager = values["image"]["manager"]
    assert manager == {"repository": LWS["image_repository"], "tag": "v0.9.0", "pullPolicy": "IfNotPresent"}
    # Leader election on, webhooks failing closed: two replicas keep LeaderWorkerSets admissible.
    assert LWS["leader_elect"] is True and LWS["webhook_failure_policy"] == "Fail"
    assert values["replicaCount"] == 2
    # The pod webhook sees only the sets' pods: a controller outage blocks no other pod.
    assert LWS["pod_webhook_object_selector"] == lws.NAME_LABEL


def test_kueue_manages_leaderworkersets_by_the_name_its_0_19_2_registers_and_only_when_installed() -> None:
    name = KUEUE["framework_names"]["leaderworkerset"]
    assert name == "leaderworkerset.x-k8s.io/leaderworkerset"
    assert f"  - {name}\n" in kueue_manager_config(QueueingConfig(), leader_worker_set=True)
    assert name not in kueue_manager_config(QueueingConfig())


def test_vllms_multi_node_launch_is_the_wheels() -> None:
    multi = VLLM["multi_node"]
    assert multi["backend"] == serving.MULTI_NODE_EXECUTOR and multi["backend"] in multi["executor_backends"]
    assert multi["master_port_default"] == serving.MASTER_PORT
    assert set(multi["options"]) <= set(VLLM["options"]), "every multi-node option is one of `vllm serve`'s"
    assert multi["flags"] == ["--headless"]


def test_neuron_serves_a_replica_in_one_process() -> None:
    """Why config/workloads/vllm_serve.py refuses nodes > 1 and pipelineParallel > 1 on Neuron."""
    neuron = upstream.facts("vllm-neuron-0.2.0")
    assert neuron["executor_for_world_size_above_1"] == "uni" != serving.MULTI_NODE_EXECUTOR
    assert neuron["worker_world_size"] == 1


def test_the_set_is_replaced_on_what_kueue_0_19_2_refuses_to_change() -> None:
    """Kueue v0.19.2's LWS webhook (leaderworkerset_webhook.go ValidateUpdate; pod.go SpecShape):
    the paths the set replaces on are exactly its immutable shape, under both templates."""
    webhook = upstream.facts("kueue-lws-webhook-v0.19.2")
    assert webhook["feature_immutable_group_size"]["default"] is True
    paths = lws.kueue_immutable_paths()
    assert "spec.leaderWorkerTemplate.size" in paths
    for template in ("leaderTemplate", "workerTemplate"):
        spec = f"spec.leaderWorkerTemplate.{template}.spec."
        fields = {p.removeprefix(spec) for p in paths if p.startswith(spec)}
        shape = {f for f in webhook["pod_spec_shape"] if f not in ("containers", "initContainers")}
        per_container = {
            f"{c}[*].{part}" for c in ("containers", "initContainers") for part in webhook["container_shape"]
        }
        assert fields == shape | per_container | {"resources.requests"}, fields
