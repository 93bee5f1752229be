"""The AWS Load Balancer Controller add-on and a serving run's internal load balancer, held against
kubernetes-sigs/aws-load-balancer-controller v3.5.0 (tests/upstream/aws-load-balancer-controller-v3.5.0.yaml,
chart-aws-load-balancer-controller-3.5.0.yaml): the IAM policy statement by statement, the chart's
values and webhooks, the Service annotations, and the seams between them and the stack (the subnets
the annotation names exist with that Name tag, the NetworkPolicy admits exactly their CIDRs, the
service account the role trusts is the one the chart creates)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import config
from config.addons import AddonsConfig
from config.workloads import VllmServeWorkload
from facts import instances, prices, serving
from facts import load_balancer_controller as lbc
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup
from infra import charts, layers
from infra.platform import InternalLoadBalancing, Platform
from tests import upstream
from tests.conftest import plan_exit, resources, run_plan, stack_plan, stack_values
from workloads import deploy
from workloads.manifests import serve_endpoint

NS = "llm-training-eks:"
STACK = "trn2-serve"
"""The example whose server is reached through an internal NLB with TLS."""
CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f6a8c2e-5b1d-4e7a-9c3f-2d8e6b4a1c90"
UPSTREAM = "aws-load-balancer-controller-v3.5.0"
CHART = "chart-aws-load-balancer-controller-3.5.0"


def _upstream_statements() -> list[dict[str, Any]]:
    return list(upstream.facts(UPSTREAM)["iam_policy"]["Statement"])


# ----------------------------------------------------------------- the IAM policy


def test_the_policy_has_upstreams_statements_in_its_order() -> None:
    policy = upstream.facts(UPSTREAM)["iam_policy"]
    assert policy["Version"] == lbc.IAM_POLICY_VERSION
    assert len(lbc.IAM_POLICY_STATEMENTS) == len(policy["Statement"])


@pytest.mark.parametrize("index", range(len(_upstream_statements())))
def test_each_statement_is_upstreams(index: int) -> None:
    """docs/install/iam_policy.json at v3.5.0, statement `index`: actions, resources, conditions."""
    assert lbc.IAM_POLICY_STATEMENTS[index] == _upstream_statements()[index]


def test_the_generated_policy_narrows_every_cluster_tag_condition_to_this_cluster() -> None:
    """Where upstream asks only that `elbv2.k8s.aws/cluster` be present, ours asks that it be this
    cluster's name (the controller tags what it creates with its clusterName: tracking/provider.go);
    absent-tag conditions stay; actions and resources are upstream's."""
    tag = upstream.facts(UPSTREAM)["resource_tag"]["key"]
    assert tag == lbc.CLUSTER_TAG
    ours = lbc.iam_policy("c1")["Statement"]
    narrowed = 0
    for theirs, mine in zip(_upstream_statements(), ours, strict=True):
        assert (mine["Effect"], mine["Action"], mine["Resource"]) == (
            theirs["Effect"],
            theirs["Action"],
            theirs["Resource"],
        )
        cond = theirs.get("Condition", {})
        for key, value in cond.get("Null", {}).items():
            if value == "false":
                assert mine["Condition"]["StringEquals"][key] == "c1"
                assert key not in mine["Condition"].get("Null", {})
                narrowed += 1
            else:
                assert mine["Condition"]["Null"][key] == "true"
        for key, value in cond.get("StringEquals", {}).items():
            assert mine["Condition"]["StringEquals"][key] == value
    assert narrowed == 7


def test_the_role_in_the_plan_carries_that_policy_and_trusts_the_charts_service_account() -> None:
    plan = stack_plan(STACK)
    (policy,) = [
        r["inputs"]
        for r in resources(plan, "aws:iam/rolePolicy:RolePolicy")
        if r["name"].endswith("balancer-controller")
    ]
    assert json.loads(policy["policy"]) == lbc.iam_policy(STACK)
    (role,) = [r["inputs"] for r in resources(plan, "aws:iam/role:Role") if r["name"].endswith("balancer-controller")]
    (statement,) = json.loads(role["assumeRolePolicy"])["Statement"]
    (sub,) = [v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    release = _release(plan)
    account = release["values"]["serviceAccount"]
    assert sub == f"system:serviceaccount:{release['namespace']}:{account['name']}"
    assert account["create"] is True


# ----------------------------------------------------------------- the chart


def _release(plan: dict[str, Any]) -> dict[str, Any]:
    (release,) = [
        r["inputs"]
        for r in resources(plan, "kubernetes:helm.sh/v3:Release")
        if r["inputs"]["name"] == charts.AWS_LOAD_BALANCER_CONTROLLER.release
    ]
    return release


def test_the_pinned_chart_runs_controller_v3_5_0() -> None:
    facts = upstream.facts(CHART)
    assert AddonsConfig().load_balancer_controller_chart == facts["version"] == lbc.CHART_VERSION
    assert facts["app_version"] == lbc.APP_VERSION == upstream.load(UPSTREAM)["source"]["ref"]
    assert charts.AWS_LOAD_BALANCER_CONTROLLER.repo == facts["helm_repository"]


def test_the_controller_is_told_its_cluster_region_and_vpc_and_runs_two_replicas_behind_a_pdb() -> None:
    """With IMDS closed to pods (hop limit 1) it cannot read its VPC or region from the instance;
    the chart renders its PDB only when it is set and replicaCount > 1 (templates/pdb.yaml)."""
    plan = stack_plan(STACK)
    values = _release(plan)["values"]
    (vpc,) = [r for r in resources(plan, "aws:ec2/vpc:Vpc")]
    assert values["clusterName"] == STACK and values["region"] == "us-east-2"
    assert values["vpcId"].startswith("vpc-") and vpc["urn"]
    assert values["replicaCount"] == 2 and values["podDisruptionBudget"] == {"maxUnavailable": 1}
    assert values["nodeSelector"] == charts.SYSTEM_NODE_SELECTOR
    assert upstream.facts(CHART)["pdb_rendered_when"] == "podDisruptionBudget non-empty and replicaCount > 1"


def test_no_webhook_takes_what_it_is_not_asked_to() -> None:
    """The Service mutator (on by default, failurePolicy Fail, every LoadBalancer Service) is off;
    every other webhook of the chart needs a namespace or pod label no object of ours carries."""
    webhooks = upstream.facts(CHART)["webhooks"]
    values = charts.load_balancer_controller_values("c", "us-east-2", "vpc-0", "arn")
    assert values["enableServiceMutatorWebhook"] is False
    assert webhooks["mservice.elbv2.k8s.aws"]["opt_in"] is False
    assert all(w["opt_in"] for name, w in webhooks.items() if name != "mservice.elbv2.k8s.aws")


def test_without_the_switch_there_is_no_controller(tmp_path: Path) -> None:
    plan = stack_plan("p5-train-serve")
    names = [r["inputs"]["name"] for r in resources(plan, "kubernetes:helm.sh/v3:Release")]
    assert charts.AWS_LOAD_BALANCER_CONTROLLER.release not in names
    assert not [r for r in resources(plan, "aws:iam/role:Role") if r["name"].endswith("balancer-controller")]


# ----------------------------------------------------------------- the Service and its NetworkPolicy


def _object(plan: dict[str, Any], type_: str, name: str) -> dict[str, Any]:
    (obj,) = [r["inputs"] for r in resources(plan, type_) if r["inputs"]["metadata"]["name"] == name]
    return obj


def test_the_service_asks_the_controller_for_an_internal_nlb_to_pod_ips_with_tls() -> None:
    facts = upstream.facts(UPSTREAM)
    nlb = facts["nlb"]
    svc = _object(stack_plan(STACK), "kubernetes:core/v1:Service", "qwen-lb")
    a = svc["metadata"]["annotations"]
    assert a[nlb["type_annotation"]] in nlb["type_values_reconciled"]
    assert a[nlb["target_type_annotation"]] == "ip" and "ip" in nlb["target_type_values"]
    assert a[facts["service"]["scheme_annotation"]] == "internal" in facts["service"]["scheme_values"]
    assert a[nlb["ssl_cert_annotation"]] == CERT
    assert a[nlb["ssl_ports_annotation"]] == "443"
    (port,) = svc["spec"]["ports"]
    assert (port["port"], port["targetPort"], svc["spec"]["type"]) == (443, "http", "LoadBalancer")
    assert svc["spec"]["allocateLoadBalancerNodePorts"] is False
    # In-cluster clients keep the ClusterIP Service, its name and port.
    plain = _object(stack_plan(STACK), "kubernetes:core/v1:Service", "qwen")
    assert plain["spec"]["type"] == "ClusterIP" and plain["spec"]["ports"][0]["port"] == serving.PORT


def test_the_annotated_subnets_are_the_private_subnets_by_name_one_per_az() -> None:
    """The controller resolves subnet names by their Name tag; one per AZ (annotations.md)."""
    plan = stack_plan(STACK)
    nlb = upstream.facts(UPSTREAM)["nlb"]
    assert "Name tag" in nlb["subnets_by"] and nlb["subnets_one_per_az"]
    named = _object(plan, "kubernetes:core/v1:Service", "qwen-lb")["metadata"]["annotations"][nlb["subnets_annotation"]]
    private = {
        r["inputs"]["tags"]["Name"]: r["inputs"]
        for r in resources(plan, "aws:ec2/subnet:Subnet")
        if r["inputs"]["tags"].get("kubernetes.io/role/internal-elb") == "1"
    }
    names = named.split(", ")
    assert sorted(names) == sorted(private)
    assert len({private[n]["availabilityZone"] for n in names}) == len(names)


def test_the_server_admits_the_nlbs_addresses_on_its_port_only() -> None:
    """Client IP preservation is off for ip targets: the pods see the NLB's addresses, which are in
    the private subnets. The policy admits exactly those CIDRs, on the server's port."""
    assert upstream.facts(UPSTREAM)["nlb"]["preserve_client_ip_default_ip_targets"] is False
    plan = stack_plan(STACK)
    policy = _object(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "qwen-lb-ingress")
    (rule,) = policy["spec"]["ingress"]
    cidrs = sorted(p["ipBlock"]["cidr"] for p in rule["from"])
    private = sorted(
        r["inputs"]["cidrBlock"]
        for r in resources(plan, "aws:ec2/subnet:Subnet")
        if r["inputs"]["tags"].get("kubernetes.io/role/internal-elb") == "1"
    )
    assert cidrs == private
    assert rule["ports"] == [{"protocol": "TCP", "port": serving.PORT}]
    server = _object(plan, "kubernetes:apps/v1:Deployment", "qwen-serve")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= server.items()


def test_clusterip_makes_no_balancer_objects() -> None:
    plan = stack_plan("p5-train-serve")
    names = [r["inputs"]["metadata"]["name"] for r in resources(plan, "kubernetes:core/v1:Service")]
    assert not [n for n in names if n.endswith("-lb")]


def test_the_load_balancers_hourly_fee_is_in_the_runs_cost() -> None:
    """The NLB is the controller's, not a resource of the stack, but billed while the run stands:
    the run's cost per hour is its nodes' share plus one NLB-hour (facts/prices.py), and says so;
    the same run behind its ClusterIP Service costs the nodes' share only."""

    def cost(values: dict[str, Any]) -> dict[str, Any]:
        (entry,) = [r for r in run_plan(values, STACK)["cost"]["trainingRuns"] if r["name"] == "qwen"]
        return dict(entry)

    balanced = cost(stack_values(STACK))

    def in_cluster_only(values: dict[str, Any]) -> None:
        _qwen(values)["endpoint"] = "clusterIP"
        del _qwen(values)["certificateArn"]

    in_cluster = cost(_with(in_cluster_only))
    assert balanced["hourly"] == pytest.approx(in_cluster["hourly"] + prices.NETWORK_LOAD_BALANCER_HOURLY, abs=1e-4)
    assert "internal NLB $0.0225/h included" in balanced["stepTimeBasis"]
    assert "NLB" not in in_cluster["stepTimeBasis"]


# ----------------------------------------------------------------- refusals


def _with(edit: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    edit(values)
    return values


def _qwen(values: dict[str, Any]) -> dict[str, Any]:
    return values[NS + "workloads"]["qwen"]


REFUSED = [
    ("no-controller", lambda v: v.pop(NS + "addons"), "workloads.qwen.endpoint", "addons.loadBalancerController"),
    (
        "not-acm",
        lambda v: _qwen(v).update(certificateArn="arn:aws:iam::123456789012:server-certificate/x"),
        "workloads.qwen.certificateArn",
        "ACM",
    ),
    (
        "no-uuid",
        lambda v: _qwen(v).update(certificateArn=CERT.rsplit("/", 1)[0] + "/x"),
        "workloads.qwen.certificateArn",
        "ACM",
    ),
    (
        "other-region",
        lambda v: _qwen(v).update(certificateArn=CERT.replace("us-east-2", "us-west-2")),
        "workloads.qwen.certificateArn",
        "us-east-2",
    ),
    (
        "tls-without-lb",
        lambda v: _qwen(v).update(endpoint="clusterIP"),
        "workloads.qwen.certificateArn",
        "internalLoadBalancer",
    ),
    ("public", lambda v: _qwen(v).update(endpoint="internetFacing"), "workloads.qwen.endpoint", "internalLoadBalancer"),
]


@pytest.mark.parametrize(("edit", "key", "word"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_balancer_that_cannot_work_is_refused_naming_its_key(edit: Any, key: str, word: str, tmp_path: Path) -> None:
    code, err = plan_exit(_with(edit), tmp_path)
    assert code == 2, err
    lines = [line for line in err.splitlines() if key in line]
    assert lines and any(word.lower() in line.lower() for line in lines), err
    assert "Traceback" not in err and len(err.splitlines()) <= 40


def test_an_existing_vpc_is_refused_naming_the_endpoint(tmp_path: Path) -> None:
    """The stack does not know an existing VPC's subnet CIDRs, which the policy must admit."""
    byo = stack_values("byo-vpc")
    values = {**byo, NS + "addons": {"loadBalancerController": True}}
    code, err = plan_exit(values, tmp_path)
    assert code == 0, err  # the controller itself installs in an existing VPC
    cfg = config.parse_stack_values(values)
    from config.checks.serving import balancer_missing

    assert "existing VPC" in (balancer_missing(cfg) or "")


# ----------------------------------------------------------------- the layers' contract


def test_the_placement_crosses_both_layer_boundaries() -> None:
    lb = InternalLoadBalancing(("c-private-us-east-2a",), ("10.0.0.0/19",))
    # The contract refuses a platform without the system group (launchers and CPU runs go there).
    system = NodeGroup(SYSTEM_NODE_GROUP, instances.GENERAL_PURPOSE["m6i.2xlarge"], 2, 2, "a,b", {})
    groups = {SYSTEM_NODE_GROUP: system}
    platform = Platform(provider=None, namespaces={}, storage_claim="shared", node_groups=groups, load_balancing=lb)
    out = layers.platform_output(platform)
    assert out["internalLoadBalancing"] == {"subnets": ["c-private-us-east-2a"], "cidrs": ["10.0.0.0/19"]}
    back = layers.parse_platform({"platform": out, "kubeconfig": "k"}, None, "org/p/x-cluster")
    assert back.load_balancing == lb
    assert (
        layers.parse_platform(
            {"platform": layers.platform_output(Platform(None, {}, "s", groups)), "kubeconfig": "k"}, None, "s"
        ).load_balancing
        is None
    )


def _serve_on_trn1(c: dict[str, Any]) -> None:
    c[NS + "workloads"]["qwen"] = {
        "recipe": "vllm-serve",
        "nodeGroup": "trn1",
        "runId": "v1",
        "model": {"hub": "Qwen/Qwen3-8B", "parametersBillions": 8.19},
        "tensorParallel": 8,
        "endpoint": "internalLoadBalancer",
    }


def _patient_queue(c: dict[str, Any]) -> None:
    c.setdefault(NS + "queueing", {}).update(podsReadyTimeoutMinutes=120, recoveryTimeoutMinutes=120)
    # _serve_on_trn1's replica takes 4 of a trn1's 16 devices: the Neuron scheduler extension places it.
    c.setdefault(NS + "addons", {})["neuronScheduler"] = True


def test_the_layered_stacks_hand_the_controller_and_its_subnets_up(tmp_path: Path) -> None:
    """The aws layer makes the role and exports where internal balancers go; the cluster layer
    installs the chart on the aws layer's role and VPC and passes the placement on; the runs
    layer's Service and policy use it. Without the aws layer's switch the runs layer refuses."""
    from tests.plan.test_layers import LAYERED, _layered_files, _plan_file

    def on(c: dict[str, Any]) -> None:
        c.setdefault(NS + "addons", {})["loadBalancerController"] = True

    d = _layered_files(tmp_path, {"aws": on, "cluster": _patient_queue, "runs": _serve_on_trn1})
    plans = {}
    for layer in ("aws", "cluster"):
        code, plans[layer], err = _plan_file(d / f"Pulumi.{LAYERED[layer]}.yaml")
        assert code == 0, f"{layer}: {err}"
    aws = plans["aws"]["outputs"][layers.AWS_LAYER_OUTPUT]
    assert "load-balancer-controller" in aws["serviceAccountRoleArns"]
    (release,) = [
        r["inputs"] for r in plans["cluster"]["resources"] if r["name"] == "addons-aws-load-balancer-controller"
    ]
    assert release["values"]["vpcId"] == aws["vpcId"]
    assert (
        release["values"]["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]
        == (aws["serviceAccountRoleArns"]["load-balancer-controller"])
    )
    outputs = plans["cluster"]["outputs"]
    assert outputs[layers.PLATFORM_OUTPUT]["internalLoadBalancing"] == aws["internalLoadBalancing"]
    platform = layers.parse_platform(outputs, None, LAYERED["cluster"])
    workloads: dict[str, Any] = {NS + "workloads": {}}
    _serve_on_trn1(workloads)
    run = VllmServeWorkload.model_validate(workloads[NS + "workloads"]["qwen"])
    svc = serve_endpoint.load_balancer_service("qwen", run, deploy.context(platform, run, "image:1"))
    assert svc["metadata"]["annotations"][lbc.LB_SUBNETS] == ", ".join(aws["internalLoadBalancing"]["subnets"])
    # The runs layer plans it: the endpoint with the switch on, and the Neuron server's start held to
    # the cluster layer's Kueue timeout (120 min, in its platform output), not the runs stack's default.
    assert outputs[layers.PLATFORM_OUTPUT]["podsReadyTimeoutMinutes"] == 120
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['runs']}.yaml")
    assert code == 0, err

    (tmp_path / "off").mkdir()
    d = _layered_files(tmp_path / "off", {"cluster": _patient_queue, "runs": _serve_on_trn1})
    for layer in ("aws", "cluster"):
        code, _, err = _plan_file(d / f"Pulumi.{LAYERED[layer]}.yaml")
        assert code == 0, err
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['runs']}.yaml")
    assert code == 2, err
    assert "workloads.qwen.endpoint: internalLoadBalancer needs the AWS Load Balancer Controller" in err, err


def test_each_pod_interface_has_exactly_one_security_group_the_controller_can_open() -> None:
    """The controller adds its rule to the one security group of a target ENI tagged
    kubernetes.io/cluster/<cluster> (networking_manager.go at v3.5.0); with two or none it fails to
    register the pods. An accelerated node's interfaces carry the EKS cluster security group (EKS
    tags it so: sec-group-reqs.adoc) and the node group's EFA group, which must not carry the tag."""
    eks = upstream.facts("aws-eks-cluster-security-group-2026-11")
    assert "kubernetes.io/cluster/<cluster>" in eks["cluster_security_group_tags"]
    assert upstream.facts(UPSTREAM)["security_groups"]["eni_sg_choice_tag"] == "kubernetes.io/cluster/<clusterName>"
    plan = stack_plan(STACK)
    ours = {r["id"]: r["inputs"] for r in resources(plan, "aws:ec2/securityGroup:SecurityGroup")}
    (provider,) = [r["inputs"] for r in resources(plan, "pulumi:providers:aws")]
    default_tags = json.loads(provider["defaultTags"])["tags"]
    assert not [k for k in default_tags if k.startswith("kubernetes.io/cluster/")]
    templates = [
        r for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r["inputs"].get("networkInterfaces")
    ]
    assert templates  # the accelerated node group's (the system group's nodes get the cluster group alone)
    for lt in templates:
        for interface in lt["inputs"]["networkInterfaces"]:
            groups = interface["securityGroups"]
            eks_owned = [g for g in groups if g not in ours]
            assert len(eks_owned) == 1, (lt["name"], groups)  # the cluster security group
            for g in groups:
                if g in ours:
                    assert not [k for k in ours[g].get("tags", {}) if k.startswith("kubernetes.io/cluster/")]
