"""The foundation as planned for every example stack: network, control plane, EFA node groups."""

from __future__ import annotations

import ipaddress

import boto3
import pytest
from moto import mock_aws

import config
from facts import instances as catalog
from facts import names
from infra import network, nodegroups
from tests import upstream
from tests.conftest import MINIMAL, by_urn, resources, run_plan, stack_plan, stack_values

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def _cfg(stack: str) -> config.StackConfig:
    return config.parse(config.from_stack_values(stack_values(stack)))


def _accelerated(plan: dict) -> list[dict]:
    return [r for r in resources(plan, NODE_GROUP) if r["inputs"]["labels"]["llm-training-eks/node-group"] != "system"]


def _lt_of(plan: dict, ng: dict) -> dict:
    urns = by_urn(plan)
    lts = [urns[d] for d in ng["dependencies"] if urns.get(d, {}).get("type") == LT]
    assert len(lts) == 1
    assert ng["inputs"]["launchTemplate"]["id"] == lts[0]["id"]
    return lts[0]


def test_every_accelerated_node_group_has_one_efa_per_card_in_one_subnet_of_its_az(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    cfg = _cfg(example_stack)
    subnets = {r["id"]: r for r in resources(plan, "aws:ec2/subnet:Subnet")}
    groups = {g["inputs"]["labels"]["llm-training-eks/node-group"]: g for g in _accelerated(plan)}
    assert sorted(groups) == sorted(ng.name for ng in cfg.node_groups)
    for ng_cfg in cfg.node_groups:
        ng = groups[ng_cfg.name]
        it = catalog.ACCELERATED[ng_cfg.instance_type]
        assert ng["inputs"]["instanceTypes"] == [it.name]
        assert ng["inputs"]["amiType"] == it.ami_type
        # one subnet, private, in the configured AZ (an existing VPC's, as configured)
        (subnet_id,) = ng["inputs"]["subnetIds"]
        if cfg.network.existing:
            assert subnet_id == cfg.network.private_subnet_ids[cfg.node_group_az(ng_cfg)]
        else:
            subnet = subnets[subnet_id]
            assert subnet["inputs"]["availabilityZone"] == cfg.node_group_az(ng_cfg)
            assert "kubernetes.io/role/internal-elb" in subnet["inputs"]["tags"]

        lt = _lt_of(plan, ng)["inputs"]
        nics = lt["networkInterfaces"]
        efa = [n for n in nics if n["interfaceType"] in ("efa", "efa-only")]
        assert sorted(n["networkCardIndex"] for n in efa) == list(it.efa_cards)
        assert len(efa) == it.efa_interfaces
        assert all("subnetId" not in n for n in nics)  # EKS places interfaces in the node group's subnet
        assert all(len(n["securityGroups"]) == 2 for n in nics)
        assert "vpcSecurityGroupIds" not in lt  # groups go on each interface when interfaces are listed
        md = lt["metadataOptions"]
        assert (md["httpTokens"], md["httpPutResponseHopLimit"]) == ("required", 1)
        (root,) = lt["blockDeviceMappings"]
        assert root["ebs"]["encrypted"] == "true" and root["ebs"]["volumeType"] == "gp3"
        assert root["ebs"]["volumeSize"] >= 500

        target = lt.get("capacityReservationSpecification", {}).get("capacityReservationTarget", {})
        if ng_cfg.capacity.reservation_group_arn:
            assert target == {"capacityReservationResourceGroupArn": ng_cfg.capacity.reservation_group_arn}
        elif ng_cfg.capacity.targets_reservation:
            assert target == {"capacityReservationId": ng_cfg.capacity.reservation_id}
        else:
            assert not target
        market = lt.get("instanceMarketOptions", {}).get("marketType")
        assert (market == "capacity-block") == (ng_cfg.capacity.type == "capacity-block")
        assert ng["inputs"]["capacityType"] == nodegroups.EKS_CAPACITY_TYPE[ng_cfg.capacity.type]
        assert ("placement" in lt) == (ng_cfg.creates_placement_group or bool(ng_cfg.capacity.placement_group_name))

        assert ng["inputs"]["taints"] == [{"key": it.device_resource, "value": "true", "effect": "NO_SCHEDULE"}]
        assert ng["inputs"]["labels"][names.EFA_LABEL] == "true"
        assert (ng["inputs"]["labels"].get("nvidia.com/gpu.present") == "true") == (it.accelerator == "nvidia")


def test_efa_security_group_allows_all_traffic_to_and_from_itself(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    sgs = {r["id"]: r for r in resources(plan, "aws:ec2/securityGroup:SecurityGroup")}
    ingress = resources(plan, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    egress = resources(plan, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
    efa_sgs = [sg for sg in sgs.values() if sg["inputs"]["description"].startswith("EFA")]
    assert len(efa_sgs) == len(_cfg(example_stack).node_groups)
    for sg in efa_sgs:
        for rules in (ingress, egress):
            mine = [
                r["inputs"]
                for r in rules
                if r["inputs"]["securityGroupId"] == sg["id"]
                and r["inputs"].get("referencedSecurityGroupId") == sg["id"]
            ]
            assert [(r["ipProtocol"], bool(r["description"])) for r in mine] == [("-1", True)]


def test_control_plane_is_private_encrypted_and_audited(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    (eks,) = resources(plan, "eks:index:Cluster")
    i = eks["inputs"]
    assert i["endpointPrivateAccess"] is True
    assert i["endpointPublicAccess"] is False or "0.0.0.0/0" not in i.get("publicAccessCidrs", [])
    assert set(i["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    (key,) = [k for k in resources(plan, "aws:kms/key:Key") if "EKS secrets" in k["inputs"]["description"]]
    assert key["inputs"]["enableKeyRotation"] is True
    assert key["protect"] is True
    assert i["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    assert key["urn"] in eks["dependencies"]
    assert i["authenticationMode"] == "API" and i["createOidcProvider"] is True
    assert i["skipDefaultNodeGroup"] is True
    assert i["version"] == _cfg(example_stack).cluster.kubernetes_version


def test_system_node_group_spans_every_az(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    (system,) = [
        r for r in resources(plan, NODE_GROUP) if r["inputs"]["labels"]["llm-training-eks/node-group"] == "system"
    ]
    assert len(system["inputs"]["subnetIds"]) == len(_cfg(example_stack).availability_zones) >= 2
    lt = _lt_of(plan, system)["inputs"]
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"


def test_public_endpoint_only_for_listed_cidrs_and_admins_get_access_entries() -> None:
    values = dict(
        MINIMAL,
        **{
            "llm-training-eks:cluster": {
                "publicAccessCidrs": ["203.0.113.0/24"],
                "adminPrincipalArns": ["arn:aws:iam::123456789012:role/platform-admin"],
            }
        },
    )
    plan = run_plan(values)
    (eks,) = resources(plan, "eks:index:Cluster")
    i = eks["inputs"]
    assert i["endpointPublicAccess"] is True and i["publicAccessCidrs"] == ["203.0.113.0/24"]
    # The project's own entries, keyed by principal (not pulumi-eks's, keyed by position).
    assert "accessEntries" not in i
    (entry,) = resources(plan, "aws:eks/accessEntry:AccessEntry")
    (assoc,) = resources(plan, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert entry["inputs"]["principalArn"] == "arn:aws:iam::123456789012:role/platform-admin"
    assert entry["name"] == "cluster-admin-123456789012-role-platform-admin"
    assert assoc["inputs"]["policyArn"].endswith("AmazonEKSClusterAdminPolicy")


def test_world_open_endpoint_only_on_purpose() -> None:
    values = dict(
        MINIMAL,
        **{"llm-training-eks:cluster": {"publicAccessCidrs": ["0.0.0.0/0"], "allowPublicAccessFromAnywhere": True}},
    )
    (eks,) = resources(run_plan(values), "eks:index:Cluster")
    assert eks["inputs"]["publicAccessCidrs"] == ["0.0.0.0/0"]


def test_protection_can_be_turned_off_for_throwaway_stacks() -> None:
    values = dict(MINIMAL, **{"llm-training-eks:protectStatefulResources": False})
    assert not any(r["protect"] for r in run_plan(values)["resources"])


@pytest.mark.parametrize(("nat", "expected"), [("single", 1), ("per-az", 3)])
def test_nat_gateways(nat: str, expected: int) -> None:
    azs = ["us-west-2d", "us-west-2a", "us-west-2b"]
    values = dict(MINIMAL, **{"llm-training-eks:network": {"natGateways": nat, "availabilityZones": azs}})
    plan = run_plan(values)
    assert len(resources(plan, "aws:ec2/natGateway:NatGateway")) == expected
    (endpoint,) = resources(plan, "aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint["inputs"]["serviceName"] == "com.amazonaws.us-west-2.s3"
    assert len(endpoint["inputs"]["routeTableIds"]) == 3


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "10.20.0.0/18", "172.16.0.0/20"])
def test_subnet_plan_is_disjoint_and_inside_the_vpc(cidr: str) -> None:
    azs = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
    plan = network.subnet_plan(cidr, azs)
    vpc = ipaddress.IPv4Network(cidr)
    nets = [ipaddress.IPv4Network(c) for p in plan for c in (p.private_cidr, p.public_cidr)]
    assert all(n.subnet_of(vpc) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    assert ipaddress.IPv4Network(plan[0].private_cidr).num_addresses == vpc.num_addresses // 8


def test_efa_layout_follows_the_ec2_guide() -> None:
    slots = nodegroups.efa_interface_layout(catalog.ACCELERATED["p5.48xlarge"])
    assert slots[0] == nodegroups.InterfaceSlot(0, 0, "interface")
    assert slots[1] == nodegroups.InterfaceSlot(0, 1, "efa-only")
    assert all(s.device_index == 0 and s.interface_type == "efa-only" for s in slots[2:])
    assert len([s for s in slots if s.interface_type == "efa-only"]) == 32
    with pytest.raises(ValueError, match="EFA"):
        nodegroups.efa_interface_layout(catalog.GENERAL_PURPOSE["m6i.2xlarge"])


@pytest.mark.parametrize("name", sorted(catalog.ACCELERATED))
def test_efa_layout_puts_one_efa_device_on_every_efa_card(name: str) -> None:
    """The guide's rule per card (tests/upstream/aws-ec2-efa-multi-card-2026-11.yaml) against
    each card's interface types in AWS's data: p6-b300's ENA-only card 0 gets no EFA device."""
    rule = upstream.facts("aws-ec2-efa-multi-card-2026-11")
    it = catalog.ACCELERATED[name]
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        (ref,) = ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
    cards = {c["NetworkCardIndex"]: c["InterfaceTypes"] for c in ref["NetworkInfo"]["NetworkCards"]}
    slots = nodegroups.efa_interface_layout(it)
    primary = {k: rule["primary"][k] for k in ("network_card_index", "device_index", "interface_type")}
    assert slots[0] == nodegroups.InterfaceSlot(**primary)
    for s in slots[1:]:
        want = rule["card0_when_it_supports_efa"] if s.network_card_index == 0 else rule["other_cards"]
        assert (s.device_index, s.interface_type) == (want["device_index"], want["interface_type"])
        assert s.interface_type in cards[s.network_card_index]
    efa_capable = sorted(i for i, types in cards.items() if "efa-only" in types)
    assert [s.network_card_index for s in slots[1:]] == efa_capable
    assert len(slots) - 1 == ref["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"]


def test_nodeadm_user_data_asks_for_raid0() -> None:
    import base64

    text = base64.b64decode(nodegroups.nodeadm_user_data(catalog.ACCELERATED["trn1.32xlarge"])).decode()
    assert "application/node.eks.aws" in text and "strategy: RAID0" in text


def _repair(values: dict) -> dict:
    (ng,) = _accelerated(run_plan(values))
    return ng["inputs"]["nodeRepairConfig"]


@pytest.mark.parametrize(
    ("instance_type", "reason"), [("trn1.32xlarge", "NeuronHBMUncorrectableError"), ("p5.48xlarge", "NvidiaXID79Error")]
)
def test_node_repair_replaces_nodes_with_fatal_accelerator_errors_by_default(instance_type: str, reason: str) -> None:
    values = {
        **MINIMAL,
        "llm-training-eks:nodeGroups": [{**MINIMAL["llm-training-eks:nodeGroups"][0], "instanceType": instance_type}],
    }
    repair = _repair(values)
    assert repair["enabled"] is True and repair["maxParallelNodesRepairedCount"] == 1
    overrides = {o["nodeUnhealthyReason"]: o for o in repair["nodeRepairConfigOverrides"]}
    assert overrides[reason]["repairAction"] == "Replace"
    assert overrides[reason]["nodeMonitoringCondition"] == "AcceleratedHardwareReady"
    other = "Nvidia" if instance_type.startswith("trn") else "Neuron"
    assert not any(r.startswith(other) for r in overrides)


def test_node_repair_overrides_and_switch_come_from_config() -> None:
    ng = MINIMAL["llm-training-eks:nodeGroups"][0]
    custom = {
        "overrides": [
            {"condition": "NetworkingReady", "reason": "IPAMDNotReady", "action": "Reboot", "waitMinutes": 30}
        ],
        "maxUnhealthyNodeThresholdPercentage": 50,
    }
    repair = _repair({**MINIMAL, "llm-training-eks:nodeGroups": [{**ng, "nodeRepair": custom}]})
    assert repair["maxUnhealthyNodeThresholdPercentage"] == 50
    assert repair["nodeRepairConfigOverrides"] == [
        {
            "nodeMonitoringCondition": "NetworkingReady",
            "nodeUnhealthyReason": "IPAMDNotReady",
            "repairAction": "Reboot",
            "minRepairWaitTimeMins": 30,
        }
    ]
    off = _repair({**MINIMAL, "llm-training-eks:nodeGroups": [{**ng, "nodeRepair": {"enabled": False}}]})
    assert off == {"enabled": False}


def test_flow_logs_record_rejected_traffic_with_a_role_scoped_to_its_log_group() -> None:
    import json

    plan = run_plan(MINIMAL)
    (flow,) = resources(plan, "aws:ec2/flowLog:FlowLog")
    assert flow["inputs"]["trafficType"] == "REJECT" and flow["inputs"]["logDestinationType"] == "cloud-watch-logs"
    (policy,) = [r for r in resources(plan, "aws:iam/rolePolicy:RolePolicy") if r["name"] == "network-flow-logs"]
    statement = json.loads(policy["inputs"]["policy"])["Statement"]
    assert all(not r.endswith("*") or r.endswith(":*") for s in statement for r in s["Resource"])
    off = run_plan({**MINIMAL, "llm-training-eks:network": {**MINIMAL["llm-training-eks:network"], "flowLogs": False}})
    assert not resources(off, "aws:ec2/flowLog:FlowLog")


def test_node_groups_follow_the_control_plane_version(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    version = _cfg(example_stack).cluster.kubernetes_version
    assert {g["inputs"]["version"] for g in resources(plan, NODE_GROUP)} == {version}


def test_control_plane_role_may_use_the_secrets_key_and_nothing_else() -> None:
    import json

    plan = stack_plan("dev")
    (eks,) = resources(plan, "eks:index:Cluster")
    urns = by_urn(plan)
    role = urns[eks["inputs"]["serviceRole"]]
    assert json.loads(role["inputs"]["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "eks.amazonaws.com"
    }
    (kms,) = [r for r in resources(plan, "aws:iam/rolePolicy:RolePolicy") if r["name"] == "cluster-control-plane-kms"]
    statement = json.loads(kms["inputs"]["policy"])["Statement"]
    assert [s["Resource"] for s in statement] == [eks["inputs"]["encryptionConfigKeyArn"]]
    assert kms["urn"] in eks["dependencies"]
