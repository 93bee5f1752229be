"""Cluster add-ons (`addons`): pinned chart and EKS add-on versions."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.aws import check_log_retention
from config.base import Model, Refusal, check_image, matches
from facts import eks_addons

_CHART_VERSION_RE = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+", re.ASCII)
_EKS_ADDON_VERSION_RE = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+", re.ASCII)
_MPI_OPERATOR_RE = re.compile(r"v0\.8\.[0-9]+", re.ASCII)


class EksAddonVersions(Model):
    """Versions of the EKS managed add-ons (all owned by this stack, none by pulumi-eks). Null: the
    version facts/eks_addons.py pins for the cluster's Kubernetes minor, so a Kubernetes upgrade
    moves the add-ons in the same reviewed change and nothing moves on its own between previews;
    a minor with no recorded version needs it named here (config.checks)."""

    vpc_cni: str | None = Field(
        None,
        description="Pin `vpc-cni`, e.g. `v1.20.1-eksbuild.3`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )
    coredns: str | None = Field(
        None,
        description="Pin `coredns`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )
    kube_proxy: str | None = Field(
        None,
        description="Pin `kube-proxy`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )
    pod_identity_agent: str | None = Field(
        None,
        description="Pin `eks-pod-identity-agent`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )
    cloudwatch_observability: str | None = Field(
        None,
        description="Pin `amazon-cloudwatch-observability`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )
    node_monitoring_agent: str | None = Field(
        None,
        description="Pin `eks-node-monitoring-agent`.",
        json_schema_extra={
            "x-default": (
                "the version `facts/eks_addons.py` pins for the cluster's Kubernetes minor (required where it records "
                "none)"
            )
        },
    )

    @field_validator("*")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not matches(_EKS_ADDON_VERSION_RE, v):
            raise Refusal(f"{v!r} is not an EKS add-on version like v1.20.1-eksbuild.3", "invalid")
        return v

    def resolved(self, minor: str) -> dict[str, str | None]:
        """EKS add-on name -> the configured version, else the pinned one for `minor` (None: neither)."""
        return {
            addon: getattr(self, field) or eks_addons.addon_version(minor, addon)
            for field, addon in eks_addons.ADDON_KEYS.items()
        }


CONTAINER_INSIGHTS_LOGS = ("application", "dataplane", "host")
"""Log groups the add-on's Fluent Bit writes (/aws/containerinsights/<cluster>/<kind>): every
container's output, kubelet and containerd, the kernel and system journal."""


class ObservabilityConfig(Model):
    """What the amazon-cloudwatch-observability add-on ships, and how long CloudWatch keeps it. The
    stack owns its log groups (/aws/containerinsights/<cluster>/application, dataplane, host and
    the agent's performance): created with a retention before the cluster, deleted after it."""

    container_logs: bool = Field(
        True,
        description="Ship container output (every rank's), kubelet/containerd and kernel/journal logs to CloudWatch"
        " Logs with Fluent Bit; false ships none (kubectl logs only while the pod exists).",
    )
    log_retention_days: int = Field(
        14, description="Retention of the /aws/containerinsights/<cluster>/* log groups, days (a CloudWatch value)."
    )

    serving_metrics: bool | None = Field(
        None,
        description="Scrape the vLLM servers' /metrics with a CloudWatch agent of the add-on into"
        " /aws/containerinsights/<cluster>/prometheus and the `ContainerInsights/Prometheus` metrics; true on the"
        " aws stack of a layered environment whose runs layer serves (it cannot see the runs). Each server's"
        " NetworkPolicy admits the scraper only where it runs.",
        json_schema_extra={"x-default": "true when a workload of the stack serves (`vllm-serve`), else false"},
    )

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return check_log_retention(v)

    def log_groups(self, scrapes: bool = False) -> tuple[str, ...]:
        """The kinds of /aws/containerinsights/<cluster>/<kind> group the add-on writes; `scrapes`:
        its serving scraper writes `prometheus` too."""
        logs = CONTAINER_INSIGHTS_LOGS if self.container_logs else ()
        return (*logs, "performance", *(("prometheus",) if scrapes else ()))


# NVIDIA device plugin 0.19.0-0.19.2 turned MOFED (and GDS, GDRCopy) on by default, which clashes
# with EFA on these nodes; 0.19.3 reverted it (NVIDIA/k8s-device-plugin CHANGELOG, v0.19.0 #1550,
# v0.19.3 #1837).
NVIDIA_MOFED_DEFAULT_ON = ("0.19.0", "0.19.1", "0.19.2")


# aws/eks-charts stable/aws-efa-k8s-device-plugin (Chart.yaml history, bfe91c4b): chart v0.5.18
# (2025-09-19) is the first with image v0.5.10. Images before it count p6-b200's two NVLink
# controllers (ibp*) as EFA devices, 10 instead of 8, and pods get them as EFA devices
# (aws/sagemaker-hyperpod-cli PR #282; the EKS user guide, node-efa, names the minimum).
EFA_PLUGIN_FIRST_CHART_FOR: dict[str, str] = {"p6-b200.48xlarge": "v0.5.18"}


def chart_version(v: str) -> tuple[int, ...]:
    """'v0.5.18' -> (0, 5, 18)."""
    return tuple(int(p) for p in v.removeprefix("v").split("."))


class AddonsConfig(Model):
    """Cluster add-ons. Helm chart versions are pinned here; bump them deliberately. Each pin is
    checked against its chart at that version (tests/upstream/chart-*.yaml)."""

    # aws/eks-charts stable/aws-efa-k8s-device-plugin, v0.5.30 (image v0.5.20) at bfe91c4b
    # (2026-07-21); images below v0.5.10 miscount devices on newer instances.
    efa_device_plugin_chart: str = Field(
        "v0.5.30", description="`aws-efa-k8s-device-plugin` chart version (eks-charts)."
    )
    # NVIDIA/k8s-device-plugin tag v0.19.3 (deployments/helm/nvidia-device-plugin); not 0.19.0-0.19.2.
    nvidia_device_plugin_chart: str = Field(
        "0.19.3",
        description=(
            "`nvidia-device-plugin` chart version; 0.19.0 to 0.19.2 are refused (MOFED on by default clashes with EFA)."
        ),
    )
    # oci://public.ecr.aws/neuron/neuron-helm-chart; aws-neuron/neuron-helm-charts Chart.yaml 1.1.2 at 1a1d41e3.
    neuron_chart: str = Field("1.1.2", description="`oci://public.ecr.aws/neuron/neuron-helm-chart` version.")
    # kubernetes-sigs/aws-fsx-csi-driver tag helm-chart-aws-fsx-csi-driver-1.17.0 (driver v1.9.0), in the
    # chart repository index; the first versions with controller.podDisruptionBudget and node.region.
    fsx_csi_driver_chart: str = Field("1.17.0", description="aws-fsx-csi-driver chart version.")
    # kubeflow/mpi-operator tag v0.8.0 (101db144, 2026-02-18): the newest tag we could confirm.
    mpi_operator_version: str = Field("v0.8.0", description="kubeflow/mpi-operator release (v0.8.x).")
    mpi_operator_image: str | None = Field(
        None,
        description="MPI operator image to run instead of the release manifest's Docker Hub image"
        " (mpioperator/mpi-operator, the only registry the project publishes to), e.g. a copy in your ECR.",
        json_schema_extra={"x-default": "none (the release's `mpioperator/mpi-operator` on Docker Hub)"},
    )
    # kubernetes-sigs/kueue tag v0.19.2 (8eab6877, 2026-08-20): charts/kueue 0.19.2, pushed to
    # oci://registry.k8s.io/kueue/charts/kueue (its README). 0.19.7 does not exist.
    kueue_chart: str = Field(
        "0.19.2",
        description="`oci://registry.k8s.io/kueue/charts/kueue` version (v0.19.x, API `kueue.x-k8s.io/v1beta2`).",
    )
    # kubernetes-sigs/lws tag v0.9.0 (f056f611, 2026-06-17): the LWS module Kueue 0.19.2 builds
    # against; its chart is pushed to oci://registry.k8s.io/lws/charts/lws (installation guide).
    lws_chart: str = Field(
        "0.9.0", description="`oci://registry.k8s.io/lws/charts/lws` version (LeaderWorkerSet controller)."
    )
    leader_worker_set: bool | None = Field(
        None,
        description="Install the LeaderWorkerSet controller (a serving replica larger than one node runs as a"
        " LeaderWorkerSet); a cluster-layer stack whose runs serve across nodes sets true.",
        json_schema_extra={"x-default": "when a serving run of the stack spans nodes (`nodes` above 1)"},
    )
    load_balancer_controller: bool = Field(
        False,
        description="Install the AWS Load Balancer Controller (aws layer: its IAM role; cluster layer: the chart),"
        " so a serving run can be reached through an internal Network Load Balancer (`endpoint:"
        " internalLoadBalancer`). Its Service webhook stays off: it takes no Service it is not asked to.",
    )
    # kubernetes-sigs/aws-load-balancer-controller v3.5.0 (11eb202c): helm/aws-load-balancer-controller
    # Chart.yaml 3.5.0 (appVersion v3.5.0), published to https://aws.github.io/eks-charts.
    load_balancer_controller_chart: str = Field(
        "3.5.0", description="`aws-load-balancer-controller` chart version (eks-charts; 3.5.0 runs controller v3.5.0)."
    )
    # kubernetes-sigs/metrics-server tag metrics-server-helm-chart-3.13.1 (842dcc8c, 2026-06-08):
    # charts/metrics-server 3.13.1, metrics-server 0.8.1 (Kubernetes 1.31+), published to
    # https://kubernetes-sigs.github.io/metrics-server/.
    metrics_server_chart: str = Field(
        "3.13.1", description="`metrics-server` chart version (kubernetes-sigs; 3.13.1 runs metrics-server 0.8.1)."
    )
    metrics_server: bool = Field(
        False,
        description="Install metrics-server (the Metrics API: `kubectl top`, HorizontalPodAutoscalers on CPU or"
        " memory), two replicas on system nodes. Off by default: nothing in the platform reads the Metrics API"
        " (Container Insights has its own agent), and an aggregated API that stops answering breaks API discovery.",
    )
    neuron_scheduler: bool = Field(
        False,
        description="Install the Neuron scheduler extension (Neuron stacks): a second kube-scheduler (`my-scheduler`,"
        " EKS Distro at the cluster's Kubernetes minor) that places pods on connected Neuron devices. Required by a"
        " vLLM server taking more than one device but not its whole node, whose pods then name that scheduler.",
    )
    eks_addon_versions: EksAddonVersions = Field(
        default_factory=EksAddonVersions, description="EKS managed add-on versions."
    )
    observability: ObservabilityConfig = Field(
        default_factory=ObservabilityConfig,
        description="CloudWatch observability add-on: which logs it ships and their retention (aws layer).",
    )

    @field_validator(
        "efa_device_plugin_chart",
        "nvidia_device_plugin_chart",
        "neuron_chart",
        "fsx_csi_driver_chart",
        "kueue_chart",
        "lws_chart",
        "load_balancer_controller_chart",
        "metrics_server_chart",
    )
    @classmethod
    def _chart(cls, v: str) -> str:
        if not matches(_CHART_VERSION_RE, v):
            raise Refusal(f"{v!r} is not an exact chart version like 1.2.3 (ranges are not pins)", "invalid")
        return v

    @field_validator("nvidia_device_plugin_chart")
    @classmethod
    def _nvidia(cls, v: str) -> str:
        if v.removeprefix("v") in NVIDIA_MOFED_DEFAULT_ON:
            raise Refusal(
                f"{v} turns MOFED on by default, which clashes with EFA (fixed in 0.19.3); use 0.19.3 or later,"
                " or a version below 0.19.0",
                "invalid",
            )
        return v

    @field_validator("mpi_operator_image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return check_image(v)

    @field_validator("mpi_operator_version")
    @classmethod
    def _mpi(cls, v: str) -> str:
        if not matches(_MPI_OPERATOR_RE, v):
            raise Refusal(
                f"{v!r} is not a v0.8.x release (kubeflow.org/v2beta1 with Kueue support), e.g. v0.8.0", "invalid"
            )
        return v
