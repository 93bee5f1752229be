"""One node-group shape from the stack file to the runs layer, and a run's totals on it.

`facts.nodegroups.NodeGroup` is built from the stack file (config) or read from the lower
stack's JSON (infra.layers); both must give the same value. `placement` multiplies per-node
counts once: its figures are held against AWS's published per-instance counts.
"""

from __future__ import annotations

import pytest

from config.cluster import SystemNodeGroupConfig
from config.nodegroups import DEFAULT_REPAIR_REASONS, NodeGroupConfig
from facts import instances
from facts.names import NODE_GROUP_LABEL, SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup, placement
from infra import layers
from infra.nodegroups import node_repair_args

# (instance, nodes) -> (ranks, devices, EFA devices). Per node, from the EC2 accelerated
# instance pages: trn1.32xlarge 16 Trainium chips (32 NeuronCores), 8 EFA; trn2.48xlarge 16
# Trainium2 chips (128 physical NeuronCores, 64 logical at LNC=2), 16 EFA; p5.48xlarge 8 H100,
# 32 EFA; m6i.2xlarge no accelerator, no EFA.
TOTALS = {
    ("trn1.32xlarge", 4): (128, 64, 32),
    ("trn2.48xlarge", 2): (128, 32, 32),
    ("p5.48xlarge", 3): (24, 24, 96),
    ("m6i.2xlarge", 2): (0, 0, 0),
}


@pytest.mark.parametrize(("itype", "nodes"), sorted(TOTALS))
def test_a_placement_multiplies_the_per_node_counts(itype: str, nodes: int) -> None:
    p = placement(instances.get(itype), nodes)
    assert (p.ranks, p.devices, p.efa_devices) == TOTALS[itype, nodes]
    assert p.nodes == nodes and p.ranks_per_node * nodes == p.ranks


def test_a_serving_replica_counts_only_the_devices_it_takes() -> None:
    p = placement(instances.get("p5.48xlarge"), 1, devices_per_node=2)
    assert (p.devices_per_node, p.devices, p.ranks) == (2, 2, 8)


def group_config(**extra: object) -> NodeGroupConfig:
    return NodeGroupConfig.model_validate(
        {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "maxSize": 6, **extra}
    )


def test_the_stack_file_and_the_layer_json_give_the_same_group() -> None:
    built = group_config(labels={"team": "a"}).node_group("us-west-2d", "1.35.6-20260625", "nodeGroups[0].maxSize")
    r = layers._Reader("dev-aws", "awsLayer", {"g": layers.node_group_output(built)})
    read = r.node_group("g", "trn1")
    assert read is not None and read == built and not r.problems
    assert (read.nodes, read.max_nodes, read.labels["team"], read.labels[NODE_GROUP_LABEL]) == (4, 6, "a", "trn1")
    # Provenance differs (where maxSize was set), the group does not.
    assert read.max_key != built.max_key and "dev-aws" in read.max_key


def test_the_system_group_has_one_shape_too() -> None:
    system = SystemNodeGroupConfig.model_validate({"desiredSize": 3}).node_group(["us-west-2a", "us-west-2b"])
    assert system == NodeGroup(
        SYSTEM_NODE_GROUP, instances.get("m6i.2xlarge"), 3, 5, "us-west-2a,us-west-2b", {NODE_GROUP_LABEL: "system"}
    )
    assert not system.accelerated and system.max_key == "systemNodeGroup.maxSize"
    r = layers._Reader("dev-aws", "awsLayer", {"s": layers.node_group_output(system)})
    assert r.node_group("s", SYSTEM_NODE_GROUP) == system


def test_the_launch_of_a_capacity_block_group_says_what_its_config_says() -> None:
    ng = group_config(
        capacity={
            "type": "capacity-block",
            "reservationId": "cr-0123456789abcdef0",
            "endsAt": "2027-01-10T11:30:00Z",
            "scaleDownMinutesBeforeEnd": 45,
        },
        maxUnavailable=2,
    )
    launch = ng.launch("us-west-2d", "1.35.6-20260625")
    assert launch.group == ng.node_group("us-west-2d", "1.35.6-20260625")
    c = launch.capacity
    assert (c.kind, c.reservation_id, c.targets_reservation, c.new_placement_group) == (
        "capacity-block",
        "cr-0123456789abcdef0",
        True,
        False,
    )
    assert c.scale_down_at is not None and c.scale_down_at.strftime("%H:%M") == "10:45"
    assert (launch.min_nodes, launch.max_unavailable, launch.update_strategy) == (4, 2, "MINIMAL")
    # Repair on by default, replacing nodes on the fatal Neuron errors.
    assert launch.repair.enabled and {r.reason for r in launch.repair.rules} == set(DEFAULT_REPAIR_REASONS["neuron"])
    assert all(r.action == "Replace" for r in launch.repair.rules)


def test_an_on_demand_group_launches_into_a_new_placement_group_and_surges() -> None:
    launch = group_config(nodeRepair={"enabled": False}).launch("us-west-2d", "1.35.6-20260625")
    assert launch.capacity.new_placement_group and not launch.capacity.targets_reservation
    assert launch.update_strategy == "DEFAULT" and not launch.repair.enabled
    assert node_repair_args(launch.repair).enabled is False
