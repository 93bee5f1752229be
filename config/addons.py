"""Cluster add-ons (`addons`): pinned chart and EKS add-on versions."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import Model

_CHART_VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+$")
_EKS_ADDON_VERSION_RE = re.compile(r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")


class EksAddonVersions(Model):
    """Versions of the EKS managed add-ons; null lets EKS install its default for the cluster version."""

    vpc_cni: str | None = Field(None, description="vpc-cni, e.g. v1.20.1-eksbuild.3.")
    coredns: str | None = Field(None, description="coredns.")
    kube_proxy: str | None = Field(None, description="kube-proxy.")
    pod_identity_agent: str | None = Field(None, description="eks-pod-identity-agent.")
    cloudwatch_observability: str | None = Field(None, description="amazon-cloudwatch-observability.")
    node_monitoring_agent: str | None = Field(None, description="eks-node-monitoring-agent.")

    @field_validator("*")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not _EKS_ADDON_VERSION_RE.match(v):
            raise ValueError(f"{v!r} is not an EKS add-on version like v1.20.1-eksbuild.3")
        return v


class AddonsConfig(Model):
    """Cluster add-ons. Helm chart versions are pinned here; bump them deliberately."""

    # https://aws.github.io/eks-charts; v0.5.7 as pinned by terraform-aws-eks-blueprints (patterns/targeted-odcr).
    efa_device_plugin_chart: str = Field("v0.5.7", description="aws-efa-k8s-device-plugin chart version.")
    # https://nvidia.github.io/k8s-device-plugin; 0.17.1 as pinned by terraform-aws-eks-blueprints.
    nvidia_device_plugin_chart: str = Field("0.17.1", description="nvidia-device-plugin chart version.")
    # oci://public.ecr.aws/neuron/neuron-helm-chart; aws-neuron/neuron-helm-charts Chart.yaml.
    neuron_chart: str = Field("1.1.2", description="neuron-helm-chart version.")
    # https://kubernetes-sigs.github.io/aws-fsx-csi-driver (chart 1.11.0).
    fsx_csi_driver_chart: str = Field("1.11.0", description="aws-fsx-csi-driver chart version.")
    # kubeflow/mpi-operator releases; v0.8.0 is the release its README installs.
    mpi_operator_version: str = Field("v0.8.0", description="kubeflow/mpi-operator release (v0.8.x).")
    # oci://registry.k8s.io/kueue/charts/kueue; v0.19.7 is the latest v0.19 patch in kueue's CHANGELOG-0.19.
    kueue_chart: str = Field("0.19.7", description="Kueue chart version (v0.19.x: kueue.x-k8s.io/v1beta2).")
    # https://nvidia.github.io/dcgm-exporter/helm-charts (GPU stacks only).
    dcgm_exporter_chart: str = Field("4.1.1", description="dcgm-exporter chart version (GPU stacks only).")
    neuron_scheduler: bool = Field(True, description="Install the Neuron scheduler extension (Neuron stacks).")
    eks_addon_versions: EksAddonVersions = Field(
        default_factory=EksAddonVersions, description="EKS managed add-on versions."
    )

    @field_validator(
        "efa_device_plugin_chart",
        "nvidia_device_plugin_chart",
        "neuron_chart",
        "fsx_csi_driver_chart",
        "kueue_chart",
        "dcgm_exporter_chart",
    )
    @classmethod
    def _chart(cls, v: str) -> str:
        if not _CHART_VERSION_RE.match(v):
            raise ValueError(f"{v!r} is not an exact chart version like 1.2.3 (ranges are not pins)")
        return v

    @field_validator("mpi_operator_version")
    @classmethod
    def _mpi(cls, v: str) -> str:
        if not re.fullmatch(r"v0\.8\.\d+", v):
            raise ValueError(f"{v!r} is not a v0.8.x release (kubeflow.org/v2beta1 with Kueue support), e.g. v0.8.0")
        return v
