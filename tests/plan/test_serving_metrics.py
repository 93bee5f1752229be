"""The vLLM servers' metrics reach CloudWatch through the observability add-on the stack already
runs: a scraper agent of the add-on (infra.metrics), its log group with a retention, and the
servers' NetworkPolicy that admits it on the metrics port.

Held against:
- the chart amazon-cloudwatch-observability 6.4.0 (aws-observability/helm-charts, tag
  amazon-cloudwatch-observability-6.4.0): tests/upstream/chart-amazon-cloudwatch-observability-6.4.0-agents.yaml;
- the operator it runs, aws/amazon-cloudwatch-agent-operator v3.6.0 (pod labels, the Prometheus
  config's path): tests/upstream/cloudwatch-agent-operator-3.6.0.yaml;
- the CloudWatch user guide's Prometheus collection pages: tests/upstream/cloudwatch-agent-prometheus-2026-11.yaml;
- vllm/v1/metrics/loggers.py of each pinned image's vLLM (the wheels on PyPI): 0.24.0 (GPU, Trn2),
  tests/upstream/vllm-v0.24.0-metrics.yaml; 0.16.0 (trn1/inf2), tests/upstream/vllm-v0.16.0-metrics.yaml.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

import config
from facts import serving
from facts.names import CLOUDWATCH_NAMESPACE
from infra import charts, layers, metrics
from tests import upstream
from tests.conftest import MINIMAL, plan_exit, resources, run_plan, stack_plan, stack_values
from tests.plan.test_observability import cw_addon, insights_groups
from tests.pods import pods
from tools import plan as plan_mod

CHART = "chart-amazon-cloudwatch-observability-6.4.0-agents"
OPERATOR = "cloudwatch-agent-operator-3.6.0"
DOCS = "cloudwatch-agent-prometheus-2026-11"
VLLMS = sorted({image.vllm for image in serving.IMAGES})
"""The vLLM versions of the pinned serving images: each has its series facts (tests/upstream)."""
SERVE_STACKS = ["p5-train-serve", "trn2-serve"]
NS = "llm-training-eks:"


def values_of(plan: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(cw_addon(plan)["inputs"]["configurationValues"]))


def scraper_of(plan: dict[str, Any]) -> dict[str, Any]:
    (agent,) = [a for a in values_of(plan)["agents"] if a["name"] == metrics.SCRAPER]
    return dict(agent)


def cluster_of(stack: str) -> str:
    return config.parse_stack_values(stack_values(stack)).cluster.name


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_scraper_is_one_more_agent_of_the_chart_on_the_pod_network(stack: str) -> None:
    """A list value replaces the chart's list: its own agents come first, unchanged. The scraper
    is a Deployment of one (the chart's default, a DaemonSet, would scrape every server once per
    node) on the pod network (the chart's default is the host network, which NetworkPolicy pod
    selectors do not match), with the chart's service account, which the add-on's Pod Identity
    role and the agent's ClusterRole (pods: list, watch) are for."""
    chart, docs_addon = upstream.facts(CHART), upstream.facts("aws-eks-cloudwatch-observability-2026-11")
    plan = stack_plan(stack)
    agents = values_of(plan)["agents"]
    assert agents[: len(chart["agents_default"])] == chart["agents_default"]
    agent = scraper_of(plan)
    rendered = {k.split(".")[0] for k in chart["entry_keys_rendered"]}
    assert set(agent) <= rendered, set(agent) - rendered
    assert chart["agent_defaults"]["hostNetwork"] is True and agent["hostNetwork"] is False
    assert agent["mode"] == "deployment" and agent["replicas"] == 1
    assert chart["maps_merged_by"] == "mergeOverwrite", "the node selector adds to the chart's (Linux)"
    assert agent["nodeSelector"] == charts.SYSTEM_NODE_SELECTOR
    assert "serviceAccount" not in agent and chart["agent_defaults"]["serviceAccount.name"] is None
    assert chart["agent_service_account_default"] == docs_addon["service_account"]
    (association,) = cw_addon(plan)["inputs"]["podIdentityAssociations"]
    assert association["serviceAccount"] == chart["agent_service_account_default"]
    assert {"list", "watch"} <= set(chart["agent_clusterrole_pods_verbs"])
    assert chart["prometheus_config_to"] == "spec.prometheus.config" and "config" in agent["prometheus"]
    assert not chart["agent_defaults"]["prometheus.targetAllocator.enabled"]


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_agent_config_sends_the_key_series_to_the_stacks_log_group(stack: str) -> None:
    """The agent reads the scrape config where the operator mounts it, names its region (the chart
    fills it in only for Container Insights or Application Signals configs, and a pod cannot reach
    the instance metadata) and writes to the prometheus log group the stack owns, with a retention."""
    docs, operator, chart = upstream.facts(DOCS), upstream.facts(OPERATOR), upstream.facts(CHART)
    plan, cluster = stack_plan(stack), cluster_of(stack)
    cfg = scraper_of(plan)["config"]
    assert "logs.metrics_collected.prometheus" not in chart["region_filled_only_with"]
    assert cfg["agent"]["region"] == stack_values(stack)["aws:region"]
    section = cfg
    for part in docs["prometheus_section"].split("."):
        section = section[part]
    assert set(section) <= set(docs["prometheus_fields"])
    assert section["prometheus_config_path"] == operator["prometheus_config_path_default"]
    assert section["cluster_name"] == cluster
    group = docs["default_log_group"].replace("${CLUSTER_NAME}", cluster)
    assert section["log_group_name"] == group
    groups = insights_groups(plan)
    assert groups[group]["inputs"]["retentionInDays"] == 14
    assert groups[group]["urn"] in cw_addon(plan)["dependencies"], "the group exists before the agent writes"
    for declaration in section["emf_processor"]["metric_declaration"]:
        assert set(declaration) <= set(docs["metric_declaration_fields"])


@pytest.mark.parametrize("version", VLLMS)
def test_the_series_are_vllms_gauges_and_counters_with_the_dimension_labels(version: str) -> None:
    """Each series CloudWatch gets exists in the vLLM of every pinned image under that name (a counter with the
    `_total` its client library adds; the KV cache gauge is no longer `gpu_cache_usage_perc`), is
    a type the agent converts (it drops histograms: the latency series cannot go this way), and
    carries the labels the metric's dimensions name."""
    vllm, docs = upstream.facts(f"vllm-v{version}-metrics"), upstream.facts(DOCS)
    assert not vllm["gpu_cache_usage_perc_present"]
    for name in serving.SCRAPED_SERIES:
        base = name.removesuffix(vllm["counter_sample_suffix"])
        kind = vllm["series"].get(base)
        assert kind in docs["converted_types"], (name, kind)
        assert (kind == "counter") == name.endswith(vllm["counter_sample_suffix"]), name
    assert vllm["series"]["vllm:time_to_first_token_seconds"] in docs["dropped_types"]
    assert vllm["series"]["vllm:e2e_request_latency_seconds"] in docs["dropped_types"]
    assert serving.SERIES_LABEL in vllm["labelnames"] and vllm["model_name_is"] == "served_model_name"
    (declaration,) = metrics.agent_config("c", "us-east-1")["logs"]["metrics_collected"]["prometheus"]["emf_processor"][
        "metric_declaration"
    ]
    rules = metrics.scrape_config(())["scrape_configs"][0]["relabel_configs"]
    relabelled = {r["target_label"] for r in rules if "target_label" in r}
    for dims in declaration["dimensions"]:
        assert set(dims) <= {docs["cluster_name_label"], *relabelled, *vllm["labelnames"]}, dims
    selectors = declaration["metric_selectors"]
    assert all(any(re.fullmatch(s.strip("^$"), n) for s in selectors) for n in serving.SCRAPED_SERIES)


def _relabel(rules: list[dict[str, Any]], target: dict[str, str]) -> dict[str, str] | None:
    """Prometheus relabelling (keep and replace, the actions the scrape config uses); None: dropped."""
    out = dict(target)
    for rule in rules:
        value = ";".join(out.get(s, "") for s in rule.get("source_labels", []))
        m = re.fullmatch(rule.get("regex", "(.*)"), value)
        if rule["action"] == "keep":
            if not m:
                return None
        elif rule["action"] == "replace" and m:
            out[rule["target_label"]] = m.expand(rule.get("replacement", "$1").replace("$", "\\"))
    return out


def _target(namespace: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, str]:
    """What Kubernetes service discovery (role pod) gives a pod's container port."""
    meta = {"__address__": "10.1.2.3:8000", "__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": "p"}
    clean = lambda k: re.sub(r"[^a-zA-Z0-9_]", "_", k)  # noqa: E731
    meta.update({f"__meta_kubernetes_pod_label_{clean(k)}": v for k, v in labels.items()})
    meta.update({f"__meta_kubernetes_pod_annotation_{clean(k)}": v for k, v in annotations.items()})
    return meta


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_scraper_finds_the_servers_and_only_them(stack: str) -> None:
    """The seam: the scrape config, run over the pods the stack renders, keeps each server at the
    port and path of its annotations (vLLM's /metrics), in a namespace it discovers, and drops
    every other pod (training, conversion and staging steps)."""
    plan = stack_plan(stack)
    job = scraper_of(plan)["prometheus"]["config"]["scrape_configs"][0]
    assert job["job_name"] == metrics.JOB
    (discovery,) = job["kubernetes_sd_configs"]
    kept = []
    for pod in pods(plan):
        template = pod.owner["spec"].get("template", {}).get("metadata", {})
        target = _relabel(job["relabel_configs"], _target(pod.namespace, pod.labels, template.get("annotations", {})))
        if target is not None:
            kept.append(pod.role)
            assert pod.namespace in discovery["namespaces"]["names"]
            assert target["__address__"] == f"10.1.2.3:{serving.PORT}"
            assert target["__metrics_path__"] == serving.METRICS_PATH
            assert target["Namespace"] == pod.namespace
    assert kept and set(kept) == {"vLLM server"}, kept


@pytest.mark.parametrize("stack", SERVE_STACKS)
def test_the_servers_policy_admits_the_scrapers_pods_on_the_metrics_port_only(stack: str) -> None:
    """The servers' namespace is default-deny: the metrics policy selects the servers and admits
    the pods the operator makes for the scraper (its selector labels, in the add-on's namespace)
    on the server's port, and nothing else. The scraper's own namespace has no policy of this
    stack: its egress (to the servers, the API server, CloudWatch Logs) is not restricted."""
    operator, chart = upstream.facts(OPERATOR), upstream.facts(CHART)
    plan = stack_plan(stack)
    labels = {
        k: v.replace("${NAMESPACE}", chart["release_namespace_of_addon"])
        .replace("${NAME}", metrics.SCRAPER)
        .replace("${COMPONENT}", operator["component"])
        for k, v in operator["pod_selector_labels"].items()
    }
    assert (
        operator["pod_labels_include_selector_labels"] and chart["release_namespace_of_addon"] == CLOUDWATCH_NAMESPACE
    )
    objects = plan_mod.kubernetes_objects(plan)
    assert not [o for o in objects if o["metadata"].get("namespace") == CLOUDWATCH_NAMESPACE]
    servers = [p for p in pods(plan) if p.role == "vLLM server"]
    for server in servers:
        name = server.owner["metadata"]["name"].removesuffix("-serve")
        (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == f"{name}-metrics"]
        assert policy["metadata"]["namespace"] == server.namespace
        wanted = policy["spec"]["podSelector"]["matchLabels"]
        assert all(server.labels.get(k) == v for k, v in wanted.items())
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        ((rule,),) = [policy["spec"]["ingress"]]
        assert rule["ports"] == [{"protocol": "TCP", "port": serving.PORT}]
        ((peer,),) = [rule["from"]]
        assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": CLOUDWATCH_NAMESPACE}}
        assert peer["podSelector"] == {"matchLabels": labels}
        ports = server.spec["containers"][0]["ports"]
        assert [p["containerPort"] for p in ports] == [serving.PORT]


def test_a_stack_that_serves_nothing_runs_no_scraper() -> None:
    plan = stack_plan("dev")
    assert "agents" not in values_of(plan)
    assert not [g for g in insights_groups(plan) if g.endswith("/prometheus")]


def test_serving_metrics_false_turns_the_scraper_off() -> None:
    values = copy.deepcopy(stack_values("p5-train-serve"))
    values[f"{NS}addons"] = {**values.get(f"{NS}addons", {}), "observability": {"servingMetrics": False}}
    plan = run_plan(values, "p5-train-serve")
    assert "agents" not in values_of(plan)
    assert not [g for g in insights_groups(plan) if g.endswith("/prometheus")]
    # ...and no server admits a scraper that does not run.
    policies = {
        r["inputs"]["metadata"]["name"] for r in resources(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert "chat-clients" in policies, policies
    assert not [n for n in policies if n.endswith("-metrics")], policies


def test_an_aws_layer_stack_scrapes_when_asked_in_every_namespace() -> None:
    """An aws-layer stack cannot see the runs: `servingMetrics: true` turns the scraper on, and it
    discovers the serving pods by their labels in every namespace."""
    values = copy.deepcopy(stack_values("trn1-llama2-aws"))
    addons = values.setdefault(f"{NS}addons", {})
    addons["observability"] = {**addons.get("observability", {}), "servingMetrics": True}
    plan = run_plan(values, "trn1-llama2-aws")
    (discovery,) = scraper_of(plan)["prometheus"]["config"]["scrape_configs"][0]["kubernetes_sd_configs"]
    assert discovery == {"role": "pod"}
    assert [g for g in insights_groups(plan) if g.endswith("/prometheus")]
    assert "agents" not in values_of(stack_plan("trn1-llama2-aws"))


def test_a_bad_serving_metrics_value_exits_2_naming_the_key(tmp_path: Any) -> None:
    code, err = plan_exit({**MINIMAL, f"{NS}addons": {"observability": {"servingMetrics": "sometimes"}}}, tmp_path)
    assert code == 2 and "addons.observability.servingMetrics" in err, err
    assert "Traceback" not in err and len(err.splitlines()) < 10


def test_the_metrics_policy_is_rendered_for_each_server() -> None:
    for stack in SERVE_STACKS:
        names = {
            r["inputs"]["metadata"]["name"]
            for r in resources(stack_plan(stack), "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        }
        servers = [
            p.owner["metadata"]["name"].removesuffix("-serve")
            for p in pods(stack_plan(stack))
            if p.role == "vLLM server"
        ]
        assert servers and {f"{s}-metrics" for s in servers} <= names


@pytest.mark.parametrize("scrape", [True, False])
def test_a_runs_layer_server_admits_the_scraper_only_where_the_aws_layer_runs_it(scrape: bool, tmp_path: Any) -> None:
    """The scraper is the aws layer's (the CloudWatch add-on); the runs layer learns whether it
    runs from the platform output, which the cluster layer passes on from the aws layer's."""
    from tests.plan.test_layers import LAYERED, _layered_files, _plan_file
    from tests.plan.test_serving_endpoint import _patient_queue, _serve_on_trn1

    def observe(c: dict[str, Any]) -> None:
        c.setdefault(NS + "addons", {})["observability"] = {"servingMetrics": scrape}

    def serve(c: dict[str, Any]) -> None:
        _serve_on_trn1(c)
        del c[NS + "workloads"]["qwen"]["endpoint"]

    d = _layered_files(tmp_path, {"aws": observe, "cluster": _patient_queue, "runs": serve})
    plans = {}
    for layer in ("aws", "cluster", "runs"):
        code, plans[layer], err = _plan_file(d / f"Pulumi.{LAYERED[layer]}.yaml")
        assert code == 0, f"{layer}: {err}"
    assert plans["aws"]["outputs"][layers.AWS_LAYER_OUTPUT]["servingMetrics"] is scrape
    assert plans["cluster"]["outputs"][layers.PLATFORM_OUTPUT]["servingMetrics"] is scrape
    names = {
        r["inputs"]["metadata"]["name"]
        for r in resources(plans["runs"], "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert "qwen-clients" in names, names
    assert ("qwen-metrics" in names) is scrape, names
    # Unscraped by the aws layer's choice: said on stderr (and by `pulumi preview`), naming the key.
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['runs']}.yaml")
    said = "warning: workloads.qwen: its /metrics are not scraped" in err
    assert said is not scrape and ("addons.observability.servingMetrics: true" in err) is not scrape, err
