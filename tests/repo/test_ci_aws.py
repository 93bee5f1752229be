"""The AWS side of CI (ci/aws/): the GitHub OIDC roles' trust and permissions, and the state
bucket commands, held against botocore's models (every command and its parameters),
parliament 1.6.4's IAM database (actions, resource formats, condition operators and keys, from
the Service Authorization Reference) and GitHub's OIDC claims (tests/upstream/github-actions-limits-2026-11.yaml).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name
from botocore.validate import validate_parameters
from parliament import analyze_policy_string, expand_action, iam_definition

from tests import upstream
from tests.conftest import ROOT
from tools.delivery import budget

AWS_DIR = ROOT / "ci" / "aws"
SESSION = botocore.session.get_session()
LIMITS = upstream.facts("github-actions-limits-2026-11")
CREDENTIALS = upstream.facts("configure-aws-credentials-v4.2.1")
VALUES = {
    "ACCOUNT_ID": "123456789012",
    "REGION": "us-west-2",
    "GITHUB_REPOSITORY": "my-org/llm-training-eks",
    "STATE_BUCKET": "my-org-pulumi-state",
    "SECRETS_KEY_ID": "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    "STATE_KEY_ARN": "arn:aws:kms:us-west-2:123456789012:key/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    "STACK": "prod-aws",
    "CLUSTER": "prod",
}
SERVICES = {"s3api": "s3", "iam": "iam", "kms": "kms"}
# Findings that are information, not faults: a Describe*/List* on "*" is how those APIs work.
INFORMATIONAL = {"RESOURCE_STAR"}


def filled(text: str) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: VALUES[m.group(1)], text)


def document(name: str) -> str:
    return filled((AWS_DIR / name).read_text())


def commands() -> list[list[str]]:
    (block,) = re.findall(r"```sh\n(.*?)```", (AWS_DIR / "README.md").read_text(), re.S)
    out = []
    for line in block.splitlines():
        line = line.split("   #")[0].strip()
        if line.startswith("aws "):
            out.append(shlex.split(line.replace("$(envsubst < ", "@file:").replace(')"', '"')))
    return out


def value(shape: Any, text: str) -> Any:
    text = re.sub(r"\$(\w+)", lambda m: VALUES[m.group(1)], text)
    if text.startswith("@file:"):
        return (
            json.loads(document(Path(text.removeprefix("@file:")).name))
            if shape.type_name == "structure"
            else document(Path(text.removeprefix("@file:")).name)
        )
    if shape.type_name == "structure":  # the CLI's shorthand Key=Value
        key, _, v = text.partition("=")
        return {key: v}
    if shape.type_name == "list":
        return [text]
    if shape.type_name in ("integer", "long"):
        return int(text)
    return text


def test_every_command_is_an_operation_with_valid_parameters() -> None:
    found = commands()
    assert len(found) >= 14
    for argv in found:
        model = SESSION.get_service_model(SERVICES[argv[1]])
        ops = {xform_name(op, "-"): op for op in model.operation_names}
        assert argv[2] in ops, f"aws {argv[1]} {argv[2]}: no such operation"
        op = model.operation_model(ops[argv[2]])
        members = {xform_name(m, "-"): m for m in op.input_shape.members}
        params: dict[str, Any] = {}
        args = iter(argv[3:])
        for flag in args:
            name = flag.removeprefix("--")
            if name == "region":
                next(args)
                continue
            assert name in members, f"aws {argv[1]} {argv[2]}: no parameter --{name}"
            member = members[name]
            params[member] = value(op.input_shape.members[member], next(args))
        for policy in ("Policy", "PolicyDocument", "AssumeRolePolicyDocument"):
            if policy in params:
                json.loads(params[policy])
        validate_parameters(params, op.input_shape)


def findings(doc: str) -> list[str]:
    return [f"{f.issue}: {f.detail}" for f in analyze_policy_string(doc).findings if f.issue not in INFORMATIONAL]


@pytest.mark.parametrize("name", ["preview-permissions.json", "deploy-permissions.json", "state-bucket-policy.json"])
def test_permissions_are_valid_iam_with_actions_that_exist(name: str) -> None:
    doc = document(name)
    assert findings(doc) == []
    for st in json.loads(doc)["Statement"]:
        for action in [st["Action"]] if isinstance(st["Action"], str) else st["Action"]:
            assert expand_action(action), action


def _access_levels(doc: str) -> dict[str, str]:
    levels = {}
    by_prefix = {s["prefix"]: {p["privilege"]: p["access_level"] for p in s["privileges"]} for s in iam_definition}
    for st in json.loads(doc)["Statement"]:
        if st["Effect"] != "Allow":
            continue
        for action in [st["Action"]] if isinstance(st["Action"], str) else st["Action"]:
            for a in expand_action(action):
                levels[f"{a['service']}:{a['action']}"] = by_prefix[a["service"]][a["action"]]
    return levels


def test_the_preview_role_writes_nothing() -> None:
    writes = {
        a for a, level in _access_levels(document("preview-permissions.json")).items() if level not in ("Read", "List")
    }
    # kms:Decrypt: the secrets manager opens the stack's data key (a preview runs the program).
    assert writes == {"kms:Decrypt"}


def test_the_deploy_role_writes_only_this_stacks_state_and_passes_roles_only_to_their_services() -> None:
    doc = json.loads(document("deploy-permissions.json"))
    state = [st for st in doc["Statement"] if st["Sid"] == "WriteThisStacksState"]
    (st,) = state
    assert all("/prod-aws" in r for r in st["Resource"])
    (passing,) = [st for st in doc["Statement"] if "iam:PassRole" in st["Action"]]
    assert set(passing["Condition"]["StringEquals"]["iam:PassedToService"]) <= {
        "codebuild.amazonaws.com",
        "ec2.amazonaws.com",
        "eks.amazonaws.com",
        "events.amazonaws.com",
        "vpc-flow-logs.amazonaws.com",
    }


@pytest.mark.parametrize(
    ("name", "environment"),
    [("github-oidc-trust-preview.json", "preview"), ("github-oidc-trust-deploy.json", "prod-aws")],
)
def test_each_trust_admits_one_environment_of_this_repository(name: str, environment: str) -> None:
    (st,) = json.loads(document(name))["Statement"]
    oidc = LIMITS["oidc"]
    assert st["Principal"] == {"Federated": f"arn:aws:iam::123456789012:oidc-provider/{oidc['provider_host']}"}
    assert st["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert st["Action"].split(":")[1] in SESSION.get_service_model("sts").operation_names
    sub = (
        oidc["sub_environment"]
        .replace("<owner>/<repo>", VALUES["GITHUB_REPOSITORY"])
        .replace("<environment>", environment)
    )
    host = oidc["provider_host"]
    assert st["Condition"] == {"StringEquals": {f"{host}:aud": oidc["audience"], f"{host}:sub": sub}}
    assert oidc["audience"] == CREDENTIALS["default_audience"], "what the pinned action sends"
    assert sorted(st["Condition"]["StringEquals"]) == sorted(oidc["condition_keys"])


def test_sessions_outlive_the_jobs_that_use_them() -> None:
    durations = {
        argv[argv.index("--role-name") + 1]: int(argv[argv.index("--max-session-duration") + 1])
        for argv in commands()
        if argv[2] == "create-role"
    }
    iam = SESSION.get_service_model("iam").shape_for("roleMaxSessionDurationType").metadata
    assert all(iam["min"] <= d <= iam["max"] for d in durations.values())
    assert durations["llm-training-eks-deploy-$STACK"] == budget.DEPLOY_ROLE_MAX_SESSION_SECONDS
    # Preview jobs take the action's default session (one hour), longer than they may run.
    assert (
        budget.PREVIEW_JOB_MINUTES * 60
        < CREDENTIALS["default_role_duration_seconds"]
        <= durations["llm-training-eks-preview"]
    )


def test_the_state_bucket_is_versioned_encrypted_private_and_bounded() -> None:
    ops = {argv[2]: argv for argv in commands() if argv[1] == "s3api"}
    assert "Status=Enabled" in ops["put-bucket-versioning"]
    (rule,) = json.loads(document("state-bucket-encryption.json"))["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert all(json.loads(document("state-bucket-public-access-block.json")).values())
    (lifecycle,) = json.loads(document("state-bucket-lifecycle.json"))["Rules"]
    assert lifecycle["Status"] == "Enabled" and lifecycle["NoncurrentVersionExpiration"]["NoncurrentDays"] > 0
