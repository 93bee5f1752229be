"""`python -m tools.images`: a run's image that will not come is reported at once, with the way
to build it again. ECR and CodeBuild answer through botocore's Stubber, which holds every request
and every answer to the services' models (DescribeImages, ListBuildsForProject, BatchGetBuilds,
StartBuild; the StatusType enum)."""

from __future__ import annotations

import io
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from facts.images import IMAGES
from tools import images

TAG = IMAGES["neuronx-nemo-megatron"].tag
PROJECT = "trn1-llama2-neuronx-nemo-megatron-image"
REPOSITORY = "trn1-llama2/neuronx-nemo-megatron"
STATES = botocore.session.get_session().get_service_model("codebuild").shape_for("StatusType").enum


class Session:
    """A boto3 session whose clients answer from stubs."""

    def __init__(self) -> None:
        self.clients = {
            name: boto3.client(name, region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
            for name in ("ecr", "codebuild")
        }
        self.stubs = {name: Stubber(client) for name, client in self.clients.items()}

    def client(self, name: str) -> Any:
        return self.clients[name]


def build(status: str, *, retry: bool = False, tag: str = TAG, n: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"{PROJECT}:{n}",
        "buildStatus": status,
        "currentPhase": "BUILD",
        "environment": {
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:7.0",
            "computeType": "BUILD_GENERAL1_LARGE",
            "environmentVariables": [{"name": "IMAGE_TAG", "value": tag}],
        },
        "logs": {"deepLink": "https://console.aws.amazon.com/cloudwatch/log"},
    }
    if retry:
        out["autoRetryConfig"] = {"autoRetryLimit": 1, "autoRetryNumber": 0, "nextAutoRetry": f"{PROJECT}:{n + 1}"}
    return out


def stub(session: Session, *, pushed: bool, builds: list[dict[str, Any]]) -> None:
    ecr, codebuild = session.stubs["ecr"], session.stubs["codebuild"]
    request = {"repositoryName": REPOSITORY, "imageIds": [{"imageTag": TAG}]}
    if pushed:
        ecr.add_response("describe_images", {"imageDetails": [{"imageTags": [TAG]}]}, request)
        return
    ecr.add_client_error("describe_images", "ImageNotFoundException", expected_params=request)
    ids = [b["id"] for b in builds]
    listed = {"ids": ids} if ids else {}  # the model's `ids` has at least one member
    codebuild.add_response("list_builds_for_project", listed, {"projectName": PROJECT, "sortOrder": "DESCENDING"})
    if ids:
        codebuild.add_response("batch_get_builds", {"builds": builds}, {"ids": ids})


def check(session: Session) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    for s in session.stubs.values():
        s.activate()
    code = images.main(["check", "--stack", "trn1-llama2-runs"], stdout=out, stderr=err, session=session)
    for s in session.stubs.values():
        s.assert_no_pending_responses()
    return code, out.getvalue(), err.getvalue()


def test_a_runs_stack_needs_the_images_its_aws_layer_builds() -> None:
    region, wanted = images.wanted("trn1-llama2-runs")
    assert region == "us-west-2"
    assert wanted == [images.Wanted("neuronx-nemo-megatron", TAG, REPOSITORY, PROJECT, "trn1-llama2-aws")]
    # The aws layer builds every image its Trainium groups can run: the recipes' and the fabric
    # acceptance run's; not the TorchNeuron one (trn2/trn3 only).
    assert {w.repo for w in images.wanted("trn1-llama2-aws")[1]} == {
        "neuronx-nemo-megatron",
        "bert-neuronx",
        "neuronx-distributed",
        "neuron-fabric",
    }


@pytest.mark.parametrize(
    ("pushed", "builds", "code", "said"),
    [
        (True, [], 0, "pushed"),
        (False, [build("IN_PROGRESS")], 0, "building"),
        (False, [build("FAILED", retry=True)], 0, "CodeBuild retries it"),
        (False, [build("FAILED", n=2), build("FAILED", retry=True)], 1, "FAILED and no retry is left"),
        (False, [build("TIMED_OUT")], 1, "TIMED_OUT and no retry is left"),
        (False, [build("SUCCEEDED", tag="0" * 16)], 1, "never built"),
        (False, [], 1, "never built"),
    ],
    ids=["pushed", "building", "retrying", "failed", "timed-out", "other-tag-only", "never-built"],
)
def test_check_fails_at_once_when_the_image_will_not_come(
    pushed: bool, builds: list[dict[str, Any]], code: int, said: str
) -> None:
    assert {b["buildStatus"] for b in builds} <= set(STATES)
    session = Session()
    stub(session, pushed=pushed, builds=builds)
    got, out, err = check(session)
    assert got == code and said in (out if code == 0 else err)
    if code:
        assert "python -m tools.images rebuild --stack trn1-llama2-aws --image neuronx-nemo-megatron" in err
        assert "registry.repositories.neuronx-nemo-megatron.rebuild" in err


def test_rebuild_starts_the_project_of_the_image() -> None:
    session = Session()
    session.stubs["codebuild"].add_response("start_build", {"build": {"id": f"{PROJECT}:9"}}, {"projectName": PROJECT})
    session.stubs["codebuild"].activate()
    out = io.StringIO()
    code = images.main(["rebuild", "--stack", "trn1-llama2-runs"], stdout=out, session=session)
    session.stubs["codebuild"].assert_no_pending_responses()
    assert code == 0 and f"started {PROJECT}:9" in out.getvalue()


def test_bad_usage_is_exit_2() -> None:
    err = io.StringIO()
    assert images.main(["rebuild", "--stack", "trn1-llama2-runs", "--image", "nemo"], stderr=err) == 2
    assert err.getvalue().startswith("error: --image nemo: trn1-llama2-runs builds or uses no such image")
