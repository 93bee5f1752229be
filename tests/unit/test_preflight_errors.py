"""When AWS cannot be asked: no network, expired or missing credentials, a denied read. The
command line exits 2 with one line, the program logs one Pulumi error and stops with RunError;
never a traceback. Errors arrive as they really do: botocore parsing the services' own error
bodies (EC2's XML, STS's XML, Service Quotas' JSON), botocore's own exceptions, and for the
program the provider's error text wrapped by the engine and the SDK
(tests/upstream/aws-error-shapes.yaml)."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pulumi
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

import config
from tests import upstream
from tests.conftest import BASE, MINIMAL
from tests.unit.preflight_sources import TOKENS, InvokeMocks, provider_account, under_provider
from tools import preflight
from tools.aws.account import AccountError
from tools.aws.account_boto3 import Boto3Account

EC2_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}'
    "</Message></Error></Errors><RequestID>6b2a6b6e-0000-4000-8000-000000000000</RequestID></Response>"
)
STS_XML = (
    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>{code}'
    "</Code><Message>{message}</Message></Error><RequestId>6b2a6b6e-0000-4000-8000-000000000001</RequestId>"
    "</ErrorResponse>"
)


class _Body:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


class Session:
    """A boto3 session whose clients send nothing: `answer` gives each request's HTTP response
    (botocore parses it exactly as one from AWS) or raises what botocore would."""

    def __init__(self, answer: Callable[[Any], AWSResponse], event: str = "before-send", **client_args: Any):
        self.answer, self.event, self.client_args = answer, event, client_args

    def client(self, name: str, region_name: str | None = None) -> Any:
        c = boto3.client(
            name,
            region_name=region_name,
            aws_access_key_id="AKIAEXAMPLE",
            aws_secret_access_key="x",
            aws_session_token="expired-session",
            config=Config(retries={"max_attempts": 1}, connect_timeout=2),
            **self.client_args,
        )
        c.meta.events.register(self.event, lambda request=None, **_: self.answer(request))
        return c


def http(status: int, body: str, content_type: str = "text/xml") -> Callable[[Any], AWSResponse]:
    return lambda request: AWSResponse(request.url, status, {"Content-Type": content_type}, _Body(body.encode()))


@pytest.fixture
def stack_file(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(json.dumps({"config": {**BASE, **MINIMAL}}))
    return path


def run_cli(stack_file: Path, session: Any) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = preflight.main(["--config-file", str(stack_file)], stdout=out, stderr=err, session=session)
    return code, err.getvalue().splitlines()


# --------------------------------------------------------------------------- the command line (boto3)


def test_an_expired_token_exits_2_with_one_line(stack_file: Path):
    """EC2 answers requests signed with expired temporary credentials with RequestExpired."""
    answer = http(400, EC2_XML.format(code="RequestExpired", message="Request has expired."))
    code, lines = run_cli(stack_file, Session(answer))
    assert (code, lines) == (
        2,
        [
            "error: the AWS credentials have expired (RequestExpired from ec2:DescribeInstanceTypeOfferings):"
            " renew them (aws sso login, or a new session) and run again"
        ],
    )


def test_an_expired_sts_token_is_named_as_such():
    answer = http(
        403, STS_XML.format(code="ExpiredToken", message="The security token included in the request is expired")
    )
    account = Boto3Account.from_session(Session(answer), "us-west-2")
    with pytest.raises(
        AccountError, match=r"^the AWS credentials have expired \(ExpiredToken from sts:GetCallerIdentity\)"
    ):
        account.caller_arn()


def test_an_expired_sso_session_exits_2(stack_file: Path):
    """botocore raises UnauthorizedSSOTokenError before sending when the SSO session has expired."""

    def expired(_: Any) -> AWSResponse:
        raise botocore.exceptions.UnauthorizedSSOTokenError()

    code, lines = run_cli(stack_file, Session(expired, event="before-sign"))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: the AWS credentials have expired or cannot be loaded (The SSO session")


def test_access_denied_exits_2_naming_the_action(stack_file: Path):
    message = "You are not authorized to perform this operation. User: arn:aws:iam::123456789012:user/x"
    code, lines = run_cli(stack_file, Session(http(403, EC2_XML.format(code="UnauthorizedOperation", message=message))))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(
        "error: the AWS identity may not call ec2:DescribeInstanceTypeOfferings (UnauthorizedOperation)"
    )


def test_access_denied_by_service_quotas_names_its_action():
    body = json.dumps({"__type": "AccessDeniedException", "Message": "User is not authorized to perform this action"})
    account = Boto3Account.from_session(Session(http(400, body, "application/x-amz-json-1.1")), "us-west-2")
    with pytest.raises(AccountError, match=r"may not call servicequotas:GetServiceQuota \(AccessDeniedException\)"):
        account.quota("L-2C3B7624")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_network_exits_2(stack_file: Path):
    """Nothing listens at the endpoint: botocore raises EndpointConnectionError."""
    url = f"http://127.0.0.1:{closed_port()}"
    code, lines = run_cli(stack_file, Session(lambda request: None, endpoint_url=url))
    assert code == 2 and len(lines) == 1
    assert lines[0] == (
        f"error: could not reach AWS for ec2:DescribeInstanceTypeOfferings (Could not connect to the endpoint URL:"
        f' "{url}/"): check the network, proxy and region'
    )


def test_a_profile_that_does_not_exist_exits_2(stack_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    err = io.StringIO()
    assert preflight.main(["--config-file", str(stack_file), "--profile", "nope"], stderr=err) == 2
    assert err.getvalue() == (
        "error: The config profile (nope) could not be found: name a profile of ~/.aws/config with --profile or"
        " AWS_PROFILE\n"
    )


def test_another_region_than_the_stacks_is_refused(stack_file: Path):
    err = io.StringIO()
    assert preflight.main(["--config-file", str(stack_file), "--region", "us-east-1"], stderr=err) == 2
    assert "not the stack's aws:region us-west-2" in err.getvalue()


# --------------------------------------------------------------------------- the program (the provider's invokes)

# The provider's errors as terraform-provider-aws words them over the AWS SDK for Go v2 (smithy-go
# OperationError / aws-sdk-go-v2 ResponseError / GenericAPIError; RequestSendError for no network).
GO_ERRORS = {
    "expired": (
        "reading EC2 Instance Type Offerings: operation error EC2: DescribeInstanceTypeOfferings, https response"
        " error StatusCode: 400, RequestID: 6b2a6b6e, api error RequestExpired: Request has expired.",
        "preflight: the AWS credentials have expired (RequestExpired from ec2:DescribeInstanceTypeOfferings): renew"
        " them (aws sso login, or a new session) and run again",
    ),
    "denied": (
        "reading EC2 Instance Type Offerings: operation error EC2: DescribeInstanceTypeOfferings, https response"
        " error StatusCode: 403, RequestID: 6b2a6b6e, api error UnauthorizedOperation: You are not authorized to"
        " perform this operation.",
        "preflight: the AWS identity may not call ec2:DescribeInstanceTypeOfferings (UnauthorizedOperation): allow"
        " it (docs/guardrails.md, Preflight, lists the read actions) or skip the preflight with"
        " LLM_TRAINING_EKS_PREFLIGHT=false",
    ),
    "no network": (
        "reading EC2 Instance Type Offerings: operation error EC2: DescribeInstanceTypeOfferings, exceeded maximum"
        " number of attempts, 25, https response error StatusCode: 0, RequestID: , request send failed, Post"
        ' "https://ec2.us-west-2.amazonaws.com/": dial tcp: lookup ec2.us-west-2.amazonaws.com: no such host',
        "preflight: could not reach AWS for ec2:DescribeInstanceTypeOfferings (request send failed, Post"
        ' "https://ec2.us-west-2.amazonaws.com/": dial tcp: lookup ec2.us-west-2.amazonaws.com: no such host):'
        " check the network, proxy and region",
    ),
    "no credentials": (
        "no valid credential sources for Terraform AWS Provider found.\n\nPlease see https://registry.terraform.io"
        "/providers/hashicorp/aws\nfor more information about providing credentials.\n\nError: failed to refresh"
        " cached credentials, no EC2 IMDS role found",
        "preflight: no AWS credentials for the stack's AWS provider: set AWS_PROFILE or",
    ),
}


@pytest.mark.parametrize("kind", sorted(GO_ERRORS))
def test_the_program_logs_one_error_and_stops(kind: str, monkeypatch: pytest.MonkeyPatch):
    provider_error, expected = GO_ERRORS[kind]
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: logged.append(msg))
    cfg = config.parse(config.from_stack_values({**BASE, **MINIMAL}))
    mocks = InvokeMocks({TOKENS["offerings"]: provider_error})
    with pytest.raises(pulumi.RunError, match=r"^preflight could not ask AWS; nothing was created$"):
        under_provider(mocks, lambda: preflight.gate(cfg, provider_account(cfg)))
    assert len(logged) == 1 and logged[0].startswith(expected), logged
    assert "\n" not in logged[0] and len(logged[0]) < 500


def test_the_upstream_error_texts_are_recorded():
    """The Go formats these texts follow are recorded with their sources."""
    shapes = upstream.facts("aws-error-shapes")
    assert shapes["smithy_go"]["api_error"] == "api error %s: %s"
    assert "request send failed" in shapes["smithy_go"]["request_send_error"]
    assert shapes["pulumi_engine"]["invoke_error"] == "invocation of %v returned an error: %w"
