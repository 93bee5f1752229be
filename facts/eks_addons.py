"""EKS managed add-on versions and the EKS Distro kube-scheduler, per Kubernetes minor: pinned here,
bumped on purpose, never looked up at deploy.

Why pinned and not EKS's default looked up at every preview (the old way): the default moves under
a reviewed plan (a preview approved on Monday deploys another version on Tuesday), drift checks
report it as a change nobody made, and an update upgrades add-ons nobody asked to upgrade. A
version kept once chosen (`ignore_changes`) would not move with a Kubernetes upgrade either, and
kube-proxy and CoreDNS must. So each minor names its versions, and a Kubernetes upgrade moves the
add-ons to the next minor's row in the same reviewed change.

Where each version comes from (tests/upstream/eks-addon-versions-2026-11.yaml): the EKS user guide's
version tables for kube-proxy and CoreDNS (the latest EKS add-on build per minor); for the others,
which EKS does not tabulate per minor, `aws eks describe-addon-versions` results recorded with their
minor and date. A cell no source records is None: a stack on that minor must name the version
itself (`addons.eksAddonVersions.<addon>`, config.checks), so nothing falls back to a moving default.
"""

from __future__ import annotations

ADDON_KEYS = {
    "vpc_cni": "vpc-cni",
    "coredns": "coredns",
    "kube_proxy": "kube-proxy",
    "pod_identity_agent": "eks-pod-identity-agent",
    "cloudwatch_observability": "amazon-cloudwatch-observability",
    "node_monitoring_agent": "eks-node-monitoring-agent",
}
"""Config field (`addons.eksAddonVersions`) -> EKS add-on name."""

ADDON_VERSIONS: dict[str, dict[str, str | None]] = {
    "1.34": {
        "vpc-cni": "v1.22.4-eksbuild.3",
        "coredns": "v1.13.2-eksbuild.11",
        "kube-proxy": "v1.34.6-eksbuild.13",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
        "amazon-cloudwatch-observability": "v6.4.0-eksbuild.1",
        "eks-node-monitoring-agent": None,
    },
    "1.35": {
        "vpc-cni": "v1.22.4-eksbuild.3",
        "coredns": "v1.14.3-eksbuild.3",
        "kube-proxy": "v1.35.3-eksbuild.13",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
        "amazon-cloudwatch-observability": "v6.4.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.6.4-eksbuild.1",
    },
    "1.36": {
        "vpc-cni": None,
        "coredns": "v1.14.3-eksbuild.3",
        "kube-proxy": "v1.36.0-eksbuild.14",
        "eks-pod-identity-agent": None,
        "amazon-cloudwatch-observability": "v6.4.0-eksbuild.1",
        "eks-node-monitoring-agent": None,
    },
}
"""Kubernetes minor -> EKS add-on -> version (None: no recorded source; the stack names it)."""

CLOUDWATCH_CHART_VERSION = "6.4.0"
"""The aws-observability/helm-charts `amazon-cloudwatch-observability` chart an add-on version
vX.Y.Z-eksbuild.N runs (X.Y.Z): its values are what the add-on's configuration overrides."""

KUBE_SCHEDULER_REPOSITORY = "public.ecr.aws/eks-distro/kubernetes/kube-scheduler"
"""Where the Neuron chart (1.1.2) takes its second kube-scheduler from (EKS Distro)."""
KUBE_SCHEDULER_TAGS = {
    "1.34": "v1.34.4-eks-1-34-16",
    "1.35": "v1.35.9-eks-1-35-16",
    "1.36": "v1.36.2-eks-1-36-6",
}
"""Kubernetes minor -> EKS Distro kube-scheduler tag (the release manifests of aws/eks-distro)."""


def addon_version(minor: str, addon: str) -> str | None:
    """The pinned version of an EKS add-on on a Kubernetes minor, or None when none is recorded."""
    return ADDON_VERSIONS.get(minor, {}).get(addon)


def chart_version_of(addon_version_: str) -> str:
    """`v6.4.0-eksbuild.1` -> `6.4.0`: the chart release an add-on version is built from."""
    return addon_version_.removeprefix("v").split("-", 1)[0]
