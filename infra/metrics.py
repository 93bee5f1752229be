"""The serving scraper: one more CloudWatch agent of the amazon-cloudwatch-observability add-on
that reads the vLLM servers' /metrics and sends the key series to CloudWatch.

The chart (6.4.0) renders one AmazonCloudWatchAgent per entry of its `agents` list, each entry
merged over `agent`; an entry's `prometheus.config` becomes the agent's Prometheus scrape
configuration (the operator mounts it at /etc/prometheusconfig/prometheus.yaml) and its `config`
the agent's JSON configuration, whose `logs.metrics_collected.prometheus` turns the scraped
series into embedded-metric-format events in /aws/containerinsights/<cluster>/prometheus.

Why a separate agent, not `agent.prometheus` on the chart's own: that value reaches every entry,
so each node's agent (a DaemonSet) would scrape every server once per node; and the chart's
agents run on the host network, which NetworkPolicy pod selectors do not match. This one is a
single-replica Deployment on the pod network, which the servers' metrics policy admits by its
namespace and the labels the operator gives its pods. Tests: tests/plan/test_serving_metrics.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from facts import serving
from facts.names import CLOUDWATCH_NAMESPACE, COMPONENT_LABEL, PART_OF_LABEL, PROJECT
from infra.charts import SYSTEM_NODE_SELECTOR

CHART_AGENTS: tuple[dict[str, Any], ...] = (
    {"name": "cloudwatch-agent"},
    {"name": "cloudwatch-agent-cluster-scraper", "mode": "deployment", "config": "default"},
)
"""The chart's own `agents` (values.yaml at 6.4.0): a list value replaces the chart's whole list,
so the configuration repeats them unchanged before adding the scraper."""
SCRAPER = "cloudwatch-agent-serving"
"""The scraper's AmazonCloudWatchAgent (and so its pods' `app.kubernetes.io/instance`)."""
JOB = "vllm-serving"
"""The scrape job: the log stream of its events, and the `job` label the metric declaration matches."""
PROMETHEUS_CONFIG_PATH = "/etc/prometheusconfig/prometheus.yaml"
"""Where the operator (3.6.0) mounts an agent's `prometheus.config`."""
METRICS_NAMESPACE = "ContainerInsights/Prometheus"
"""The CloudWatch namespace of the agent's Prometheus metrics (CloudWatch user guide)."""
SCRAPE_INTERVAL = "1m"
SCRAPE_TIMEOUT = "10s"
"""Shorter than the interval: a server busy with a batch answers /metrics late, not never."""


def scraper_pod_labels(name: str = SCRAPER) -> dict[str, str]:
    """The labels the operator's selector puts on every pod of an AmazonCloudWatchAgent
    (manifestutils.SelectorLabels at 3.6.0): what the servers' NetworkPolicy selects."""
    return {
        "app.kubernetes.io/managed-by": "amazon-cloudwatch-agent-operator",
        "app.kubernetes.io/instance": f"{CLOUDWATCH_NAMESPACE}.{name}",
        "app.kubernetes.io/part-of": "amazon-cloudwatch-agent",
        "app.kubernetes.io/component": "amazon-cloudwatch-agent",
    }


def _meta(label: str) -> str:
    """A pod label as Kubernetes service discovery names it (`__meta_kubernetes_pod_label_<name>`)."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def scrape_config(namespaces: Sequence[str]) -> dict[str, Any]:
    """The Prometheus scrape configuration: the pods of the serving namespaces (every namespace
    when the stack cannot see its runs: an aws-layer stack) that carry this project's serving
    labels and `prometheus.io/scrape: "true"`, at the port and path of their annotations."""
    discovery: dict[str, Any] = {"role": "pod"}
    if namespaces:
        discovery["namespaces"] = {"names": list(namespaces)}
    annotation = "__meta_kubernetes_pod_annotation_prometheus_io_"
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_TIMEOUT},
        "scrape_configs": [
            {
                "job_name": JOB,
                "sample_limit": 10000,
                "kubernetes_sd_configs": [discovery],
                "relabel_configs": [
                    {
                        "source_labels": [_meta(PART_OF_LABEL), _meta(COMPONENT_LABEL), f"{annotation}scrape"],
                        "action": "keep",
                        "regex": f"{PROJECT};serve;true",
                    },
                    {
                        "source_labels": ["__address__", f"{annotation}port"],
                        "action": "replace",
                        "regex": r"([^:]+)(?::\d+)?;(\d+)",
                        "replacement": "$1:$2",
                        "target_label": "__address__",
                    },
                    {
                        "source_labels": [f"{annotation}path"],
                        "action": "replace",
                        "regex": "(.+)",
                        "target_label": "__metrics_path__",
                    },
                    {
                        "source_labels": ["__meta_kubernetes_namespace"],
                        "action": "replace",
                        "target_label": "Namespace",
                    },
                    {"source_labels": ["__meta_kubernetes_pod_name"], "action": "replace", "target_label": "pod_name"},
                ],
            }
        ],
    }


def agent_config(cluster: str, region: str) -> dict[str, Any]:
    """The agent's own configuration: its region (on the pod network it cannot read the instance
    metadata, hop limit 1) and the Prometheus section that turns the key vLLM series into metrics,
    one per served model (dimensions ClusterName, Namespace, model_name)."""
    return {
        "agent": {"region": region},
        "logs": {
            "metrics_collected": {
                "prometheus": {
                    "cluster_name": cluster,
                    "log_group_name": f"/aws/containerinsights/{cluster}/prometheus",
                    "prometheus_config_path": PROMETHEUS_CONFIG_PATH,
                    "emf_processor": {
                        "metric_declaration": [
                            {
                                "source_labels": ["job"],
                                "label_matcher": f"^{JOB}$",
                                "dimensions": [["ClusterName", "Namespace", serving.SERIES_LABEL]],
                                "metric_selectors": [f"^{s}$" for s in serving.SCRAPED_SERIES],
                            }
                        ]
                    },
                }
            }
        },
    }


def scraper_agent(cluster: str, region: str, namespaces: Sequence[str]) -> dict[str, Any]:
    """The `agents` entry of the scraper: one replica on the pod network, on the system node group
    (the chart's agent tolerates every taint; an accelerated node's CPU is its admitted runs'),
    with the chart's service account (its ClusterRole lists and watches pods; its Pod Identity role
    writes logs)."""
    return {
        "name": SCRAPER,
        "mode": "deployment",
        "replicas": 1,
        "hostNetwork": False,
        # Merged into the chart's default selector (kubernetes.io/os: linux).
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "config": agent_config(cluster, region),
        "prometheus": {"config": scrape_config(namespaces)},
    }


def agents(cluster: str, region: str, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The add-on's `agents`: the chart's own, then the scraper."""
    return [*(dict(a) for a in CHART_AGENTS), scraper_agent(cluster, region, namespaces)]
