"""Trust policies of the service roles carry the source conditions AWS documents for each
service principal (tests/upstream/aws-trust-conditions-2026-11.yaml), and the audit log groups
are kept like the data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.iam import pod_identity_trust_policy, service_trust_policy
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, run_plan, stack_plan, stack_values
from tools.offline.mocks import ACCOUNT_ID

FACTS = upstream.facts("aws-trust-conditions-2026-11")


def roles(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Role name -> its one trust statement."""
    out = {}
    for r in plan["resources"]:
        if r["type"] == "aws:iam/role:Role":
            (statement,) = json.loads(r["inputs"]["assumeRolePolicy"])["Statement"]
            out[r["name"]] = statement
    return out


def resource(plan: dict[str, Any], name: str, type_: str) -> dict[str, Any]:
    (r,) = [r for r in plan["resources"] if r["name"] == name and r["type"] == type_]
    return r


LOG_GROUP, ROLE = "aws:cloudwatch/logGroup:LogGroup", "aws:iam/role:Role"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_service_role_trusts_only_as_its_guide_documents(stack: str) -> None:
    """Every role a service assumes is one of the principals the facts describe; where the guide
    recommends source conditions, the role has them (account and resource), else it has the
    documented shape exactly (no condition the service would not satisfy)."""
    plan = stack_plan(stack)
    region = stack_values(stack)["aws:region"]
    for name, st in roles(plan).items():
        service = st["Principal"].get("Service")
        if service is None:
            assert st["Action"] == "sts:AssumeRoleWithWebIdentity", name  # IRSA: by OIDC subject
            continue
        assert service in FACTS, (name, service)
        fact = FACTS[service]
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        if "recommended_condition_keys" in fact or "recommended_condition" in fact:
            assert st["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT_ID}, name
            arns = st["Condition"]["ArnLike"]["aws:SourceArn"]
            for arn in arns if isinstance(arns, list) else [arns]:
                assert f":{region}:{ACCOUNT_ID}:" in arn, (name, arn)
        elif service == "pods.eks.amazonaws.com":
            tags = {k.removeprefix("aws:RequestTag/") for k in st["Condition"]["StringEquals"]}
            assert tags <= set(fact["session_tags"]) and "eks-cluster-arn" in tags, name
            assert actions == fact["actions"], name
        else:
            assert "Condition" not in st, name
            assert actions in (fact["actions"], fact.get("auto_mode_actions")), name


def test_flow_logs_trust_this_accounts_flow_logs_of_the_region() -> None:
    st = roles(stack_plan("trn1-llama2"))["network-flow-logs"]
    shape = FACTS["vpc-flow-logs.amazonaws.com"]["recommended_condition"]
    expected = shape["ArnLike"]["aws:SourceArn"].format(
        partition="aws", region="us-west-2", account=ACCOUNT_ID, **{"flow-log-id": "*"}
    )
    assert st["Condition"] == {
        "StringEquals": {"aws:SourceAccount": ACCOUNT_ID},
        "ArnLike": {"aws:SourceArn": expected},
    }


def test_the_image_builder_trusts_only_its_projects_and_the_events_role_only_its_rules() -> None:
    plan = stack_plan("trn1-bert")
    st = roles(plan)["images-builder"]
    projects = [r["inputs"]["name"] for r in plan["resources"] if r["type"] == "aws:codebuild/project:Project"]
    pattern = FACTS["codebuild.amazonaws.com"]["source_arn"]
    arns = [pattern.format(partition="aws", region="us-west-2", account=ACCOUNT_ID, project=p) for p in projects]
    assert st["Condition"]["ArnLike"]["aws:SourceArn"] in (arns, arns[0])
    rules = [r for r in plan["resources"] if r["type"] == "aws:cloudwatch/eventRule:EventRule"]
    got = roles(plan)["images-events"]["Condition"]["ArnLike"]["aws:SourceArn"]
    assert len(rules) == len(got if isinstance(got, list) else [got]) >= 1, got
    # The role is made from the rules' ARNs, so after them.
    assert {r["urn"] for r in rules} <= set(resource(plan, "images-events", ROLE)["dependencies"])


def test_the_cloudwatch_agent_role_is_for_this_clusters_agent_only() -> None:
    plan = stack_plan("trn1-llama2")
    st = roles(plan)["addons-cloudwatch"]
    facts = upstream.facts("aws-eks-cloudwatch-observability-2026-11")
    assert st["Condition"]["StringEquals"] == {
        "aws:RequestTag/eks-cluster-arn": f"arn:aws:eks:us-west-2:{ACCOUNT_ID}:cluster/trn1-llama2",
        "aws:RequestTag/kubernetes-namespace": facts["namespace"],
        "aws:RequestTag/kubernetes-service-account": facts["service_account"],
    }


def test_trust_policy_shapes() -> None:
    plain = json.loads(service_trust_policy("ec2.amazonaws.com"))
    assert plain["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
    one = json.loads(service_trust_policy("x.amazonaws.com", source_account="1", source_arns=["arn:a"]))
    assert one["Statement"][0]["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "1"},
        "ArnLike": {"aws:SourceArn": "arn:a"},
    }
    pod = json.loads(pod_identity_trust_policy("arn:c", "ns", "sa"))["Statement"][0]
    assert pod["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert pod["Action"] == FACTS["pods.eks.amazonaws.com"]["actions"]


# --------------------------------------------------------------------------- audit logs


@pytest.mark.parametrize("protect", [True, False])
def test_audit_log_groups_are_protected_and_kept_while_the_stack_protects_its_data(protect: bool) -> None:
    """The EKS control-plane log and the VPC flow log: protected like the data, and retained on
    delete while protected (infra.protection.audit_trail). With protection off (a throwaway
    stack) they go with the stack, so a cluster of the same name can be created again: both
    names are fixed (EKS writes to /aws/eks/<cluster>/cluster)."""
    values = {**stack_values("dev"), "llm-training-eks:protectStatefulResources": protect}
    plan = run_plan(values, "dev")
    for name in ("cluster-logs", "network-flow-logs"):
        r = resource(plan, name, LOG_GROUP)
        assert (r["protect"], r["retainOnDelete"]) == (protect, protect), name
    cluster = values["llm-training-eks:cluster"]["name"]
    assert resource(plan, "cluster-logs", LOG_GROUP)["inputs"]["name"] == f"/aws/eks/{cluster}/cluster"
