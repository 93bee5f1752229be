"""Accelerated EFA node groups (`nodeGroups`): instance type, AZ, capacity source, repair."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config.aws import problems
from config.base import AZ_RE, DNS_LABEL_RE, KeyProblem, Model, Refusal, check_sizes, did_you_mean, matches
from config.capacity import CapacityConfig
from facts import instances, kubernetes
from facts.names import NODE_GROUP_LABEL, PLATFORM_LABEL_PREFIX, PLATFORM_NODE_LABELS
from facts.nodegroups import LaunchCapacity, NodeGroup, NodeGroupLaunch, NodeRepair, RepairRule

# EKS AMI release versions: <Kubernetes version>-<build date> (awslabs/amazon-eks-ami CHANGELOG).
_RELEASE_RE = re.compile(r"1\.[0-9]{1,3}\.[0-9]{1,3}-20[0-9]{6}", re.ASCII)
_REPAIR_REASON_RE = re.compile(r"[A-Za-z][A-Za-z0-9]{2,99}", re.ASCII)

RepairCondition = Literal[
    "AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady", "StorageReady", "Ready"
]


class RepairOverride(Model):
    """What EKS node auto repair does when the node monitoring agent reports one problem."""

    condition: RepairCondition = Field(description="Node condition set by the EKS node monitoring agent.")
    reason: str = Field(description="Reason of the condition, e.g. NeuronHBMUncorrectableError, NvidiaXID79Error.")
    action: Literal["Replace", "Reboot", "NoAction"] = Field(description="Replace, Reboot or NoAction.")
    wait_minutes: int = Field(10, ge=1, le=1440, description="Minutes the condition must last before repair.")

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if not matches(_REPAIR_REASON_RE, v):
            raise Refusal(f"{v!r} is not a node monitoring agent reason (CamelCase, e.g. NeuronDMAError)", "invalid")
        return v


# Fatal accelerator errors the EKS node monitoring agent reports (aws/eks-node-monitoring-agent
# reasons; EKS user guide, node-health). A node with one of them cannot finish a collective:
# replace it rather than reboot it.
DEFAULT_REPAIR_REASONS: dict[str, tuple[str, ...]] = {
    "neuron": (
        "NeuronDMAError",
        "NeuronHBMUncorrectableError",
        "NeuronNCUncorrectableError",
        "NeuronSRAMUncorrectableError",
    ),
    "nvidia": ("NvidiaDoubleBitError", "NvidiaNVLinkError", "NvidiaXID79Error", "NvidiaXID48Error"),
}


class NodeRepairConfig(Model):
    """EKS managed node group auto repair (on by default for accelerated node groups)."""

    enabled: bool = Field(
        True,
        description="EKS node auto repair: EKS replaces or reboots nodes the node monitoring agent marks unhealthy.",
    )
    max_unhealthy_node_threshold_percentage: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Pause repair when more than this share of the group's nodes is unhealthy, %.",
        json_schema_extra={"x-default": "EKS default (20%)"},
    )
    max_parallel_nodes_repaired_count: int = Field(
        1, ge=1, description="Nodes repaired at once (1: a job loses at most one node at a time to repair)."
    )
    overrides: list[RepairOverride] | None = Field(
        None,
        description="Per-condition actions; default: replace on fatal Neuron/NVIDIA hardware errors.",
        json_schema_extra={"x-default": "replace on fatal Neuron and NVIDIA errors"},
    )

    def repair(self, accelerator: str | None) -> NodeRepair:
        """The settings as the node group component takes them, with the effective overrides."""
        rules = (
            RepairRule(o.condition, o.reason, o.action, o.wait_minutes) for o in self.effective_overrides(accelerator)
        )
        return NodeRepair(
            self.enabled,
            self.max_unhealthy_node_threshold_percentage,
            self.max_parallel_nodes_repaired_count,
            tuple(rules),
        )

    def effective_overrides(self, accelerator: str | None) -> list[RepairOverride]:
        """The configured overrides, or the defaults for the accelerator."""
        if self.overrides is not None:
            return list(self.overrides)
        return [
            RepairOverride.model_validate(
                {"condition": "AcceleratedHardwareReady", "reason": r, "action": "Replace", "waitMinutes": 10}
            )
            for r in DEFAULT_REPAIR_REASONS.get(accelerator or "", ())
        ]


class NodeGroupConfig(Model):
    """One accelerated EFA node group: one instance type, one AZ, one subnet."""

    name: str = Field(description="Node group name, unique: lowercase letters, digits, hyphens (1-36).")
    instance_type: str = Field(
        description="Accelerated instance type from the catalog (`facts/instances.py`): "
        + ", ".join(instances.ACCELERATED)
        + "."
    )
    desired_size: int = Field(description="Nodes to run; 0 scales the group to zero.", ge=0)
    min_size: int | None = Field(
        None, ge=0, description="Autoscaling floor.", json_schema_extra={"x-default": "`desiredSize`"}
    )
    max_size: int | None = Field(
        None,
        ge=0,
        description="Autoscaling ceiling (EKS needs at least 1).",
        json_schema_extra={"x-default": "max(`desiredSize`, 1)"},
    )
    availability_zone: str | None = Field(
        None,
        description="AZ of the nodes: must exist in the region and be the reservation's AZ.",
        json_schema_extra={"x-default": "the VPC's first AZ"},
    )
    capacity: CapacityConfig = Field(default_factory=CapacityConfig, description="Capacity source.")
    placement_group: bool | None = Field(
        None,
        description="On-demand and spot: launch into a new `cluster` placement group (default true, unless"
        " capacity.placementGroupName names an existing one). Reservations and Capacity Blocks use"
        " capacity.placementGroupName instead (their own group, or none).",
        json_schema_extra={"x-default": "`true` for on-demand and spot (unless `capacity.placementGroupName`)"},
    )
    root_volume_size_gib: int = Field(
        500,
        ge=100,
        le=16384,
        alias="rootVolumeSizeGiB",
        description="Encrypted gp3 root volume, GiB (training images are many GB).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra node labels, by Kubernetes label rules; not the platform's own labels, nor the"
        " `kubernetes.io`/`k8s.io` ones the kubelet refuses.",
    )
    max_unavailable: int = Field(1, ge=1, le=100, description="Nodes an update may replace at once (EKS: 1-100).")
    node_repair: NodeRepairConfig = Field(default_factory=NodeRepairConfig, description="EKS node auto repair.")
    release_version: str | None = Field(
        None,
        description="EKS AMI release of the nodes, e.g. 1.35.6-20260625; default: the newest release for the"
        " cluster's Kubernetes version whose Neuron or NVIDIA driver works with every image run on the group.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # The EKS name is `<name>-` and a 26-character unique suffix, at most 63 (infra.cluster).
        if len(v) > 36 or not matches(DNS_LABEL_RE, v):
            raise Refusal(
                f"{v!r} must be lowercase letters, digits and hyphens, starting with a letter (1-36)", "invalid"
            )
        return v

    @field_validator("instance_type")
    @classmethod
    def _type(cls, v: str) -> str:
        if v in instances.NOT_SUPPORTED:
            raise Refusal(f"{v} is not supported yet: {instances.NOT_SUPPORTED[v]}", "not-supported")
        if v not in instances.ACCELERATED:
            hint = did_you_mean(v, instances.ACCELERATED)
            raise Refusal(
                f"unknown instance type {v!r}{hint}; valid: {', '.join(instances.ACCELERATED)}", "not-supported"
            )
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            bad = problems(key, "eks:CreateNodegroup:labels.<key>") + problems(value, "eks:CreateNodegroup:labels.{}")
            if bad:
                raise Refusal(f"label {key}={value}: {'; '.join(bad)} (EKS CreateNodegroup labels)", "invalid")
            bad = [f"key {p}" for p in kubernetes.label_key(key)] + [
                f"value {p}" for p in kubernetes.label_value(value)
            ]
            if bad:
                raise Refusal(f"label {key}={value}: {'; '.join(bad)} (Kubernetes label rules)", "invalid")
            if kubernetes.kubelet_refuses_node_label(key):
                raise Refusal(
                    f"label {key}: the kubernetes.io and k8s.io prefixes are Kubernetes' own; the kubelet refuses to"
                    " start with it in --node-labels (allowed there: "
                    f"{', '.join(kubernetes.KUBELET_LABEL_NAMESPACES)} and the well-known labels it sets itself)",
                    "forbidden",
                )
            if key in PLATFORM_NODE_LABELS or key.startswith(PLATFORM_LABEL_PREFIX):
                raise Refusal(
                    f"label {key}: the platform sets and selects on this label (device plugins, Kueue flavors and runs"
                    f" find their nodes by it); choose a key outside {PLATFORM_LABEL_PREFIX} and"
                    f" {', '.join(k for k in PLATFORM_NODE_LABELS if not k.startswith(PLATFORM_LABEL_PREFIX))}",
                    "forbidden",
                )
        return v

    @field_validator("release_version")
    @classmethod
    def _release(cls, v: str | None) -> str | None:
        if v is not None and not matches(_RELEASE_RE, v):
            raise Refusal(f"{v!r} is not an EKS AMI release version like 1.35.6-20260625", "invalid")
        return v

    @field_validator("availability_zone")
    @classmethod
    def _az(cls, v: str | None) -> str | None:
        if v is not None and not matches(AZ_RE, v):
            raise Refusal(f"{v!r} is not an AZ name like us-west-2d", "invalid")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> NodeGroupConfig:
        check_sizes(self.desired_size, self.min_size, self.max_size)
        if self.max_unavailable > self.max:
            # EKS: "max-unavailable must be within the range 1 and max size of the node group".
            derived = (
                ""
                if self.max_size is not None
                else f" (maxSize is not set: it follows desiredSize {self.desired_size})"
            )
            raise KeyProblem(
                "maxUnavailable",
                f"{self.max_unavailable} is above maxSize {self.max}{derived}; EKS refuses an update config whose"
                " maxUnavailable exceeds the group's maxSize: set maxSize (a group scaled to 0 keeps its size"
                f" there), or lower maxUnavailable to at most {self.max}",
                "conflict",
            )
        if self.capacity.targets_reservation and self.placement_group:
            raise KeyProblem(
                "placementGroup",
                f"a {self.capacity.type} is usable only in the placement group it was made in, not a new one: set"
                " capacity.placementGroupName to that group, or leave placementGroup out if it was made without one",
                "conflict",
            )
        if self.placement_group and self.capacity.placement_group_name is not None:
            raise KeyProblem(
                "placementGroup",
                f"true asks for a new placement group, but capacity.placementGroupName names an existing one"
                f" ({self.capacity.placement_group_name}); leave placementGroup out to launch into that one",
                "conflict",
            )
        return self

    @property
    def creates_placement_group(self) -> bool:
        """A new `cluster` placement group: on-demand and spot only (default on), unless they
        launch into an existing one (capacity.placementGroupName)."""
        return (
            not self.capacity.targets_reservation
            and self.placement_group is not False
            and self.capacity.placement_group_name is None
        )

    @property
    def update_strategy(self) -> str:
        """EKS node group update strategy (NodegroupUpdateConfig.updateStrategy). DEFAULT launches new
        nodes before it terminates old ones; a group sized to its whole reservation or Capacity
        Block has no room for them, so reserved groups use MINIMAL, which terminates first."""
        return "MINIMAL" if self.capacity.targets_reservation else "DEFAULT"

    @property
    def instance(self) -> instances.InstanceType:
        return instances.ACCELERATED[self.instance_type]

    @property
    def min(self) -> int:
        return self.min_size if self.min_size is not None else self.desired_size

    @property
    def max(self) -> int:
        return self.max_size if self.max_size is not None else max(1, self.desired_size)

    @property
    def node_labels(self) -> dict[str, str]:
        """Labels of the group's nodes: hardware-derived ones, the node-group name, then extras."""
        return {**self.instance.labels, NODE_GROUP_LABEL: self.name, **self.labels}

    def node_group(self, availability_zone: str, release_version: str = "", max_key: str = "") -> NodeGroup:
        """The group as every layer sees it, in `availability_zone` on AMI `release_version`;
        `max_key` names where its maxSize is set, for messages."""
        return NodeGroup(
            name=self.name,
            instance=self.instance,
            nodes=self.desired_size,
            max_nodes=self.max,
            availability_zone=availability_zone,
            labels=self.node_labels,
            release_version=release_version,
            max_key=max_key,
        )

    def launch(
        self,
        availability_zone: str,
        release_version: str,
        max_key: str = "",
        now: dt.datetime | None = None,
        checkpoint_write_seconds: float | None = None,
    ) -> NodeGroupLaunch:
        """The group with what the aws layer needs to launch it (infra.nodegroups): a Capacity Block
        group scales up at its block's start while that lies ahead of `now` (Auto Scaling refuses a
        scheduled action in the past), and down before its end with a margin for the last checkpoint."""
        c = self.capacity
        ahead = c.starts_at is not None and (now is None or c.starts_at > now)
        capacity = LaunchCapacity(
            c.type,
            c.reservation_id,
            c.reservation_group_arn,
            c.placement_group_name,
            new_placement_group=self.creates_placement_group,
            scale_down_at=c.own_scale_down_at(checkpoint_write_seconds),
            scale_up_at=c.starts_at if ahead else None,
        )
        return NodeGroupLaunch(
            group=self.node_group(availability_zone, release_version, max_key),
            min_nodes=self.min,
            max_unavailable=self.max_unavailable,
            update_strategy=self.update_strategy,
            root_volume_size_gib=self.root_volume_size_gib,
            capacity=capacity,
            repair=self.node_repair.repair(self.instance.accelerator),
        )
