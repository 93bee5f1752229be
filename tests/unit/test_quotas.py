"""On-Demand vCPU quotas: counted at desired size (a shortfall fails preflight) and at maximum size
(a shortfall warns, with the request that fixes it), on the command line and inside `pulumi up`.

The stand-in for a new account answers with a new account's quotas (facts/quotas.py, held here
to tests/upstream/aws-ec2-on-demand-quotas-2026-11.yaml): EC2 offerings and EFA from moto's
recorded instance data, quotas and the caller through botocore's Stubber (real response shapes),
or the same answers through the stack's AWS provider under Pulumi mocks.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pulumi
import pulumi_aws as aws
import pytest
from moto import mock_aws

import config
from facts import quotas as quota_facts
from tests import upstream
from tests.conftest import API_PATH, EXAMPLE_STACKS, ROOT, example_file, placed, stack_values
from tests.unit.preflight_sources import TOKENS, InvokeMocks, under_provider, wire
from tests.unit.test_preflight import Session, quota_client, sts_client
from tools import preflight
from tools.aws import quotas

NEW_ACCOUNT = quota_facts.NEW_ACCOUNT
TRN, P, STANDARD = "L-2C3B7624", "L-417A185B", "L-1216C47A"
DOCS = ROOT / "docs" / "deploy.md"


def cfg_of(*groups: dict[str, Any], **top: Any) -> config.StackConfig:
    named = [g["availabilityZone"] for g in groups if "availabilityZone" in g]
    placement = placed(*dict.fromkeys(named)) if named else {}
    return config.parse({"region": "us-west-2", "cluster": API_PATH, "nodeGroups": list(groups), **placement, **top})


def trn1(**over: Any) -> dict[str, Any]:
    return {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 1, "availabilityZone": "us-west-2d", **over}


class QuotaAccount:
    """Only the quota read (check_quotas asks nothing else)."""

    def __init__(self, values: dict[str, float]):
        self.values = values

    def quota(self, code: str) -> float:
        return self.values[code]


# --------------------------------------------------------------------------- counting


def test_needs_count_desired_and_maximum_sizes_per_quota() -> None:
    cfg = cfg_of(trn1(desiredSize=0, minSize=0, maxSize=2), {**trn1(name="b"), "capacity": {"type": "spot"}})
    needs = quotas.quota_needs(cfg)
    # system group: 2 x m6i.2xlarge (8 vCPUs) desired, desiredSize + 2 at most; trn1.32xlarge: 128 vCPUs.
    assert needs[STANDARD].desired == 16 and needs[STANDARD].maximum == 32
    assert (needs[TRN].desired, needs[TRN].maximum, needs[TRN].groups) == (0, 256, ("nodeGroups[trn1]",))
    assert P not in needs


def test_capacity_blocks_and_upper_layers_need_no_on_demand_quota() -> None:
    block = {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0", "endsAt": "2027-03-01T11:30:00Z"}
    assert TRN not in quotas.quota_needs(cfg_of(trn1(capacity=block)))
    runs = config.parse({"region": "us-west-2", "layer": "runs", "lowerStack": "org/llm-training-eks/x-cluster"})
    assert quotas.quota_needs(runs) == {}


@pytest.mark.parametrize(
    ("value", "status"),
    [(256, "ok"), (128, "WARN"), (127, "FAIL")],
    ids=["covers-maximum", "covers-desired-only", "short-of-desired"],
)
def test_fail_below_desired_warn_below_maximum(value: float, status: str) -> None:
    cfg = cfg_of(trn1(desiredSize=1, maxSize=2))
    lines = {f.subject.split()[0]: f.line() for f in quotas.check_quotas(QuotaAccount({STANDARD: 32, TRN: value}), cfg)}
    assert lines[TRN].startswith(f"{status} quota {TRN}")
    command = f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {TRN}"
    assert (command + " --desired-value 256 --region us-west-2" in lines[TRN]) is (status != "ok")


SPOT_TRN = "L-6B0D517C"


def test_a_spot_group_on_a_new_account_fails_its_spot_quota() -> None:
    """A Spot group counts against its family's Spot quota, 0 for Trn and P on a new account (EC2
    user guide, using-spot-limits; tests/upstream/aws-ec2-spot-quotas-2026-12.yaml): preflight fails
    it with the request that fixes it, instead of passing a group that never gets a node."""
    cfg = cfg_of(trn1(capacity={"type": "spot"}, maxSize=2))
    needs = quotas.quota_needs(cfg)
    assert (needs[SPOT_TRN].desired, needs[SPOT_TRN].maximum, needs[SPOT_TRN].groups) == (
        128,
        256,
        ("nodeGroups[trn1]",),
    )
    assert TRN not in needs  # a Spot instance is not an On-Demand one
    lines = {f.subject.split()[0]: f.line() for f in quotas.check_quotas(QuotaAccount(NEW_ACCOUNT), cfg)}
    assert lines[SPOT_TRN].startswith(f"FAIL quota {SPOT_TRN} (All Trn Spot Instance Requests): 0 vCPUs < 128")
    assert f"--quota-code {SPOT_TRN} --desired-value 256" in lines[SPOT_TRN]


def test_spot_quota_facts_are_the_recorded_ones() -> None:
    recorded = upstream.facts("aws-ec2-spot-quotas-2026-12")
    assert dict(quota_facts.SPOT_QUOTA_CODES.values()) == recorded["codes"]
    assert {c: NEW_ACCOUNT[c] for c in recorded["codes"]} == recorded["aws_default"]
    assert quotas.quota_family("trn2u.48xlarge") == "trn" and quotas.quota_family("p6-b300.48xlarge") == "p"


def test_the_request_command_is_the_cli_s() -> None:
    """The flags are the RequestServiceQuotaIncrease members (botocore's service-quotas model), as the
    AWS CLI spells them (tests/upstream/aws-ec2-on-demand-quotas-2026-11.yaml)."""
    model = botocore.session.get_session().get_service_model("service-quotas")
    members = model.operation_model("RequestServiceQuotaIncrease").input_shape.members
    command = quotas.increase_command(TRN, 256, "us-west-2")
    flags = re.findall(r"--([a-z-]+)", command)
    recorded = upstream.facts("aws-ec2-on-demand-quotas-2026-11")["request_increase"]
    assert command.startswith(recorded["command"] + " ")
    assert [f"--{f}" for f in flags if f != "region"] == recorded["options"]
    assert {"".join(p.capitalize() for p in f.split("-")) for f in flags if f != "region"} <= set(members)


def test_quota_facts_are_the_recorded_ones() -> None:
    recorded = upstream.facts("aws-ec2-on-demand-quotas-2026-11")
    assert dict(quota_facts.QUOTA_CODES.values()) == recorded["codes"]
    assert recorded["new_account"] == {c: quota_facts.NEW_ACCOUNT[c] for c in recorded["codes"]}
    assert recorded["aws_default"][STANDARD] == quota_facts.AWS_DEFAULT_STANDARD
    assert preflight.QUOTA_CODES is quota_facts.QUOTA_CODES


# --------------------------------------------------------------------------- a new account, end to end


def _stack_file(tmp_path: Path, stack: str) -> Path:
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(example_file(stack).read_text())
    return path


def _new_account_session(cfg: config.StackConfig) -> Session:
    """A new account: moto's EC2 (offerings, EFA), its quotas in the order preflight asks, the caller."""
    sq, _ = quota_client({code: NEW_ACCOUNT[code] for code in quotas.quota_needs(cfg)})
    return Session(
        **{
            "ec2": boto3.client("ec2", region_name=cfg.region),
            "service-quotas": sq,
            "eks": boto3.client("eks", region_name=cfg.region),
            "fsx": boto3.client("fsx", region_name=cfg.region),
            "sts": sts_client(),
        }
    )


def _preflight(stack: str, tmp_path: Path) -> tuple[int, str, str]:
    cfg = config.parse_stack_values(stack_values(stack))
    out, err = io.StringIO(), io.StringIO()
    code = preflight.main(
        ["--config-file", str(_stack_file(tmp_path, stack))], stdout=out, stderr=err, session=_new_account_session(cfg)
    )
    return code, out.getvalue(), err.getvalue()


@mock_aws
def test_dev_passes_preflight_on_a_new_account_with_a_warning(tmp_path: Path) -> None:
    code, out, err = _preflight("dev", tmp_path)
    assert code == 0, err
    assert f"ok quota {STANDARD}" in out
    (warning,) = err.splitlines()
    assert warning.startswith(f"WARN quota {TRN} (Running On-Demand Trn instances): 0 vCPUs cover the desired size (0)")
    assert warning.endswith(
        f"`aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {TRN}"
        " --desired-value 256 --region us-west-2`"
    )


@mock_aws
def test_a_stack_that_runs_trainium_fails_on_a_new_account(tmp_path: Path) -> None:
    code, _, err = _preflight("trn1-bert", tmp_path)
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(f"FAIL quota {TRN} (Running On-Demand Trn instances): 0 vCPUs < 256 needed at desired size")
    assert f"--quota-code {TRN} --desired-value 256 --region us-west-2`" in line


def test_inside_pulumi_up_the_warning_is_a_pulumi_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate asks through the stack's provider; a warning is `pulumi.log.warn`, never an error."""
    cfg = config.parse_stack_values(stack_values("dev"))
    logged: dict[str, list[str]] = {"warn": [], "error": []}
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: logged["warn"].append(msg))
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: logged["error"].append(msg))
    answers = {
        TOKENS["offerings"]: wire(aws.ec2.GetInstanceTypeOfferingsResult, id=cfg.region, locations=["us-west-2d"]),
        TOKENS["instance_type"]: wire(
            aws.ec2.GetInstanceTypeResult, id="trn1.32xlarge", efa_supported=True, efa_maximum_interfaces=8
        ),
        TOKENS["caller"]: wire(aws.GetCallerIdentityResult, arn="arn:aws:iam::123456789012:user/deployer", id="x"),
        TOKENS["quota"]: lambda args: wire(
            aws.servicequotas.GetServiceQuotaResult, value=float(NEW_ACCOUNT[args["quotaCode"]]), id=args["quotaCode"]
        ),
    }
    under_provider(InvokeMocks(answers), lambda: preflight.gate(cfg))
    assert logged["error"] == []
    (warning,) = logged["warn"]
    assert warning.startswith(f"preflight: WARN quota {TRN}") and "--desired-value 256 --region us-west-2" in warning


# --------------------------------------------------------------------------- the docs' table


def test_the_docs_table_of_example_stacks_is_computed_from_the_stacks() -> None:
    """What each example stack needs (region, AZs, capacity, vCPUs per quota at desired / maximum
    size, and whether a new account's quotas pass): the table in the docs is this function's output."""
    table = quotas.requirements_table({s: config.parse_stack_values(stack_values(s)) for s in EXAMPLE_STACKS})
    assert table in DOCS.read_text(), f"regenerate the table in {DOCS.relative_to(ROOT)}:\n{table}"


def test_the_docs_commands_for_finding_an_az_are_valid() -> None:
    """The location types the docs ask DescribeInstanceTypeOfferings for are botocore's, and the
    docs say AZ names differ between accounts where AZ IDs do not (EC2 user guide)."""
    text = DOCS.read_text()
    enum = botocore.session.get_session().get_service_model("ec2").shape_for("LocationType").enum
    used = re.findall(r"describe-instance-type-offerings [^\n]*--location-type ([a-z-]+)", text)
    recorded = upstream.facts("aws-ec2-availability-zone-ids-2026-11")["offering_location_types"]
    assert sorted(used) == sorted(recorded) and set(used) <= set(enum)
    assert "aws ec2 describe-availability-zones --region" in text and "AZ IDs" in text
