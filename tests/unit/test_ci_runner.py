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
from tests.repo.test_workflows import WORKFLOWS, _load

STACK = "trn1-llama2-aws"
SESSION = botocore.session.get_session()
CODEBUILD = SESSION.get_service_model("codebuild")
EKS = SESSION.get_service_model("eks")
RUNNER = upstream.facts("codebuild-actions-runner")
IMAGE = upstream.facts("codebuild-image-standard-7.0")
WEBHOOKS = upstream.facts("codebuild-webhooks-2026-11")
ACCESS = upstream.facts("aws-eks-access-policies-2024-12")
K8S_AWAIT = upstream.facts("pulumi-kubernetes-4.32.0-await")
DIY = upstream.facts("pulumi-diy-backend-3.259.0")
WORKFLOW_DOCS = {p.name: _load(p) for p in WORKFLOWS}


def enum(model: Any, shape: str) -> list[str]:
    return list(model.shape_for(shape).enum)


def planned_all(type_: str) -> dict[str, dict[str, Any]]:
    """The runner resources of a type, by resource name."""
    return {
        r["name"]: dict(r["inputs"])
        for r in stack_plan(STACK)["resources"]
        if r["type"] == type_ and "ci-runner" in r["urn"]
    }


def planned(type_: str, kind: str = "deploy") -> dict[str, Any]:
    """The one resource of a type of the runner of `kind` (the deploy runner keeps the old names)."""
    (found,) = [i for n, i in planned_all(type_).items() if ("-preview-" in n) == (kind == "preview")]
    return found


KINDS = ("preview", "deploy")


@pytest.mark.parametrize("kind", KINDS)
def test_each_project_is_a_valid_codebuild_project(kind: str) -> None:
    p = planned("aws:codebuild/project:Project", kind)
    name = CODEBUILD.shape_for("ProjectName").metadata
    assert re.fullmatch(name["pattern"], p["name"]) and name["min"] <= len(p["name"]) <= name["max"]
    assert p["environment"]["type"] in enum(CODEBUILD, "EnvironmentType")
    assert p["environment"]["computeType"] in enum(CODEBUILD, "ComputeType")
    assert p["environment"]["imagePullCredentialsType"] in enum(CODEBUILD, "ImagePullCredentialsType")
    assert p["environment"]["image"] == IMAGE["image"]
    assert p["artifacts"]["type"] in enum(CODEBUILD, "ArtifactsType")
    assert p["source"]["type"] in enum(CODEBUILD, "SourceType")
    assert p["source"]["auth"]["type"] in enum(CODEBUILD, "SourceAuthType")
    timeout, queued = CODEBUILD.shape_for("BuildTimeOut").metadata, CODEBUILD.shape_for("TimeOut").metadata
    assert timeout["min"] <= p["buildTimeout"] <= timeout["max"]
    assert queued["min"] <= p["queuedTimeout"] <= queued["max"]
    assert p["logsConfig"]["cloudwatchLogs"]["status"] in enum(CODEBUILD, "LogsConfigStatusType")
    assert p["environment"]["privilegedMode"] is False


def test_two_runners_two_roles() -> None:
    projects = {k: planned("aws:codebuild/project:Project", k) for k in KINDS}
    assert projects["deploy"]["name"] == "trn1-llama2-ci-runner", "the deploy runner keeps the old project"
    assert projects["preview"]["name"] == "trn1-llama2-ci-preview"
    assert projects["preview"]["serviceRole"] != projects["deploy"]["serviceRole"]
    assert projects["preview"]["buildTimeout"] < projects["deploy"]["buildTimeout"]


def test_the_projects_run_in_the_private_subnets_of_the_vpc() -> None:
    plan = stack_plan(STACK)
    private = {
        r["id"]
        for r in plan["resources"]
        if r["type"] == "aws:ec2/subnet:Subnet" and not r["inputs"].get("mapPublicIpOnLaunch")
    }
    for kind in KINDS:
        vpc = planned("aws:codebuild/project:Project", kind)["vpcConfig"]
        assert vpc["subnets"] and set(vpc["subnets"]) <= private


def test_config_limits_are_the_apis() -> None:
    assert set(ComputeType.__args__) <= set(enum(CODEBUILD, "ComputeType"))
    for key, shape in (
        ("build_timeout_minutes", "BuildTimeOut"),
        ("preview_build_timeout_minutes", "BuildTimeOut"),
        ("queued_timeout_minutes", "TimeOut"),
    ):
        limits = CODEBUILD.shape_for(shape).metadata
        bounds = {type(m).__name__: m for m in CiRunnerConfig.model_fields[key].metadata}
        assert (bounds["Ge"].ge, bounds["Le"].le) == (limits["min"], limits["max"]), key


# --------------------------------------------------------------------------- who may start a runner


def _filters(kind: str) -> dict[str, str]:
    hook = planned("aws:codebuild/webhook:Webhook", kind)
    assert hook["buildType"] in enum(CODEBUILD, "WebhookBuildType")
    ((group,),) = [[g["filters"]] for g in hook["filterGroups"]]
    assert all(f["type"] in enum(CODEBUILD, "WebhookFilterType") for f in group)
    assert not any(f.get("excludeMatchedPattern") for f in group)
    return {f["type"]: f["pattern"] for f in group}


@pytest.mark.parametrize("kind", KINDS)
def test_a_runner_takes_only_queued_jobs_of_its_accounts_and_workflows(kind: str) -> None:
    filters = _filters(kind)
    assert set(filters) == {"EVENT", "ACTOR_ACCOUNT_ID", "WORKFLOW_NAME"}, "one group: every filter must match"
    assert filters["EVENT"] == RUNNER["webhook_event"] == ci_runner.WORKFLOW_JOB_QUEUED
    assert WEBHOOKS["best_practices"]["actor_filter"] in filters
    runner = stack_values(STACK)["llm-training-eks:ciRunner"]
    ids = runner["previewActorIds" if kind == "preview" else "deployActorIds"]
    others = [*sorted(set(runner["previewActorIds"]) | set(runner["deployActorIds"]) | {7}), ids[0] * 10]
    actor = re.compile(filters["ACTOR_ACCOUNT_ID"])
    assert [i for i in others if actor.search(str(i))] == sorted(ids), "these accounts, no prefix or suffix"
    workflow = re.compile(filters["WORKFLOW_NAME"])
    names = [doc["name"] for doc in WORKFLOW_DOCS.values()]
    label = ci_runner.runner_label("${{ matrix." + kind + " }}")
    users = {
        doc["name"] for doc in WORKFLOW_DOCS.values() if any(j.get("runs-on") == label for j in doc["jobs"].values())
    }
    assert users and {n for n in names if workflow.search(n)} == users, "exactly the workflows that use it"


@pytest.mark.parametrize("kind", KINDS)
def test_pull_requests_need_approval_as_the_api_defines_it(kind: str) -> None:
    policy = planned("aws:codebuild/webhook:Webhook", kind)["pullRequestBuildPolicy"]
    assert policy["requiresCommentApproval"] in enum(CODEBUILD, "PullRequestBuildCommentApproval")
    assert set(policy["approverRoles"]) <= set(enum(CODEBUILD, "PullRequestBuildApproverRole"))
    assert policy["requiresCommentApproval"] != "DISABLED"
    if kind == "deploy":
        assert policy["requiresCommentApproval"] == "ALL_PULL_REQUESTS"


def test_the_runner_label_is_the_one_codebuild_documents() -> None:
    label = ci_runner.runner_label("my-project")
    assert label == RUNNER["runs_on_label"].replace("<project-name>", "my-project")


# --------------------------------------------------------------------------- what each runner may do in the cluster


def test_each_role_has_its_access_entry_and_policy() -> None:
    arn = ACCESS["arn_prefix"]
    want = {"deploy": arn + "AmazonEKSClusterAdminPolicy", "preview": arn + "AmazonEKSAdminViewPolicy"}
    for kind in KINDS:
        entry = planned("aws:eks/accessEntry:AccessEntry", kind)
        assert entry["type"] == "STANDARD"
        assert "STANDARD" in EKS.shape_for("CreateAccessEntryRequest").members["type"].documentation
        assoc = planned("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", kind)
        assert assoc["accessScope"]["type"] in enum(EKS, "AccessScopeType")
        assert assoc["policyArn"] == want[kind] and assoc["policyArn"].removeprefix(arn) in ACCESS["policies"]
    view = ACCESS["policies"]["AmazonEKSAdminViewPolicy"]["rules"]
    assert view == [{"api_groups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}], "read-only"


def test_the_view_policy_cannot_refresh_what_the_upper_layers_manage() -> None:
    """A drift check (`preview --refresh`) reads every object; pulumi-kubernetes fails a refresh on
    Forbidden. The objects the View policy does not cover are why the preview runner reads with
    AmazonEKSAdminViewPolicy."""
    view = ACCESS["policies"]["AmazonEKSViewPolicy"]
    assert K8S_AWAIT["refresh_forbidden"].startswith("fails") and K8S_AWAIT["preview_forbidden"].startswith(
        "falls back"
    )
    uncovered = set()
    for stack in ("trn1-llama2-cluster", "trn1-llama2-runs"):
        for r in stack_plan(stack)["resources"]:
            if not r["type"].startswith("kubernetes:") or r["type"].startswith("kubernetes:helm.sh"):
                continue
            group = r["inputs"].get("apiVersion", "").rpartition("/")[0]
            kind = r["inputs"].get("kind", "")
            if group not in view["api_groups"] or (group == "" and kind == "Secret"):
                uncovered.add(f"{group or 'core'}/{kind}")
    assert {"kubeflow.org/MPIJob", "core/Secret"} <= uncovered, uncovered


def test_the_runners_reach_the_api_on_443_and_take_no_traffic() -> None:
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
    for kind in KINDS:
        assert planned("aws:codebuild/project:Project", kind)["vpcConfig"]["securityGroupIds"] == [sg["id"]]


# --------------------------------------------------------------------------- IAM

SERVICES = {
    "ec2": "ec2",
    "logs": "logs",
    "s3": "s3",
    "kms": "kms",
    "codeconnections": "codeconnections",
    "codebuild": "codebuild",
    "ecr": "ecr",
}
S3_PERMISSION_ONLY = {"s3:ListBucket"}  # the ListObjects(V2) operations (Service Authorization Reference, S3)
COMMON = {
    "log_group_arn": "arn:aws:logs:us-west-2:123456789012:log-group:/aws/codebuild/x",
    "subnet_arns": ["arn:aws:ec2:us-west-2:123456789012:subnet/subnet-1"],
    "network_interfaces_arn": "arn:aws:ec2:us-west-2:123456789012:network-interface/*",
    "connection_arn": "arn:aws:codeconnections:us-west-2:123456789012:connection/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "secrets_key_arn": "arn:aws:kms:us-west-2:123456789012:key/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
}
DEPLOY = ci_runner.runner_policy(
    **COMMON,
    state=ci_runner.StateAccess("state", ("prod-cluster", "prod-runs")),
    image_status=("arn:aws:codebuild:us-west-2:1:project/prod-*-image", "arn:aws:ecr:us-west-2:1:repository/prod/*"),
)
PREVIEW = ci_runner.runner_policy(**COMMON, state=ci_runner.StateAccess("state"))


def actions(doc: str) -> list[str]:
    out: list[str] = []
    for st in json.loads(doc)["Statement"]:
        out.extend([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    return out


def allowed(doc: str, action: str) -> list[str]:
    """The resources `doc` allows `action` on."""
    out: list[str] = []
    for st in json.loads(doc)["Statement"]:
        if action in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"]):
            out.extend([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"])
    return out


@pytest.mark.parametrize("doc", [DEPLOY, PREVIEW], ids=["deploy", "preview"])
def test_every_action_is_an_operation_or_a_documented_permission(doc: str) -> None:
    permission_only = set(RUNNER["permission_only_actions"]) | S3_PERMISSION_ONLY
    for action in set(actions(doc)) - permission_only:
        prefix, _, operation = action.partition(":")
        model = SESSION.get_service_model(SERVICES[prefix])
        assert operation in model.operation_names, f"{action}: no such operation in botocore's model"


def test_the_documented_vpc_and_connection_permissions_and_no_more() -> None:
    got = set(actions(DEPLOY))
    assert set(RUNNER["vpc_actions"]) <= got and set(RUNNER["connection_actions"]) <= got
    assert not any(a.endswith("*") for a in got)
    (eni,) = [st for st in json.loads(DEPLOY)["Statement"] if st["Action"] == "ec2:CreateNetworkInterfacePermission"]
    assert eni["Condition"]["StringEquals"] == {"ec2:AuthorizedService": "codebuild.amazonaws.com"}
    assert eni["Condition"]["ArnEquals"]["ec2:Subnet"] == ["arn:aws:ec2:us-west-2:123456789012:subnet/subnet-1"]


def test_a_preview_reads_the_state_and_writes_nothing() -> None:
    """A DIY-backend preview takes no lock and writes no object (pulumi/pulumi v3.259.0)."""
    assert DIY["preview_takes_lock"] is False and DIY["preview_writes"] == "none"
    assert not [a for a in actions(PREVIEW) if a in ci_runner.STATE_WRITE_ACTIONS]
    assert allowed(PREVIEW, "s3:GetObject") == ["arn:aws:s3:::state/.pulumi/*"]
    assert not [a for a in actions(PREVIEW) if a.startswith(("codebuild:", "ecr:"))]


def test_a_deploy_writes_only_its_own_stacks() -> None:
    writes = allowed(DEPLOY, "s3:PutObject")
    assert writes == allowed(DEPLOY, "s3:DeleteObject")
    assert "arn:aws:s3:::state/.pulumi/locks/organization/llm-training-eks/prod-runs/*" in writes
    assert "arn:aws:s3:::state/.pulumi/stacks/llm-training-eks/prod-cluster.json*" in writes
    assert not [w for w in writes if "prod-aws" in w or w.endswith(".pulumi/*")], "never the aws layer's state"
    # Every kind of object an update writes (checkpoint, history, backups, lock) is covered.
    for part in ("stacks/", "history/", "backups/", "locks/"):
        assert any(f".pulumi/{part}" in w for w in writes), part


def test_the_secrets_key_is_only_decrypted() -> None:
    """The cloud secrets manager decrypts the stack's data key; Encrypt only makes a new stack's key."""
    assert DIY["secrets_kms_calls"]["open_stack"] == "Decrypt"
    for doc in (DEPLOY, PREVIEW):
        assert [a for a in actions(doc) if a.startswith("kms:")] == ["kms:Decrypt"]


def test_only_the_given_state_and_key() -> None:
    bare = ci_runner.runner_policy(
        log_group_arn="arn:aws:logs:us-west-2:1:log-group:g", subnet_arns=[], network_interfaces_arn="arn:eni/*"
    )
    assert not [a for a in actions(bare) if a.startswith(("s3:", "kms:", "codeconnections:", "codebuild:", "ecr:"))]


def test_the_planned_roles_are_the_ones_tested() -> None:
    plan = stack_plan(STACK)
    policies = {
        r["name"]: json.loads(r["inputs"]["policy"])
        for r in plan["resources"]
        if r["type"] == "aws:iam/rolePolicy:RolePolicy" and "ci-runner" in r["urn"]
    }
    deploy, preview = policies["ci-runner-policy"], policies["ci-runner-preview-policy"]
    writes = [st for st in deploy["Statement"] if "s3:PutObject" in st["Action"]]
    assert writes and not [st for st in preview["Statement"] if "s3:PutObject" in st["Action"]]
    assert any("trn1-llama2-runs" in r for st in writes for r in st["Resource"])


@pytest.mark.parametrize("kind", KINDS)
def test_only_this_project_may_assume_the_role(kind: str) -> None:
    plan = stack_plan("trn1-llama2-aws")
    name = "ci-runner-role" if kind == "deploy" else "ci-runner-preview-role"
    (role,) = [r for r in plan["resources"] if r["type"] == "aws:iam/role:Role" and r["name"] == name]
    (st,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    assert st["Principal"] == {"Service": "codebuild.amazonaws.com"}
    project = planned("aws:codebuild/project:Project", kind)["name"]
    assert st["Condition"]["ArnLike"] == {
        "aws:SourceArn": f"arn:aws:codebuild:us-west-2:123456789012:project/{project}"
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
        ({"queuedTimeoutMinutes": 481}, "ciRunner.queuedTimeoutMinutes:"),
        ({"stateBucket": "Bad_Bucket"}, "ciRunner.stateBucket:"),
        ({"enabled": True, "repository": "o/r"}, "ciRunner.previewActorIds: required when enabled"),
        ({"enabled": True, "repository": "o/r", "previewActorIds": [1]}, "ciRunner.deployActorIds: required"),
        ({"previewActorIds": [0]}, "ciRunner.previewActorIds:"),
        ({"deployActorIds": [5, 5]}, "ciRunner.deployActorIds:"),
        ({"deployStacks": ["prod runs"]}, "ciRunner.deployStacks:"),
    ],
)
def test_bad_runner_config_names_the_key(runner: dict[str, Any], line: str) -> None:
    values = dict(stack_values(STACK))
    values["llm-training-eks:ciRunner"] = runner
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    assert any(p.startswith(line) for p in e.value.problems), e.value.problems
