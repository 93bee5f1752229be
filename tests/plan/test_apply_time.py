"""Failures that only a real `pulumi up` would show, held against the documented AWS rules
(tests/upstream/aws-*.yaml) and the charts' own facts: the API path, FSx and its security group,
the S3 link's key, reserved capacity, Capacity Blocks, IAM for the pods that call AWS."""

from __future__ import annotations

import copy
import datetime as dt
import fnmatch
import json
from typing import Any

import pytest

from infra import charts
from tests import upstream
from tests.conftest import BASE, MINIMAL, by_urn, plan_exit, resources, run_plan, stack_plan, stack_values

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
NETWORK_RULES = upstream.facts("aws-eks-endpoint-and-fsx-access-2026-11")
NG = MINIMAL["llm-training-eks:nodeGroups"][0]


def with_group(**over: Any) -> dict[str, Any]:
    return {**MINIMAL, "llm-training-eks:nodeGroups": [{**NG, **over}]}


# ----------------------------------------------------------------- a path to the Kubernetes API


def test_a_stack_without_a_path_to_the_api_exits_2(tmp_path: Any) -> None:
    code, err = plan_exit({"aws:region": "us-west-2"}, tmp_path)
    assert code == 2 and err.startswith("cluster.publicAccessCidrs: nothing can reach the Kubernetes API")


def test_every_example_stack_has_a_path_to_the_api(example_stack: str) -> None:
    """Public CIDRs at the public endpoint, or TCP 443 into the cluster security group from a
    network or security group routed into the VPC (EKS user guide, cluster-endpoint)."""
    plan = stack_plan(example_stack)
    (cluster,) = resources(plan, "aws:eks/cluster:Cluster")
    vpc = cluster["inputs"]["vpcConfig"]
    public = vpc.get("endpointPublicAccess") and vpc.get("publicAccessCidrs")
    port = NETWORK_RULES["eks_private_endpoint"]["port"]
    api_rules = [r for r in resources(plan, INGRESS) if r["name"].startswith("cluster-api-from-")]
    assert all(r["inputs"]["fromPort"] == r["inputs"]["toPort"] == port for r in api_rules)
    assert public or api_rules


def test_private_access_opens_443_on_the_cluster_group_before_any_kubernetes_object() -> None:
    cluster = {**BASE["llm-training-eks:cluster"], "privateAccessCidrs": ["10.100.0.0/16"]}
    cluster["privateAccessSecurityGroupIds"] = ["sg-0123456789abcdef0"]
    plan = run_plan({**MINIMAL, "llm-training-eks:cluster": cluster})
    rules = [r for r in resources(plan, INGRESS) if r["name"].startswith("cluster-api-from-")]
    peers = {r["inputs"].get("cidrIpv4") or r["inputs"].get("referencedSecurityGroupId") for r in rules}
    assert peers == {"10.100.0.0/16", "sg-0123456789abcdef0"}
    # All on the EKS-managed cluster security group (the eksCluster child's vpcConfig output).
    (group,) = {r["inputs"]["securityGroupId"] for r in rules}
    assert group.startswith("sg-") and all(r["inputs"]["ipProtocol"] == "tcp" for r in rules)
    (provider,) = [r for r in resources(plan, "pulumi:providers:kubernetes") if r["name"] == "cluster-k8s"]
    assert {r["urn"] for r in rules} <= set(provider["dependencies"])


def test_private_access_may_not_admit_everyone(tmp_path: Any) -> None:
    cluster = {**BASE["llm-training-eks:cluster"], "privateAccessCidrs": ["0.0.0.0/0"]}
    code, err = plan_exit({**BASE, "llm-training-eks:cluster": cluster}, tmp_path)
    assert code == 2 and err.startswith("cluster.privateAccessCidrs:")


# ----------------------------------------------------------------- FSx and its security group


def test_file_system_waits_for_the_lustre_rules_of_its_group(example_stack: str) -> None:
    """CreateFileSystem checks that the group admits Lustre traffic from itself (FSx guide):
    the file system depends on those rules, not just on the empty group."""
    plan = stack_plan(example_stack)
    (fs,) = resources(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")
    (sg,) = [r for r in resources(plan, "aws:ec2/securityGroup:SecurityGroup") if r["name"] == "storage-lustre-sg"]
    own = [
        r
        for r in resources(plan, INGRESS)
        if r["inputs"]["securityGroupId"] == sg["id"] and r["inputs"].get("referencedSecurityGroupId") == sg["id"]
    ]
    wanted = [tuple(p) for p in NETWORK_RULES["fsx_lustre_security_group"]["inbound_ports"]]
    assert sorted((r["inputs"]["fromPort"], r["inputs"]["toPort"]) for r in own) == sorted(wanted)
    assert {r["urn"] for r in own} <= set(fs["dependencies"])


# ----------------------------------------------------------------- the S3 link's KMS key


def allows(policy: dict[str, Any], action: str, context: dict[str, str]) -> bool:
    """A small evaluator of the key-policy grammar the statements use (Allow, Principal AWS or *,
    Action with wildcards, StringEquals/StringLike/ArnLike conditions)."""
    for st in policy["Statement"]:
        principal = st.get("Principal")
        wanted = principal if principal == "*" else (principal or {}).get("AWS")
        who_ok = wanted == "*" or context["aws:PrincipalArn"] in ([wanted] if isinstance(wanted, str) else wanted)
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        if st["Effect"] != "Allow" or not who_ok or not any(fnmatch.fnmatchcase(action, a) for a in actions):
            continue
        ok = True
        for op, conds in st.get("Condition", {}).items():
            for key, values in conds.items():
                values = values if isinstance(values, list) else [values]
                got = context.get(key)
                match = (
                    (lambda v, got=got: got == v)
                    if op == "StringEquals"
                    else (lambda v, got=got: got is not None and fnmatch.fnmatchcase(got, v))
                )
                ok = ok and any(match(v) for v in values)
        if ok:
            return True
    return False


@pytest.mark.parametrize("action", upstream.facts("aws-fsx-lustre-sse-kms-2026-11")["statement"]["actions"])
def test_the_data_key_admits_the_file_systems_s3_role_through_s3(action: str) -> None:
    """The FSx guide's statement: the file system's S3 service-linked role may use the key
    through S3, on the bucket's objects; with S3 Bucket Keys the context is the bucket ARN."""
    facts = upstream.facts("aws-fsx-lustre-sse-kms-2026-11")["statement"]
    plan = stack_plan("dev")
    (key,) = [r for r in resources(plan, "aws:kms/key:Key") if r["name"] == "storage-key"]
    (bucket,) = [r for r in resources(plan, "aws:s3/bucket:Bucket") if r["name"] == "storage-data"]
    policy = json.loads(key["inputs"]["policy"])
    bucket_arn = f"arn:aws:s3:::{by_urn(plan)[bucket['urn']]['id']}"
    role = f"arn:aws:iam::123456789012:{facts['principal_role_path']}fs-0123456789abcdef0"
    context = {
        "aws:PrincipalArn": role,
        "kms:CallerAccount": "123456789012",
        "kms:ViaService": "s3.us-west-2.amazonaws.com",
        "kms:EncryptionContext:aws:s3:arn": bucket_arn,
    }
    assert allows(policy, action, context)
    assert allows(policy, action, {**context, "kms:EncryptionContext:aws:s3:arn": bucket_arn + "/datasets/x"})
    # ... and nothing else: another bucket, another service, another account's role.
    assert not allows(policy, action, {**context, "kms:EncryptionContext:aws:s3:arn": "arn:aws:s3:::other"})
    assert not allows(policy, action, {**context, "kms:ViaService": "ec2.us-west-2.amazonaws.com"})
    assert not allows(policy, action, {**context, "aws:PrincipalArn": role.replace("123456789012", "999999999999")})


def test_the_account_still_administers_the_data_key() -> None:
    plan = stack_plan("dev")
    (key,) = [r for r in resources(plan, "aws:kms/key:Key") if r["name"] == "storage-key"]
    root = {"aws:PrincipalArn": "arn:aws:iam::123456789012:root"}
    assert allows(json.loads(key["inputs"]["policy"]), "kms:PutKeyPolicy", root)


# ----------------------------------------------------------------- reservations and Capacity Blocks


def test_reserved_groups_create_no_placement_group(example_stack: str) -> None:
    """Capacity made in a placement group is usable only there, so a reservation never gets a
    new one; it launches in its own (capacity.placementGroupName) or in none."""
    plan = stack_plan(example_stack)
    for group in stack_values(example_stack)["llm-training-eks:nodeGroups"]:
        reserved = group.get("capacity", {}).get("type") in ("reservation", "capacity-block")
        pgs = [
            r for r in resources(plan, "aws:ec2/placementGroup:PlacementGroup") if r["name"] == f"ng-{group['name']}-pg"
        ]
        existing = "placementGroupName" in group.get("capacity", {})  # launches into an existing group
        assert bool(pgs) == (not reserved and not existing and group.get("placementGroup", True))


def test_a_reservation_launches_in_its_own_placement_group() -> None:
    capacity = {"type": "reservation", "reservationId": "cr-0123456789abcdef0", "placementGroupName": "odcr-pg"}
    plan = run_plan(with_group(capacity=capacity))
    assert not resources(plan, "aws:ec2/placementGroup:PlacementGroup")
    (lt,) = [r for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r["name"] == "ng-trn1-lt"]
    assert lt["inputs"]["placement"] == {"groupName": "odcr-pg"}


def test_a_new_placement_group_for_a_reservation_is_refused(tmp_path: Any) -> None:
    capacity = {"type": "reservation", "reservationId": "cr-0123456789abcdef0"}
    code, err = plan_exit(with_group(capacity=capacity, placementGroup=True), tmp_path)
    assert code == 2 and err.startswith("nodeGroups[0].placementGroup:")


def test_reserved_groups_upgrade_without_surging() -> None:
    """DEFAULT launches new nodes first; a group sized to its reservation has no room for them."""
    plan = stack_plan("trn1-llama2")
    (ng,) = [r for r in resources(plan, "aws:eks/nodeGroup:NodeGroup") if r["name"] == "ng-trn1-ng"]
    assert ng["inputs"]["updateConfig"]["updateStrategy"] == "MINIMAL"
    (on_demand,) = [r for r in resources(stack_plan("dev"), "aws:eks/nodeGroup:NodeGroup") if r["name"] == "ng-trn1-ng"]
    assert on_demand["inputs"]["updateConfig"]["updateStrategy"] == "DEFAULT"


def test_capacity_block_group_scales_to_zero_before_the_block_ends() -> None:
    """EKS's own action drains the group 40 minutes before the end; one of the stack's exists only
    when the group must stop earlier (here scaleDownMinutesBeforeEnd: 60), on the same Auto Scaling
    group as the scale-up at the block's start."""
    facts = upstream.facts("aws-eks-capacity-blocks-2026-11")
    values = copy.deepcopy(stack_values("p5-capacity-block"))
    capacity = values["llm-training-eks:nodeGroups"][0]["capacity"]
    capacity["scaleDownMinutesBeforeEnd"] = 60
    plan = run_plan(values, "p5-capacity-block")
    ends = dt.datetime.fromisoformat(capacity["endsAt"].replace("Z", "+00:00"))
    by_name = {r["name"]: r for r in resources(plan, "aws:autoscaling/schedule:Schedule")}
    schedule, up = by_name["ng-p5-capacity-block-end"], by_name["ng-p5-capacity-block-start"]
    start = dt.datetime.fromisoformat(schedule["inputs"]["startTime"].replace("Z", "+00:00"))
    assert ends - start > dt.timedelta(minutes=facts["eks_scale_down_minutes_before_end"])
    assert schedule["inputs"]["desiredCapacity"] == 0 and schedule["inputs"]["minSize"] == 0
    (ng,) = [r for r in resources(plan, "aws:eks/nodeGroup:NodeGroup") if r["name"] == "ng-p5-ng"]
    # The Auto Scaling group EKS made for the node group (its `resources` output).
    assert schedule["inputs"]["autoscalingGroupName"].startswith(f"eks-{ng['inputs']['nodeGroupNamePrefix']}")
    assert up["inputs"]["autoscalingGroupName"] == schedule["inputs"]["autoscalingGroupName"]


@pytest.mark.parametrize(
    ("capacity", "key"),
    [
        ({"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}, "capacity.endsAt:"),
        (
            {
                "type": "capacity-block",
                "reservationId": "cr-0123456789abcdef0",
                "endsAt": "2027-03-01T11:30:00Z",
                "scaleDownMinutesBeforeEnd": 29,
            },
            "capacity.scaleDownMinutesBeforeEnd:",
        ),
        (
            {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0", "endsAt": "2027-03-01T11:30"},
            "capacity.endsAt:",
        ),
        ({"type": "on-demand", "endsAt": "2027-03-01T11:30:00Z"}, "capacity.endsAt:"),
    ],
)
def test_capacity_block_end_config(capacity: dict[str, Any], key: str, tmp_path: Any) -> None:
    code, err = plan_exit(with_group(capacity=capacity), tmp_path)
    assert code == 2 and err.startswith(f"nodeGroups[0].{key}"), err


# ----------------------------------------------------------------- IAM for what calls AWS


def test_cloudwatch_agent_role_has_what_the_addon_needs() -> None:
    """Container Insights and Application Signals are both on by default: both policies."""
    facts = upstream.facts("aws-eks-cloudwatch-observability-2026-11")
    plan = stack_plan("dev")
    attached = {r["inputs"]["policyArn"] for r in resources(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert set(facts["role_policies"]) <= attached
    (addon,) = [
        r
        for r in resources(plan, "aws:eks/addon:Addon")
        if r["inputs"]["addonName"] == "amazon-cloudwatch-observability"
    ]
    assert addon["inputs"]["podIdentityAssociations"][0]["serviceAccount"] == facts["service_account"]


def test_neuron_health_container_gets_credentials() -> None:
    """The recovery container always runs (chart 1.1.2) and calls AWS; with IMDS closed to pods
    it gets an IRSA role for the chart's service account, with the Neuron guide's permissions
    minus SetInstanceHealth (remediation is EKS auto repair's)."""
    chart = upstream.facts("chart-neuron-helm-chart-1.1.2")
    guide = upstream.facts("neuron-npd-permissions-2026-11")
    assert chart["node_recovery_container_always_runs"] and not chart["npd_host_network"]
    plan = stack_plan("trn1-llama2")
    (role,) = [r for r in resources(plan, "aws:iam/role:Role") if r["name"] == "addons-neuron-health"]
    trust = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    subject = f"system:serviceaccount:{guide['namespace']}:{guide['service_account']}"
    assert subject in trust.values()
    (release,) = [r for r in resources(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "neuron"]
    sa = release["inputs"]["values"]["npd"]["serviceAccount"]
    assert sa["annotations"]["eks.amazonaws.com/role-arn"] == by_urn(plan)[role["urn"]]["inputs"].get(
        "arn", sa["annotations"]["eks.amazonaws.com/role-arn"]
    )
    (policy,) = [r for r in resources(plan, "aws:iam/rolePolicy:RolePolicy") if r["name"] == "addons-neuron-health"]
    actions = {a for st in json.loads(policy["inputs"]["policy"])["Statement"] for a in st["Action"]}
    allowed = set(guide["policy_actions"]["metrics"] + guide["policy_actions"]["describe"]) | {
        "autoscaling:DescribeAutoScalingInstances"
    }
    assert set(guide["policy_actions"]["metrics"]) <= actions <= allowed
    assert guide["namespace"] == charts.NEURON_HEALTH_NAMESPACE and guide["service_account"] == charts.NEURON_NPD_SA


def test_flow_log_role_may_describe_log_groups() -> None:
    plan = stack_plan("dev")
    (policy,) = [r for r in resources(plan, "aws:iam/rolePolicy:RolePolicy") if r["name"] == "network-flow-logs"]
    actions = {a for st in json.loads(policy["inputs"]["policy"])["Statement"] for a in st["Action"]}
    documented = set(NETWORK_RULES["vpc_flow_logs_role_actions"]) - {"logs:CreateLogGroup"}  # the group is ours
    assert documented <= actions


# ----------------------------------------------------------------- the MPI operator image


def test_mpi_operator_image_can_come_from_elsewhere() -> None:
    """The project publishes to Docker Hub only; mpiOperatorImage rewrites the manifest's
    Deployment (as the release manifest names it) to a copy, through a Pulumi transform."""
    import pulumi

    facts = upstream.facts("mpi-operator-v0.8.0")
    assert facts["published_registries"] == ["docker.io"]
    d = facts["deployment"]
    assert (d["namespace"], d["name"], d["container"]) == charts.MPI_OPERATOR_DEPLOYMENT
    props = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": d["name"], "namespace": d["namespace"]},
        "spec": {"template": {"spec": {"containers": [{"name": d["container"], "image": d["image"]}]}}},
    }
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/mpi-operator:0.8.0"
    transform = charts.mpi_operator_image_transform(image)
    args = pulumi.ResourceTransformArgs(
        custom=True, type_="kubernetes:apps/v1:Deployment", name="x", props=props, opts=pulumi.ResourceOptions()
    )
    result = transform(args)
    assert result is not None
    assert result.props["spec"]["template"]["spec"]["containers"][0]["image"] == image
    other = pulumi.ResourceTransformArgs(
        custom=True,
        type_="kubernetes:v1:ServiceAccount",
        name="y",
        props={"kind": "ServiceAccount"},
        opts=pulumi.ResourceOptions(),
    )
    assert transform(other) is None


def test_mpi_operator_image_override_plans() -> None:
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/mpi-operator:0.8.0"
    plan = run_plan({**MINIMAL, "llm-training-eks:addons": {"mpiOperatorImage": image}})
    assert resources(plan, "kubernetes:yaml/v2:ConfigFile")
