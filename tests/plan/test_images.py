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

from config.workloads import RECIPES
from facts import instances
from facts.images import IMAGES
from infra import images
from tests import upstream
from tests.conftest import resources, run_plan, stack_plan, stack_values

RECIPE_OF = {r.REPOSITORY: r for r in RECIPES.values() if r.REPOSITORY}

PROJECT = "aws:codebuild/project:Project"
SESSION = botocore.session.get_session()


def projects(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for p in resources(plan, PROJECT):
        if "ci-runner" in p["urn"]:
            continue  # the CI runners (tests/unit/test_ci_runner.py)
        env = {v["name"]: v["value"] for v in p["inputs"]["environment"]["environmentVariables"]}
        out[env["REPOSITORY_URI"].rsplit("/", 1)[-1]] = p["inputs"]
    return out


def test_only_the_images_the_runs_use_are_built() -> None:
    assert set(projects(stack_plan("trn1-llama2"))) == {"neuronx-nemo-megatron"}
    assert set(projects(stack_plan("p4de-nemo"))) == {"nemo"}
    assert set(projects(stack_plan("trn1-shared"))) == {"bert-neuronx"}
    assert projects(stack_plan("dev")) == {}


def test_an_aws_layer_builds_only_the_images_its_accelerators_can_run() -> None:
    """A trn1 environment builds the Neuron images that train on trn1: not NVIDIA's NeMo image, and
    not the TorchNeuron one (Trn2 and Trn3 only)."""
    built = set(projects(stack_plan("trn1-llama2-aws")))
    trn1 = instances.get("trn1.32xlarge")
    assert built == {r for r, recipe in RECIPE_OF.items() if recipe.built_image_trains_on(trn1)}
    assert "nemo" not in built and "torchtitan" not in built and "neuronx-distributed" in built


def test_each_image_builds_on_a_compute_type_sized_for_it() -> None:
    sizes = upstream.facts("codebuild-webhooks-2026-11")["compute_types"]
    html = SESSION.get_service_model("codebuild").shape_for("ProjectEnvironment").members["computeType"].documentation
    doc = " ".join(re.sub("<[^>]+>", " ", html).split()).replace(" :", ":")
    for image in IMAGES.values():
        size = sizes[image.compute_type]
        # botocore's own text states each type's memory and vCPUs; the guide adds the disk.
        assert f"{image.compute_type}: Use up to {size['memory_gib']} GiB memory and {size['vcpus']} vCPUs" in doc, doc
        assert image.sizing and image.build_timeout_minutes <= 180
    assert IMAGES["nemo"].compute_type != "BUILD_GENERAL1_2XLARGE", "no image needs the largest type"
    assert sizes[IMAGES["nemo"].compute_type]["disk_gb"] > sizes[IMAGES["bert-neuronx"].compute_type]["disk_gb"]
    for repo, p in projects(stack_plan("trn1-llama2-aws")).items():
        assert p["environment"]["computeType"] == IMAGES[repo].compute_type


def test_a_rebuild_uploads_the_source_under_a_new_key() -> None:
    """Raising registry.repositories.<repo>.rebuild is a new object: S3's Object Created event
    starts the build (a changed key replaces the object; the old key is never uploaded again)."""
    values = dict(stack_values("trn1-llama2-aws"))
    values["llm-training-eks:registry"] = {"repositories": {"neuronx-nemo-megatron": {"rebuild": 1}}}
    plan = run_plan(values, "trn1-llama2-aws")
    tag = IMAGES["neuronx-nemo-megatron"].tag
    (obj,) = [o for o in resources(plan, "aws:s3/bucketObjectv2:BucketObjectv2")]
    assert obj["inputs"]["key"] == f"images/neuronx-nemo-megatron/{tag}.rebuild-1.zip"
    (p,) = projects(plan).values()
    assert p["source"]["location"].endswith(obj["inputs"]["key"]), "the project builds what was uploaded"
    assert images.source_key("neuronx-nemo-megatron", tag) == f"images/neuronx-nemo-megatron/{tag}.zip"


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
