"""Accelerated EFA node groups: our own launch template on an EKS managed node group.

pulumi-eks's `enable_efa_support` refuses a custom launch template and has no
capacity-reservation input (pulumi/pulumi-eks `nodejs/eks/nodes/nodegroup.ts`), so the
launch template is built here, with everything derived from the instance catalog.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from facts import instances
from facts.names import component_type
from facts.nodegroups import NodeGroupLaunch, NodeRepair
from infra.cluster import REPLACED_FIRST, Cluster, node_group_name_prefix, node_launch_template_args
from infra.context import StackContext
from infra.network import Network

EKS_CAPACITY_TYPE = {
    "on-demand": "ON_DEMAND",
    "reservation": "ON_DEMAND",
    "capacity-block": "CAPACITY_BLOCK",
    "spot": "SPOT",
}


@dataclass(frozen=True)
class InterfaceSlot:
    """One network interface of the launch template."""

    network_card_index: int
    device_index: int
    interface_type: str
    """`interface` (ENA, takes an IP) or `efa-only` (EFA device, takes no IP)."""


def efa_interface_layout(instance: instances.InstanceType) -> list[InterfaceSlot]:
    """The EC2 guide's layout for multi-card EFA instances ("Maximize network bandwidth on
    Amazon EC2 instances with multiple network cards"): the primary ENA interface on card 0
    device 0; an EFA-only interface on card 0 device 1 if card 0 supports EFA (not on p6-b300);
    an EFA-only interface at device 0 of every other card. That is exactly one EFA device per
    EFA-capable card, and EFA-only interfaces take no IP address, so a 32-card p5 uses one
    subnet IP per node, not 32.
    """
    if not instance.efa:
        raise ValueError(f"{instance.name} does not support EFA")
    slots = [InterfaceSlot(0, 0, "interface")]
    slots += [InterfaceSlot(card, 1 if card == 0 else 0, "efa-only") for card in instance.efa_cards]
    return slots


def nodeadm_user_data(instance: instances.InstanceType) -> str:
    """AL2023 nodeadm config (MIME part) that stripes the NVMe instance store as RAID0 and
    mounts it for containerd and kubelet, so image layers and scratch data use the fast
    local disks. EKS merges this part with its own bootstrap config."""
    boundary = "==LLMTRAININGEKS=="
    strategy = "RAID0" if instance.nvme_disks else "None"
    node_config = (
        "---\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        "  instance:\n"
        "    localStorage:\n"
        f"      strategy: {strategy}\n"
    )
    mime = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{boundary}"\n\n'
        f"--{boundary}\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"{node_config}\n"
        f"--{boundary}--\n"
    )
    return base64.b64encode(mime.encode()).decode()


def node_repair_args(repair: NodeRepair) -> aws.eks.NodeGroupNodeRepairConfigArgs:
    """EKS node auto repair: on by default, replacing nodes with fatal accelerator errors."""
    if not repair.enabled:
        return aws.eks.NodeGroupNodeRepairConfigArgs(enabled=False)
    return aws.eks.NodeGroupNodeRepairConfigArgs(
        enabled=True,
        max_unhealthy_node_threshold_percentage=repair.max_unhealthy_percentage,
        max_parallel_nodes_repaired_count=repair.max_parallel,
        node_repair_config_overrides=[
            aws.eks.NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs(
                node_monitoring_condition=o.condition,
                node_unhealthy_reason=o.reason,
                repair_action=o.action,
                min_repair_wait_time_mins=o.wait_minutes,
            )
            for o in repair.rules
        ]
        or None,
    )


class AcceleratedNodeGroup(pulumi.ComponentResource):
    """One EFA node group: security group, placement group, launch template and managed node group."""

    security_group_id: pulumi.Output[str]
    node_group: aws.eks.NodeGroup

    def __init__(
        self,
        name: str,
        launch: NodeGroupLaunch,
        ctx: StackContext,
        network: Network,
        cluster: Cluster,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "AcceleratedNodeGroup"), name, None, opts)
        ng, capacity = launch.group, launch.capacity
        self._name = name
        self._full_name = f"{ctx.cluster_name}-{ng.name}"
        self._tags = ctx.owned_tags
        self.launch = launch
        self.availability_zone = ng.availability_zone
        sg, efa_rules = self._efa_security_group(network)
        self.security_group_id = sg.id
        lt = self._launch_template(launch, [cluster.security_group_id, sg.id])
        self.node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=cluster.name,
            node_group_name_prefix=node_group_name_prefix(ng.name),
            node_role_arn=cluster.node_role.arn,
            subnet_ids=[network.private_subnet_ids[ng.availability_zone]],
            instance_types=[ng.instance.name],
            ami_type=ng.instance.ami_type,
            # Follows the control plane: raising cluster.kubernetesVersion upgrades the cluster
            # first (the node group depends on it), then rolls these nodes maxUnavailable at a time.
            version=cluster.kubernetes_version,
            # The AMI release, pinned: its kernel driver must fit the images' runtimes (config.amis);
            # without it EKS takes its newest release, whose Neuron driver may refuse the images'
            # runtime. Allowed with our launch template, which names no AMI (EKS CreateNodegroup).
            release_version=ng.release_version,
            capacity_type=EKS_CAPACITY_TYPE[capacity.kind],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=ng.nodes, min_size=launch.min_nodes, max_size=ng.max_nodes
            ),
            # Reserved groups have no spare capacity to surge into: MINIMAL replaces nodes in place.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(
                max_unavailable=launch.max_unavailable, update_strategy=launch.update_strategy
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=lt.id, version=lt.latest_version.apply(str)),
            labels=dict(ng.labels),
            node_repair_config=node_repair_args(launch.repair),
            taints=[
                aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.eks_effect) for t in ng.instance.taints
            ],
            # Nodes start only once EFA traffic between them is allowed. A new group before the old
            # goes (infra.cluster.REPLACED_FIRST).
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*cluster.node_policy_attachments, *efa_rules], **REPLACED_FIRST
            ),
        )
        if capacity.scale_up_at is not None:
            self._scale_up_at_block_start(capacity.scale_up_at, ng.nodes, launch.min_nodes)
        if capacity.scale_down_at is not None:
            self._scale_down_before_block_ends(capacity.scale_down_at)
        self.register_outputs({"nodeGroup": self.node_group.node_group_name, "securityGroupId": sg.id})

    def _asg_name(self) -> pulumi.Output[str]:
        return self.node_group.resources.apply(lambda rs: rs[0].autoscaling_groups[0].name)

    def _scale_up_at_block_start(self, when: dt.datetime, desired: int, minimum: int) -> None:
        """A block's group gets its nodes at the block's start: a scheduled action that aligns to the
        reservation's start time (EKS user guide, capacity-blocks-mng). The previous block's end left
        the Auto Scaling group at 0, and an unchanged desiredSize sends EKS no scaling update, so
        without it the next block would sit idle; a new block moves the action to its own start."""
        aws.autoscaling.Schedule(
            f"{self._name}-capacity-block-start",
            scheduled_action_name=f"{self._full_name}-capacity-block-start",
            autoscaling_group_name=self._asg_name(),
            start_time=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            desired_capacity=desired,
            min_size=minimum,
            max_size=-1,  # leave the maximum as it is
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _scale_down_before_block_ends(self, when: dt.datetime) -> None:
        """A Capacity Block's instances are reclaimed when it ends; EC2 starts shutting them down 30
        minutes before, and EKS's own action scales the group to 0 at 40 (EKS user guide,
        capacity-blocks-mng). This action exists only when the group needs to stop earlier than
        EKS's: its margin leaves the runs' last checkpoint time to be written (config.capacity)."""
        aws.autoscaling.Schedule(
            f"{self._name}-capacity-block-end",
            scheduled_action_name=f"{self._full_name}-capacity-block-end",
            autoscaling_group_name=self._asg_name(),
            start_time=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            desired_capacity=0,
            min_size=0,
            max_size=-1,  # leave the maximum as it is
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _efa_security_group(self, network: Network) -> tuple[aws.ec2.SecurityGroup, list[pulumi.Resource]]:
        """EFA's OS-bypass traffic needs all traffic allowed to and from the group itself, in
        both directions; an egress rule to 0.0.0.0/0 does not cover it ("Error 4126")."""
        name, full_name, child = self._name, self._full_name, pulumi.ResourceOptions(parent=self)
        sg = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=network.vpc_id,
            description=f"EFA traffic between {full_name} nodes",
            tags={"Name": f"{full_name}-efa"},
            opts=child,
        )
        ingress = aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-in",
            security_group_id=sg.id,
            referenced_security_group_id=sg.id,
            ip_protocol="-1",
            description="EFA: all traffic from nodes of this group",
            opts=child,
        )
        egress = aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out",
            security_group_id=sg.id,
            referenced_security_group_id=sg.id,
            ip_protocol="-1",
            description="EFA: all traffic to nodes of this group",
            opts=child,
        )
        return sg, [ingress, egress]

    def _launch_template(self, launch: NodeGroupLaunch, groups: list[pulumi.Input[str]]) -> aws.ec2.LaunchTemplate:
        """One EFA interface per network card, the placement group, the capacity target, RAID0 NVMe."""
        name, full_name, child = self._name, self._full_name, pulumi.ResourceOptions(parent=self)
        instance, capacity = launch.group.instance, launch.capacity
        # A new cluster placement group for on-demand and spot, or an existing one they name; a
        # reservation or Capacity Block launches only in the group it was made in (its
        # PlacementGroupArn), or in none (EC2 user guide, placement groups and capacity
        # reservations; preflight compares the two).
        placement = None
        if capacity.new_placement_group:
            pg = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags={"Name": full_name}, opts=child)
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=pg.name)
        elif capacity.placement_group_name:
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=capacity.placement_group_name)
        interfaces = [
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=slot.network_card_index,
                device_index=slot.device_index,
                interface_type=slot.interface_type,
                security_groups=groups,
                delete_on_termination="true",
                associate_public_ip_address="false" if slot.interface_type == "interface" else None,
                description=f"{full_name} card {slot.network_card_index} {slot.interface_type}",
            )
            for slot in efa_interface_layout(instance)
        ]
        reservation = None
        if capacity.targets_reservation:
            target = aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs
            reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=target(
                    capacity_reservation_id=capacity.reservation_id,
                    capacity_reservation_resource_group_arn=capacity.reservation_group_arn,
                )
            )
        market = None
        if capacity.kind == "capacity-block":
            market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        return aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"{full_name}: {instance.name}, {instance.efa_interfaces} EFA interfaces",
            network_interfaces=interfaces,
            placement=placement,
            capacity_reservation_specification=reservation,
            instance_market_options=market,
            user_data=nodeadm_user_data(instance),
            **node_launch_template_args(
                name=full_name, root_volume_size_gib=launch.root_volume_size_gib, tags=self._tags
            ),
            opts=child,
        )
