"""Rules of the cluster's add-ons: an EKS add-on version for the cluster's Kubernetes minor; an
EFA device plugin chart that counts the node groups' devices right."""

from __future__ import annotations

from pydantic.alias_generators import to_camel

from config.addons import EFA_PLUGIN_FIRST_CHART_FOR, chart_version
from config.problems import problem
from config.stack import StackConfig
from facts import eks_addons


def eks_addon_versions_known(cfg: StackConfig) -> list[str]:
    """Every EKS add-on has a version for the cluster's minor: pinned in facts/eks_addons.py, or
    named in the stack. Never EKS's moving default (looked up at each preview, it changed reviewed
    plans and upgraded add-ons unasked)."""
    if cfg.layer not in ("all", "aws"):
        return []
    minor = cfg.cluster.kubernetes_version
    fields = {addon: field for field, addon in eks_addons.ADDON_KEYS.items()}
    return [
        problem(
            f"addons.eksAddonVersions.{to_camel(fields[addon])}",
            "required",
            f"no version of {addon} is recorded for Kubernetes {minor} (facts/eks_addons.py); name one: {ask}",
            hint=ask,
        )
        for addon, version in cfg.addons.eks_addon_versions.resolved(minor).items()
        if version is None
        for ask in [
            f"aws eks describe-addon-versions --addon-name {addon} --kubernetes-version {minor}"
            " --query 'addons[0].addonVersions[0].addonVersion'"
        ]
    ]


def efa_plugin_counts_devices(cfg: StackConfig) -> list[str]:
    """The EFA device plugin chart is one whose image counts the devices of every EFA node
    group's type right (EFA_PLUGIN_FIRST_CHART_FOR, from the chart's history)."""
    have = cfg.addons.efa_device_plugin_chart
    out: list[str] = []
    for ng in cfg.node_groups:
        first = EFA_PLUGIN_FIRST_CHART_FOR.get(ng.instance_type)
        if first is not None and chart_version(have) < chart_version(first):
            out.append(
                problem(
                    "addons.efaDevicePluginChart",
                    "conflict",
                    f"{have} runs a device plugin image that counts the NVLink controllers of {ng.instance_type}"
                    f" (nodeGroups {ng.name}) as EFA devices, and pods get them as such; use {first} or later"
                    " (its image is v0.5.10+)",
                    value=repr(have),
                    allowed=f"{first} or later",
                )
            )
    return out
