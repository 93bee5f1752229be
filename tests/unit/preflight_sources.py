"""The two sources preflight reads from, set up for tests with the answers of one scenario.

- boto3 (the command line): real botocore clients answered by botocore's Stubber, whose
  responses are validated against the service model (the real response shapes).
- the stack's AWS provider (`pulumi up`): `ProviderAccount` invoking pulumi-aws functions
  under Pulumi mocks. Answers are built with the Python SDK's own result types (`wire`), so a
  field name preflight reads that the provider does not return comes back as None and fails the
  test. A failed invoke is raised the way the engine fails it: a gRPC error whose details are
  "invocation of <tok> returned an error: <provider error>" (pulumi v3.259.0,
  pkg/resource/deploy/source_eval.go), which the SDK turns into
  "invoke of <tok> failed: <details>" (runtime/invoke.py, settings.grpc_error_to_exception).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import boto3
import grpc
import pulumi
import pulumi_aws as aws
from botocore.stub import Stubber
from pulumi import _types
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings

import config
from infra.context import StackContext, aws_provider
from tests import upstream
from tools.aws.account_boto3 import Boto3Account
from tools.aws.account_invokes import ProviderAccount
from tools.offline import mocks as plan_mocks

REGION = "us-west-2"
CR_ID = "cr-0123456789abcdef0"
NOW = dt.datetime(2026, 7, 1, 12, 0, tzinfo=dt.UTC)
"""The clock of the reservation tests."""
PROVIDER_URN = "urn:pulumi:test::llm-training-eks::pulumi:pulumi:Stack$pulumi:providers:aws::aws"
"""The stack's one explicit AWS provider (infra.context.aws_provider)."""

TOKENS: dict[str, str] = upstream.facts("pulumi-aws-invokes-7.51.1")["tokens"]
"""The invoke tokens of the data sources preflight uses (pulumi-aws 7.51.1)."""


def reservation(**over: Any) -> dict[str, Any]:
    """A DescribeCapacityReservations member (EC2 API reference, CapacityReservation): an active
    ODCR of 4 trn1.32xlarge in us-west-2d, all free, ending in 30 days."""
    return {
        "CapacityReservationId": CR_ID,
        "InstanceType": "trn1.32xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-west-2d",
        "Tenancy": "default",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 4,
        "State": "active",
        "StartDate": NOW - dt.timedelta(days=1),
        "EndDate": NOW + dt.timedelta(days=30),
        "EndDateType": "limited",
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        **over,
    }


def wire(result_type: type, **fields: Any) -> dict[str, Any]:
    """An invoke's answer as the provider sends it: the SDK result type's wire names."""
    names = _types._py_to_pulumi_names_from_py_properties(result_type)
    unknown = set(fields) - set(names)
    assert not unknown, f"{result_type.__name__} has no {sorted(unknown)}"
    return {names[k]: v for k, v in fields.items()}


def reservation_answer(cr: dict[str, Any]) -> dict[str, Any]:
    """getCapacityBlockReservation's answer for a DescribeCapacityReservations member (the data
    source flattens it field by field, dates as RFC 3339, tags as a map)."""

    def rfc3339(v: Any) -> str | None:
        return v.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(v, dt.datetime) else None

    return wire(
        aws.ec2.GetCapacityBlockReservationResult,
        id=cr["CapacityReservationId"],
        instance_type=cr["InstanceType"],
        availability_zone=cr["AvailabilityZone"],
        reservation_type=cr.get("ReservationType", "default"),
        state=cr["State"],
        instance_count=cr["TotalInstanceCount"],
        available_instance_count=cr["AvailableInstanceCount"],
        start_date=rfc3339(cr.get("StartDate")),
        end_date=rfc3339(cr.get("EndDate")),
        placement_group_arn=cr.get("PlacementGroupArn"),
        tags={t["Key"]: t["Value"] for t in cr.get("Tags", [])},
        instance_platform=cr.get("InstancePlatform"),
        tenancy=cr.get("Tenancy"),
        end_date_type=cr.get("EndDateType"),
        instance_match_criteria=cr.get("InstanceMatchCriteria"),
    )


class ProviderFailed(grpc.RpcError):
    """How the engine fails an invoke whose provider returned an error."""

    def __init__(self, token: str, provider_error: str):
        self._details = f"invocation of {token} returned an error: {provider_error}"

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._details


class InvokeMocks(plan_mocks.PlanMocks):
    """The offline plan's mocks, answering preflight's invokes from `answers` (token -> answer,
    or a provider error text, or a function of the invoke's arguments to either); every call is
    recorded with the provider it was made through."""

    def __init__(self, answers: dict[str, Any]):
        super().__init__(REGION, None)
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.providers: list[str] = []

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args), args.provider))
        if args.token not in self.answers:
            return super().call(args)
        answer = self.answers[args.token]
        if callable(answer):
            answer = answer(args.args)
        if isinstance(answer, str):
            raise ProviderFailed(args.token, answer)
        return answer, []

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:providers:aws":
            self.providers.append(args.name)
        return super().new_resource(args)


def under_provider(mocks: InvokeMocks, program: Callable[[], Any]) -> list[Any]:
    """Run `program` as the Pulumi program of stack `test`, under `mocks`; return what it returned."""
    settings.ROOT.set(None)
    monitor = plan_mocks.RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="llm-training-eks", stack="test", preview=False, monitor=monitor)
    out: list[Any] = []

    @pulumi.runtime.test
    def _program() -> None:
        out.append(program())

    _program()
    return out


def provider_account(cfg: config.StackConfig) -> ProviderAccount:
    """The program's source: invokes through the provider the stack's components use."""
    return ProviderAccount(aws_provider(StackContext.from_config(cfg)))


def boto_account(**stubbed: list[tuple[str, dict[str, Any]]]) -> tuple[Boto3Account, list[Stubber]]:
    """The command line's source: per service, the (operation, response) pairs it will be asked, in order."""
    clients, stubbers = {}, []
    for service, answers in stubbed.items():
        client = boto3.client(
            service.replace("_", "-"), region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
        )
        stub = Stubber(client)
        for operation, response in answers:
            stub.add_response(operation, response)
        stub.activate()
        clients[service.replace("_", "-")] = client
        stubbers.append(stub)
    return Boto3Account(lambda service: clients[service]), stubbers


def instances_response(count: int) -> dict[str, Any]:
    """DescribeInstances with `count` instances."""
    found = [{"InstanceId": f"i-0123456789abcdef{i}", "InstanceType": "trn1.32xlarge"} for i in range(count)]
    return {"Reservations": [{"ReservationId": "r-0123456789abcdef0", "Instances": found}] if found else []}


def instances_answer(count: int) -> dict[str, Any]:
    """getInstances with `count` instance ids."""
    return wire(aws.ec2.GetInstancesResult, id=REGION, ids=[f"i-0123456789abcdef{i}" for i in range(count)])
