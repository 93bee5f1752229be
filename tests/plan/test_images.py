"""The image builder: an AWS CodeBuild project per image of images/, building without a local
Docker daemon, pushing the tag the training runs name. Inputs are held to botocore's CodeBuild
model (the enums and limits the API enforces) and the IAM actions to the services' operations."""

from __future__ import annotations

import json
import re
from typing import Any

import botocore.session
import pytest
import yaml

from facts.images import IMAGES
from infra import images
from tests.conftest import resources, stack_plan

PROJECT = "aws:codebuild/project:Project"
SESSION = botocore.session.get_session()


def projects(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for p in resources(plan, PROJECT):
        env = {v["name"]: v["value"] for v in p["inputs"]["environment"]["environmentVariables"]}
        out[env["REPOSITORY_URI"].rsplit("/", 1)[-1]] = p["inputs"]
    return out


def test_only_the_images_the_runs_use_are_built() -> None:
    assert set(projects(stack_plan("trn1-llama2"))) == {"neuronx-nemo-megatron"}
    assert set(projects(stack_plan("p4de-nemo"))) == {"nemo"}
    assert set(projects(stack_plan("trn1-shared"))) == {"bert-neuronx"}
    assert projects(stack_plan("dev")) == {}


@pytest.mark.parametrize("stack", ["trn1-llama2", "p4de-nemo", "trn1-bert"])
def test_one_project_per_image_with_inputs_the_api_accepts(stack: str) -> None:
    found = projects(stack_plan(stack))
    assert found
    create = SESSION.get_service_model("codebuild").operation_model("CreateProject").input_shape.members
    env_shape = create["environment"].members
    for repo, p in found.items():
        name = create["name"].metadata
        assert re.fullmatch(name["pattern"], p["name"]) and name["min"] <= len(p["name"]) <= name["max"]
        assert p["environment"]["computeType"] in env_shape["computeType"].enum
        assert p["environment"]["type"] in env_shape["type"].enum
        assert p["environment"]["privilegedMode"] is True  # docker build needs it
        assert p["source"]["type"] in create["source"].members["type"].enum
        assert p["artifacts"]["type"] in create["artifacts"].members["type"].enum
        timeout = create["timeoutInMinutes"].metadata
        assert timeout["min"] <= p["buildTimeout"] <= timeout["max"]
        assert p["source"]["location"].endswith(f"/images/{repo}/{IMAGES[repo].tag}.zip")
        spec = yaml.safe_load(p["source"]["buildspec"])
        build = " ".join(spec["phases"]["build"]["commands"])
        assert 'docker build --pull --tag "$REPOSITORY_URI:$IMAGE_TAG" .' in build
        assert "describe-images" in build  # an already-pushed (immutable) tag is not rebuilt


def test_training_runs_name_the_tag_the_stack_builds() -> None:
    plan = stack_plan("trn1-llama2")
    built = {repo: next(v["value"] for v in p["environment"]["environmentVariables"] if v["name"] == "IMAGE_TAG")
             for repo, p in projects(plan).items()}  # fmt: skip
    (job,) = [r for r in resources(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob")]
    (c,) = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert c["image"].endswith(f"/trn1-llama2/neuronx-nemo-megatron:{built['neuronx-nemo-megatron']}")


def test_sources_are_uploaded_after_the_project_and_trigger_it() -> None:
    plan = stack_plan("trn1-bert")
    by_urn = {r["urn"]: r for r in plan["resources"]}
    for obj in resources(plan, "aws:s3/bucketObjectv2:BucketObjectv2"):
        deps = {by_urn[d]["type"] for d in obj["dependencies"] if d in by_urn}
        assert {PROJECT, "aws:cloudwatch/eventTarget:EventTarget"} <= deps
        assert obj["inputs"]["source"].startswith("<archive images/")
    (note,) = resources(plan, "aws:s3/bucketNotification:BucketNotification")
    assert note["inputs"]["eventbridge"] is True
    for rule in resources(plan, "aws:cloudwatch/eventRule:EventRule"):
        pattern = json.loads(rule["inputs"]["eventPattern"])
        assert pattern["detail-type"] == ["Object Created"]
        assert pattern["detail"]["object"]["key"][0]["prefix"].startswith("images/")


DOCS = {
    "builder": images.builder_policy(
        "arn:aws:s3:::b",
        "arn:aws:logs:us-west-2:1:log-group:/codebuild/x",
        ["arn:aws:ecr:us-west-2:1:repository/c/nemo"],
    ),
    "start": images.start_build_policy(["arn:aws:codebuild:us-west-2:1:project/p"]),
}
SERVICES = {"s3": "s3", "logs": "logs", "ecr": "ecr", "codebuild": "codebuild"}
# IAM actions that are permission names, not operation names (Service Authorization Reference).
ACTION_OPERATION = {"s3:GetObjectVersion": "GetObject"}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_action_is_an_operation_of_its_service(name: str) -> None:
    for st in json.loads(DOCS[name])["Statement"]:
        for action in st["Action"]:
            prefix, op = action.split(":")
            model = SESSION.get_service_model(SERVICES[prefix])
            assert ACTION_OPERATION.get(action, op) in model.operation_names, action


def test_builder_may_push_only_to_its_repositories() -> None:
    statements = {s["Sid"]: s for s in json.loads(DOCS["builder"])["Statement"]}
    assert statements["Push"]["Resource"] == ["arn:aws:ecr:us-west-2:1:repository/c/nemo"]
    assert statements["Login"]["Action"] == ["ecr:GetAuthorizationToken"]  # the one ECR action on "*"
    assert statements["Sources"]["Resource"] == "arn:aws:s3:::b/images/*"


def test_repository_arn_from_url() -> None:
    assert (
        images.repository_arn("123456789012.dkr.ecr.us-west-2.amazonaws.com/llm/nemo")
        == "arn:aws:ecr:us-west-2:123456789012:repository/llm/nemo"
    )
