"""Every wait ends before what waits on it.

awaited creates (the stack's offline plan: pulumi.com/timeoutSeconds, the providers' default
create timeouts)  <  the deploy job's timeout-minutes  <  the runner's CodeBuild build timeout
(in-VPC) or the OIDC session (GitHub-hosted)  <=  the platform's limit (CodeBuild's 2160 min,
the role's MaxSessionDuration and IAM's 12 h, GitHub's 6 h hosted jobs and the GITHUB_TOKEN's 24 h).
A runner or a session that ends first kills `pulumi up` holding the stack's lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml

from config.ci_runner import DEPLOY_BUILD_TIMEOUT_MINUTES
from facts.images import AUTO_RETRY_LIMIT, IMAGES, PULL_SECONDS, QUEUED_TIMEOUT_MINUTES
from tests import upstream
from tests.conftest import EXAMPLES, LAYERED_STACKS, ROOT, stack_plan, stack_values, stack_yaml
from tests.repo.test_delivery import DEPLOY, DRIFT, PR
from tools import ci
from tools.delivery import budget

SESSION = botocore.session.get_session()
CODEBUILD = SESSION.get_service_model("codebuild")
IAM = SESSION.get_service_model("iam")
LIMITS = upstream.facts("github-actions-limits-2026-11")
CREDENTIALS = upstream.facts("configure-aws-credentials-v4.2.1")
K8S = upstream.facts("pulumi-kubernetes-4.32.0-await")
TF = upstream.facts("terraform-provider-aws-create-timeouts")
ROUTES = {}


def routed(stack: str) -> dict[str, Any]:
    if stack not in ROUTES:
        ((entry,),) = [m for p, m in ci.route([stack], EXAMPLES).items() if m and p != "in_vpc"]
        ROUTES[stack] = entry
    return ROUTES[stack]


def test_the_bounds_are_the_providers() -> None:
    assert K8S["create_await_default_seconds"] == budget.KUBERNETES_DEFAULT_SECONDS
    assert K8S["helm_release_default_timeout_seconds"] == budget.HELM_RELEASE_DEFAULT_SECONDS
    assert {t: s // 60 for t, s in budget.AWS_CREATE_TIMEOUTS.items()} == TF["create_minutes"]
    assert (
        max(TF["create_minutes"][t] for t in ("aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway")) * 60
        <= budget.OTHER_AWS_SECONDS
    )
    assert LIMITS["hosted_job_minutes"] == budget.GITHUB_HOSTED_JOB_MINUTES
    assert LIMITS["self_hosted_job_minutes"] == budget.SELF_HOSTED_JOB_MINUTES
    assert LIMITS["github_token_hours"] * 60 == budget.GITHUB_TOKEN_MINUTES


def test_the_runs_chain_is_the_awaited_steps_in_order() -> None:
    seconds, names = budget.worst_case(stack_plan("trn1-llama2-runs"))
    assert names[0].startswith("llama2-image-") and names[-1].startswith("llama2-tokenize-")
    assert seconds == sum(
        int(r["inputs"]["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        for r in stack_plan("trn1-llama2-runs")["resources"]
        if r["name"] in names
    )
    assert seconds > 2 * 3600, "longer than CodeBuild's old 120-minute default: why the runner's life is derived"


def test_an_aws_layer_deploy_outlives_its_chain_and_its_session_outlives_the_job() -> None:
    entry = routed("trn1-llama2-aws")
    chain, _ = budget.worst_case(stack_plan("trn1-llama2-aws"))
    assert chain > CREDENTIALS["default_role_duration_seconds"], "the action's one-hour default would expire mid-up"
    assert chain < entry["timeout"] * 60 <= entry["session"] <= budget.DEPLOY_ROLE_MAX_SESSION_SECONDS
    assert entry["timeout"] <= budget.GITHUB_HOSTED_JOB_MINUTES
    assert IAM.shape_for("roleMaxSessionDurationType").metadata["max"] >= budget.DEPLOY_ROLE_MAX_SESSION_SECONDS
    (job,) = [DEPLOY["jobs"]["up-aws"]]
    assert job["timeout-minutes"] == "${{ matrix.timeout }}"
    (creds,) = [s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]
    assert creds["with"]["role-duration-seconds"] == "${{ matrix.session }}"
    # The documented role is created with that MaxSessionDuration (ci/aws/README.md).
    assert f"--max-session-duration {budget.DEPLOY_ROLE_MAX_SESSION_SECONDS}" in (ROOT / "ci/aws/README.md").read_text()


@pytest.mark.parametrize("stack", [s for s in LAYERED_STACKS if not s.endswith("-aws")])
def test_an_in_vpc_deploy_outlives_its_chain_and_its_runner_outlives_the_job(stack: str) -> None:
    entry = routed(stack)
    chain, _ = budget.worst_case(stack_plan(stack))
    runner = stack_values(ci.aws_stack_under(stack, EXAMPLES)[0]).get("llm-training-eks:ciRunner", {})
    life = runner.get("buildTimeoutMinutes", DEPLOY_BUILD_TIMEOUT_MINUTES)
    assert chain < entry["timeout"] * 60
    assert entry["timeout"] + budget.RUNNER_START_MINUTES <= life <= CODEBUILD.shape_for("BuildTimeOut").metadata["max"]
    assert entry["timeout"] < budget.GITHUB_TOKEN_MINUTES <= budget.SELF_HOSTED_JOB_MINUTES
    job = DEPLOY["jobs"][f"up-{entry['layer']}"]
    assert job["timeout-minutes"] == "${{ matrix.timeout }}"


def test_previews_and_drift_checks_end_before_the_preview_runner() -> None:
    life = stack_values("trn1-llama2-aws")["llm-training-eks:ciRunner"].get("previewBuildTimeoutMinutes", 60)
    jobs = [
        PR["jobs"]["preview-aws"],
        PR["jobs"]["preview-in-vpc"],
        DRIFT["jobs"]["drift-aws"],
        DRIFT["jobs"]["drift-in-vpc"],
    ]
    for job in jobs:
        assert job["timeout-minutes"] == budget.PREVIEW_JOB_MINUTES
    assert life >= budget.PREVIEW_JOB_MINUTES + budget.RUNNER_START_MINUTES
    for doc in (PR, DEPLOY, DRIFT):
        for name, job in doc["jobs"].items():
            assert "timeout-minutes" in job, f"{name}: GitHub's default is 360 min, longer than some runners live"


def test_an_image_check_waits_no_longer_than_its_build_can_take() -> None:
    for r in stack_plan("trn1-llama2-aws")["resources"]:
        if r["type"] == "aws:codebuild/project:Project" and r["name"].startswith("images-"):
            image = IMAGES[r["name"].removeprefix("images-")]
            assert r["inputs"]["buildTimeout"] == image.build_timeout_minutes
            assert r["inputs"]["queuedTimeout"] == QUEUED_TIMEOUT_MINUTES
            assert r["inputs"]["autoRetryLimit"] == AUTO_RETRY_LIMIT
    attempt = (QUEUED_TIMEOUT_MINUTES + IMAGES["neuronx-nemo-megatron"].build_timeout_minutes) * 60
    (check,) = [r for r in stack_plan("trn1-llama2-runs")["resources"] if r["name"].startswith("llama2-image-")]
    timeout = int(check["inputs"]["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
    assert timeout == (1 + AUTO_RETRY_LIMIT) * attempt + PULL_SECONDS


def _layered_copy(tmp_path: Path, runner: dict[str, Any]) -> Path:
    aws = yaml.safe_load((EXAMPLES / "Pulumi.trn1-llama2-aws.yaml").read_text())
    aws["config"]["llm-training-eks:ciRunner"] |= runner
    (tmp_path / "Pulumi.trn1-llama2-aws.yaml").write_text(stack_yaml(aws))
    for name in ("cluster", "runs"):
        stack = f"Pulumi.trn1-llama2-{name}.yaml"
        (tmp_path / stack).write_text((EXAMPLES / stack).read_text())
    return tmp_path


def test_a_runner_that_dies_before_its_deploy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_dir = _layered_copy(tmp_path, {"buildTimeoutMinutes": 600})
    code = ci.main(["stacks", "--stacks", '["trn1-llama2-runs"]', "--stack-dir", str(stack_dir)])
    err = capsys.readouterr().err
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("error: ciRunner.buildTimeoutMinutes: trn1-llama2-runs: its deploy job needs")
    assert "Pulumi.trn1-llama2-aws.yaml" in line and "llama2-tokenize-" in line


def test_a_runner_that_may_not_write_the_stack_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_dir = _layered_copy(tmp_path, {"deployStacks": ["trn1-llama2-cluster"]})
    assert ci.main(["stacks", "--stacks", '["trn1-llama2-runs"]', "--stack-dir", str(stack_dir)]) == 2
    assert capsys.readouterr().err.startswith("error: ciRunner.deployStacks: the deploy runner of trn1-llama2-aws")
