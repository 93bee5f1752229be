"""The in-VPC CI runner: what the aws layer declares, held against the CodeBuild and EKS API
models in botocore and the CodeBuild user guide (tests/upstream/codebuild-actions-runner.yaml).
"""

from __future__ import annotations

import json
import re
from typing import Any

import botocore.session
import pytest

import config
from config.ci_runner import CiRunnerConfig, ComputeType
from infra import ci_runner
from tests import upstream
from tests.conftest import stack_plan, stack_values

STACK = "trn1-llama2-aws"
SESSION = botocore.session.get_session()
CODEBUILD = SESSION.get_service_model("codebuild")
EKS = SESSION.get_service_model("eks")
RUNNER = upstream.facts("codebuild-actions-runner")
IMAGE = upstream.facts("codebuild-image-standard-7.0")


def enum(model: Any, shape: str) -> list[str]:
    return list(model.shape_for(shape).enum)


def planned(type_: str) -> dict[str, Any]:
    (r,) = [r for r in stack_plan(STACK)["resources"] if r["type"] == type_ and "ci-runner" in r["urn"]]
    return dict(r["inputs"])


def test_the_project_is_a_valid_codebuild_project() -> None:
    p = planned("aws:codebuild/project:Project")
    name = CODEBUILD.shape_for("ProjectName").metadata
    assert re.fullmatch(name["pattern"], p["name"]) and name["min"] <= len(p["name"]) <= name["max"]
    assert p["environment"]["type"] in enum(CODEBUILD, "EnvironmentType")
    assert p["environment"]["computeType"] in enum(CODEBUILD, "ComputeType")
    assert p["environment"]["imagePullCredentialsType"] in enum(CODEBUILD, "ImagePullCredentialsType")
    assert p["environment"]["image"] == IMAGE["image"]
    assert p["artifacts"]["type"] in enum(CODEBUILD, "ArtifactsType")
    assert p["source"]["type"] in enum(CODEBUILD, "SourceType")
    assert p["source"]["auth"]["type"] in enum(CODEBUILD, "SourceAuthType")
    timeout = CODEBUILD.shape_for("BuildTimeOut").metadata
    assert timeout["min"] <= p["buildTimeout"] <= timeout["max"]
    assert p["logsConfig"]["cloudwatchLogs"]["status"] in enum(CODEBUILD, "LogsConfigStatusType")
    assert p["environment"]["privilegedMode"] is False


def test_the_project_runs_in_the_private_subnets_of_the_vpc() -> None:
    plan = stack_plan(STACK)
    private = {
        r["id"]
        for r in plan["resources"]
        if r["type"] == "aws:ec2/subnet:Subnet" and not r["inputs"].get("mapPublicIpOnLaunch")
    }
    vpc = planned("aws:codebuild/project:Project")["vpcConfig"]
    assert vpc["subnets"] and set(vpc["subnets"]) <= private


def test_config_limits_are_the_apis() -> None:
    assert set(ComputeType.__args__) <= set(enum(CODEBUILD, "ComputeType"))
    timeout = CODEBUILD.shape_for("BuildTimeOut").metadata
    field = CiRunnerConfig.model_fields["build_timeout_minutes"]
    bounds = {type(m).__name__: m for m in field.metadata}
    assert (bounds["Ge"].ge, bounds["Le"].le) == (timeout["min"], timeout["max"])


def test_the_webhook_starts_a_runner_for_queued_workflow_jobs() -> None:
    hook = planned("aws:codebuild/webhook:Webhook")
    assert hook["buildType"] in enum(CODEBUILD, "WebhookBuildType")
    ((flt,),) = [g["filters"] for g in hook["filterGroups"]]
    assert flt["type"] in enum(CODEBUILD, "WebhookFilterType")
    assert flt["pattern"] == RUNNER["webhook_event"] == ci_runner.WORKFLOW_JOB_QUEUED
    # botocore documents the EVENT patterns of WebhookFilter.type.
    assert RUNNER["webhook_event"] in CODEBUILD.shape_for("WebhookFilter").members["type"].documentation


def test_the_runner_label_is_the_one_codebuild_documents() -> None:
    label = ci_runner.runner_label("my-project")
    assert label == RUNNER["runs_on_label"].replace("<project-name>", "my-project")


def test_the_role_may_reach_the_cluster_as_admin() -> None:
    entry = planned("aws:eks/accessEntry:AccessEntry")
    assert (
        entry["type"] == "STANDARD"
        and "STANDARD" in EKS.shape_for("CreateAccessEntryRequest").members["type"].documentation
    )
    assoc = planned("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert assoc["accessScope"]["type"] in enum(EKS, "AccessScopeType")
    assert assoc["policyArn"].endswith(":cluster-access-policy/AmazonEKSClusterAdminPolicy")


def test_the_runner_reaches_the_api_on_443_and_takes_no_traffic() -> None:
    plan = stack_plan(STACK)
    runner_rules = [r for r in plan["resources"] if "ci-runner" in r["urn"] and "SecurityGroup" in r["type"]]
    ingress = [r for r in runner_rules if r["type"].endswith("SecurityGroupIngressRule")]
    egress = [r for r in runner_rules if r["type"].endswith("SecurityGroupEgressRule")]
    (to_api,) = ingress
    assert (to_api["inputs"]["fromPort"], to_api["inputs"]["toPort"], to_api["inputs"]["ipProtocol"]) == (
        443,
        443,
        "tcp",
    )
    (sg,) = [r for r in runner_rules if r["type"] == "aws:ec2/securityGroup:SecurityGroup"]
    assert to_api["inputs"]["referencedSecurityGroupId"] == sg["id"]
    assert to_api["inputs"]["securityGroupId"] != sg["id"], "the rule opens the cluster's group, not the runner's"
    assert [(e["inputs"]["fromPort"], e["inputs"]["toPort"]) for e in egress] == [(443, 443)]


# --------------------------------------------------------------------------- IAM

SERVICES = {"ec2": "ec2", "logs": "logs", "s3": "s3", "kms": "kms", "codeconnections": "codeconnections"}
S3_PERMISSION_ONLY = {"s3:ListBucket"}  # the ListObjects(V2) operations (Service Authorization Reference, S3)

POLICY = ci_runner.runner_policy(
    log_group_arn="arn:aws:logs:us-west-2:123456789012:log-group:/aws/codebuild/x",
    subnet_arns=["arn:aws:ec2:us-west-2:123456789012:subnet/subnet-1"],
    network_interfaces_arn="arn:aws:ec2:us-west-2:123456789012:network-interface/*",
    connection_arn="arn:aws:codeconnections:us-west-2:123456789012:connection/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    state_bucket="state",
    secrets_key_arn="arn:aws:kms:us-west-2:123456789012:key/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
)


def actions(doc: str) -> list[str]:
    out: list[str] = []
    for st in json.loads(doc)["Statement"]:
        out.extend([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    return out


def test_every_action_is_an_operation_or_a_documented_permission() -> None:
    permission_only = set(RUNNER["permission_only_actions"]) | S3_PERMISSION_ONLY
    for action in set(actions(POLICY)) - permission_only:
        prefix, _, operation = action.partition(":")
        model = SESSION.get_service_model(SERVICES[prefix])
        assert operation in model.operation_names, f"{action}: no such operation in botocore's model"


def test_the_documented_vpc_and_connection_permissions_and_no_more() -> None:
    got = set(actions(POLICY))
    assert set(RUNNER["vpc_actions"]) <= got and set(RUNNER["connection_actions"]) <= got
    assert not any(a.endswith("*") for a in got)
    (eni,) = [st for st in json.loads(POLICY)["Statement"] if st["Action"] == "ec2:CreateNetworkInterfacePermission"]
    assert eni["Condition"]["StringEquals"] == {"ec2:AuthorizedService": "codebuild.amazonaws.com"}
    assert eni["Condition"]["ArnEquals"]["ec2:Subnet"] == ["arn:aws:ec2:us-west-2:123456789012:subnet/subnet-1"]


def test_only_the_given_state_and_key() -> None:
    bare = ci_runner.runner_policy(
        log_group_arn="arn:aws:logs:us-west-2:1:log-group:g", subnet_arns=[], network_interfaces_arn="arn:eni/*"
    )
    assert not [a for a in actions(bare) if a.startswith(("s3:", "kms:", "codeconnections:"))]


def test_only_this_project_may_assume_the_role() -> None:
    plan = stack_plan("trn1-llama2-aws")
    (role,) = [r for r in plan["resources"] if r["type"] == "aws:iam/role:Role" and r["name"] == "ci-runner-role"]
    (st,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    assert st["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert st["Condition"]["ArnLike"] == {
        "aws:SourceArn": "arn:aws:codebuild:us-west-2:123456789012:project/trn1-llama2-ci-runner"
    }


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("runner", "line"),
    [
        ({"enabled": True}, "ciRunner.repository: required when enabled"),
        ({"repository": "not a repo"}, "ciRunner.repository: 'not a repo' is not a GitHub repository"),
        ({"connectionArn": "arn:aws:iam::1:role/x"}, "ciRunner.connectionArn:"),
        ({"computeType": "BUILD_GENERAL1_HUGE"}, "ciRunner.computeType:"),
        ({"buildTimeoutMinutes": 3000}, "ciRunner.buildTimeoutMinutes:"),
        ({"stateBucket": "Bad_Bucket"}, "ciRunner.stateBucket:"),
    ],
)
def test_bad_runner_config_names_the_key(runner: dict[str, Any], line: str) -> None:
    values = dict(stack_values(STACK))
    values["llm-training-eks:ciRunner"] = runner
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    assert any(p.startswith(line) for p in e.value.problems), e.value.problems
