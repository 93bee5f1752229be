"""Preflight: moto for instance types and offerings; botocore Stubber with the real response
shapes for capacity reservations and service quotas (moto does not implement them)."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

import config
from config.checks import capacity
from facts.quotas import SPOT_QUOTA_CODES
from tests import upstream
from tests.conftest import API_PATH, BASE, MINIMAL, placed, placed_values
from tests.unit.preflight_sources import NOW, reservation
from tools import preflight
from tools.aws.account_boto3 import Boto3Account


def cfg_of(**ng: Any) -> config.StackConfig:
    group = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "availabilityZone": "us-west-2d", **ng}
    return config.parse(
        {"region": "us-west-2", "cluster": API_PATH, "nodeGroups": [group], **placed(group["availabilityZone"])}
    )


RESERVED = {"capacity": {"type": "reservation", "reservationId": "cr-0123456789abcdef0"}}


def account(**clients: Any) -> Boto3Account:
    """The command line's source over the given clients (by service name)."""
    return Boto3Account(lambda service: clients[service])


def reservation_findings(
    cr: dict[str, Any] | None, cfg: config.StackConfig, own: int | None = None
) -> list[preflight.Finding]:
    """Preflight's reservation findings against EC2 (Stubber); `own`: the node group's instances
    in the reservation, when preflight is expected to ask for them."""
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(ec2) as stub:
        expected = {"CapacityReservationIds": ["cr-0123456789abcdef0"]}
        if cr is None:
            stub.add_client_error(
                "describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", expected_params=expected
            )
        else:
            stub.add_response("describe_capacity_reservations", {"CapacityReservations": [cr]}, expected)
        if own is not None:
            instances = [{"InstanceId": f"i-0123456789abcdef{i}", "InstanceType": "trn1.32xlarge"} for i in range(own)]
            stub.add_response("describe_instances", {"Reservations": [{"Instances": instances}] if own else []})
        findings = preflight.check_reservations(account(ec2=ec2), cfg, NOW, 24)
        stub.assert_no_pending_responses()
        return findings


def failing(findings: list[preflight.Finding]) -> list[str]:
    return [f.line() for f in findings if not f.ok]


def quota_client(values: dict[str, float]) -> tuple[Any, Stubber]:
    sq = boto3.client("service-quotas", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(sq)
    for code, value in values.items():
        stub.add_response(
            "get_service_quota",
            {
                "Quota": {
                    "ServiceCode": "ec2",
                    "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                    "QuotaArn": f"arn:aws:servicequotas:us-west-2:123456789012:ec2/{code}",
                    "QuotaCode": code,
                    "QuotaName": dict([*preflight.QUOTA_CODES.values(), *SPOT_QUOTA_CODES.values()])[code],
                    "Value": value,
                    "Unit": "None",
                    "Adjustable": True,
                    "GlobalQuota": False,
                }
            },
            {"ServiceCode": "ec2", "QuotaCode": code},
        )
    stub.activate()
    return sq, stub


# --------------------------------------------------------------------------- offerings and EFA (moto)


@mock_aws
def test_instance_type_not_offered_in_the_az():
    ec2 = boto3.client("ec2", region_name="us-west-2")
    lines = failing(preflight.check_offerings(account(ec2=ec2), cfg_of(availabilityZone="us-west-2a")))
    assert len(lines) == 1
    assert "trn1.32xlarge is not offered in us-west-2a" in lines[0] and "us-west-2d" in lines[0]


@mock_aws
def test_instance_type_offered_and_efa_cards_match():
    ec2 = boto3.client("ec2", region_name="us-west-2")
    cfg = cfg_of()
    assert failing(preflight.check_offerings(account(ec2=ec2), cfg)) == []
    assert failing(preflight.check_efa(account(ec2=ec2), cfg)) == []


# --------------------------------------------------------------------------- reservations (Stubber)


def test_reservation_all_good():
    assert failing(reservation_findings(reservation(), cfg_of(**RESERVED))) == []


def test_reservation_not_found():
    assert "not found" in failing(reservation_findings(None, cfg_of(**RESERVED)))[0]


def test_reservation_in_another_az():
    lines = failing(reservation_findings(reservation(AvailabilityZone="us-west-2b"), cfg_of(**RESERVED)))
    assert lines == [
        "FAIL reservation nodeGroups[trn1] cr-0123456789abcdef0: is in us-west-2b, the node group in us-west-2d:"
        " set availabilityZone to it"
    ]


def test_reservation_for_another_type():
    lines = failing(reservation_findings(reservation(InstanceType="trn1n.32xlarge"), cfg_of(**RESERVED)))
    assert len(lines) == 1 and "is for trn1n.32xlarge, not trn1.32xlarge" in lines[0]


def test_reservation_with_too_few_free_instances():
    lines = failing(reservation_findings(reservation(AvailableInstanceCount=2), cfg_of(**RESERVED), own=0))
    assert len(lines) == 1
    assert "has 2 free instances and 0 used by this node group's own instances, the node group needs 4" in lines[0]


def test_reservation_expiring_within_the_margin():
    lines = failing(reservation_findings(reservation(EndDate=NOW + dt.timedelta(hours=5)), cfg_of(**RESERVED)))
    assert len(lines) == 1 and "ends at 2026-07-01 17:00 UTC, within 24 h" in lines[0]


BLOCK_END = NOW + dt.timedelta(days=30)
BLOCK = {
    "capacity": {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0", "endsAt": BLOCK_END.isoformat()}
}


def test_capacity_block_scheduled_says_when_it_starts():
    block = BLOCK
    cr = reservation(ReservationType="capacity-block", State="scheduled", StartDate=NOW + dt.timedelta(days=2))
    lines = failing(reservation_findings(cr, cfg_of(**block)))
    assert len(lines) == 1 and "starts at 2026-07-03 12:00 UTC" in lines[0]


# --------------------------------------------------------------------------- quotas (Stubber)


def test_quota_too_low():
    sq, stub = quota_client({"L-1216C47A": 640, "L-2C3B7624": 256})
    lines = failing(preflight.check_quotas(account(**{"service-quotas": sq}), cfg_of()))
    stub.assert_no_pending_responses()
    # 4 x trn1.32xlarge x 128 vCPUs = 512 needed
    assert len(lines) == 1 and "L-2C3B7624" in lines[0] and "256 vCPUs < 512 needed" in lines[0]


def test_quota_ignores_capacity_blocks():
    block = BLOCK
    sq, _ = quota_client({"L-1216C47A": 640})
    assert failing(preflight.check_quotas(account(**{"service-quotas": sq}), cfg_of(**block))) == []


# --------------------------------------------------------------------------- all together and the CLI


def sts_client(arn: str = "arn:aws:sts::123456789012:assumed-role/deployer/ci-session") -> Any:
    """STS answering GetCallerIdentity once (Stubber, the real response shape)."""
    sts = boto3.client("sts", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(sts)
    stub.add_response("get_caller_identity", {"Arn": arn, "Account": "123456789012", "UserId": "AROAEXAMPLE:ci"})
    stub.activate()
    return sts


class Session:
    def __init__(self, **clients: Any):
        self.clients = clients

    def client(self, name: str, region_name: str | None = None) -> Any:
        return self.clients[name]


@mock_aws
def test_all_good_exit_0(tmp_path: Path):
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(json.dumps({"config": {**BASE, **MINIMAL}}))
    sq, _ = quota_client({"L-1216C47A": 640, "L-2C3B7624": 1024})
    session = Session(
        **{
            "ec2": boto3.client("ec2", region_name="us-west-2"),
            "service-quotas": sq,
            "eks": boto3.client("eks", region_name="us-west-2"),
            "fsx": boto3.client("fsx", region_name="us-west-2"),
            "sts": sts_client(),
        }
    )
    out, err = io.StringIO(), io.StringIO()
    assert preflight.main(["--config-file", str(stack)], stdout=out, stderr=err, session=session) == 0
    assert err.getvalue() == ""
    assert "ok offering nodeGroups[trn1]: trn1.32xlarge is offered in us-west-2d" in out.getvalue()


@mock_aws
def test_failing_check_exit_1_one_line_each(tmp_path: Path):
    stack = tmp_path / "Pulumi.x.yaml"
    group = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "availabilityZone": "us-west-2a"}
    stack.write_text(
        json.dumps({"config": {**BASE, "llm-training-eks:nodeGroups": [group], **placed_values("us-west-2a")}})
    )
    sq, _ = quota_client({"L-1216C47A": 640, "L-2C3B7624": 256})
    session = Session(
        **{
            "ec2": boto3.client("ec2", region_name="us-west-2"),
            "service-quotas": sq,
            "eks": boto3.client("eks", region_name="us-west-2"),
            "fsx": boto3.client("fsx", region_name="us-west-2"),
            "sts": sts_client(),
        }
    )
    err = io.StringIO()
    assert preflight.main(["--config-file", str(stack)], stdout=io.StringIO(), stderr=err, session=session) == 1
    lines = err.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("FAIL offering") and lines[1].startswith("FAIL quota")


def test_bad_config_exit_2(tmp_path: Path):
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(
        json.dumps({"config": {"aws:region": "us-west-2", "llm-training-eks:nodeGroups": [{"name": "x"}]}})
    )
    err = io.StringIO()
    assert preflight.main(["--config-file", str(stack)], stderr=err) == 2
    assert "nodeGroups[0].instanceType: required key is missing" in err.getvalue()


def test_no_credentials_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    err = io.StringIO()
    assert preflight.main(["--stack", "dev"], stderr=err) == 2
    assert err.getvalue().startswith("error: no AWS credentials")


def test_preflight_is_skipped_under_mocks():
    from tests.conftest import MINIMAL, run_plan

    run_plan(MINIMAL)  # installs the mocks
    assert preflight.under_mocks()


# --------------------------------------------------------------------------- placement groups and block ends


def test_reservation_made_in_a_placement_group_the_config_does_not_name():
    """Capacity made in a cluster placement group is usable only there (EC2 API reference,
    CreateCapacityReservation.PlacementGroupArn)."""
    arn = "arn:aws:ec2:us-west-2:123456789012:placement-group/odcr-pg"
    lines = failing(reservation_findings(reservation(PlacementGroupArn=arn), cfg_of(**RESERVED)))
    assert len(lines) == 1 and "placement group odcr-pg: set capacity.placementGroupName: odcr-pg" in lines[0]
    named = {"capacity": {**RESERVED["capacity"], "placementGroupName": "odcr-pg"}}
    assert failing(reservation_findings(reservation(PlacementGroupArn=arn), cfg_of(**named))) == []


def test_reservation_made_without_a_placement_group_but_config_names_one():
    named = {"capacity": {**RESERVED["capacity"], "placementGroupName": "odcr-pg"}}
    lines = failing(reservation_findings(reservation(), cfg_of(**named)))
    assert len(lines) == 1 and "made without a placement group" in lines[0]


def test_capacity_block_end_must_match_endsat():
    cr = reservation(ReservationType="capacity-block", EndDate=BLOCK_END + dt.timedelta(hours=1))
    lines = failing(reservation_findings(cr, cfg_of(**BLOCK)))
    assert len(lines) == 1 and "config says endsAt" in lines[0]
    assert (
        failing(reservation_findings(reservation(ReservationType="capacity-block", EndDate=BLOCK_END), cfg_of(**BLOCK)))
        == []
    )


def test_capacity_block_scale_down_already_past_is_refused_by_config_first(monkeypatch: pytest.MonkeyPatch):
    """Auto Scaling refuses a scheduled action in the past; config says so (at `NOW`), so the offline
    plan refuses what `pulumi preview` would, before preflight asks AWS anything."""
    monkeypatch.setattr(capacity, "utc_now", lambda: NOW)
    soon = NOW + dt.timedelta(minutes=30)
    block = {"capacity": {**BLOCK["capacity"], "endsAt": soon.isoformat()}}
    with pytest.raises(config.ConfigError) as e:
        cfg_of(**block)
    assert any(
        p.startswith("nodeGroups[0].capacity.endsAt:") and "scale-down at 2026-07-01 11:50 UTC is already past" in p
        for p in e.value.problems
    ), e.value.problems


def _stubbed(cr: dict[str, Any]) -> Any:
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [cr]})
    stub.activate()
    return ec2


def _eks_with(version: str | None, desired: int) -> Any:
    eks = boto3.client("eks", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(eks)
    stub.add_response("list_clusters", {"clusters": ["llm-training"]})
    if version is None:
        stub.add_response("list_nodegroups", {"nodegroups": []})
    else:
        # A group replaced create-first has a unique suffix and the node-group label.
        name, labels = "trn1-20261126031500123400000001", {"llm-training-eks/node-group": "trn1"}
        stub.add_response("list_nodegroups", {"nodegroups": ["system", name]})
        group = {"nodegroupName": name, "labels": labels, "version": version, "scalingConfig": {"desiredSize": desired}}
        stub.add_response("describe_nodegroup", {"nodegroup": group})
    stub.activate()
    return eks


@pytest.mark.parametrize(
    ("deployed", "desired", "ok"),
    [(None, 0, True), ("1.35", 4, True), ("1.34", 0, True), ("1.34", 4, False)],
)
def test_capacity_block_upgrade_only_at_desired_zero(deployed: str | None, desired: int, ok: bool):
    """EKS user guide, capacity-blocks-mng: upgrade Capacity Block groups at desired size 0."""
    (finding,) = preflight.check_capacity_block_upgrades(account(eks=_eks_with(deployed, desired)), cfg_of(**BLOCK))
    assert finding.ok is ok
    if not ok:
        assert "keep cluster.kubernetesVersion at 1.34" in finding.message and "desiredSize: 0" in finding.message


@pytest.mark.parametrize(
    ("admins", "ok"),
    [
        ([], True),
        (["arn:aws:iam::123456789012:role/platform-admins"], True),
        (["arn:aws:iam::123456789012:role/deployer"], False),
        (["arn:aws:iam::123456789012:role/teams/deployer"], False),
    ],
)
def test_the_deployer_is_not_listed_as_admin_again(admins: list[str], ok: bool):
    cfg = config.parse({"region": "us-west-2", "cluster": {**API_PATH, "adminPrincipalArns": admins}})
    (finding,) = preflight.check_admin_entries(account(sts=sts_client()), cfg)
    assert finding.ok is ok


def _eks_system_group(version: str | None) -> Any:
    eks = boto3.client("eks", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(eks)
    stub.add_response("list_clusters", {"clusters": ["llm-training"] if version else []})
    if version is not None:
        stub.add_response("list_nodegroups", {"nodegroups": ["system"]}, {"clusterName": "llm-training"})
        group = {"nodegroupName": "system", "version": version, "scalingConfig": {"desiredSize": 2}}
        stub.add_response(
            "describe_nodegroup", {"nodegroup": group}, {"clusterName": "llm-training", "nodegroupName": "system"}
        )
    stub.activate()
    return eks


@pytest.mark.parametrize(
    ("deployed", "wanted", "ok"),
    [
        (None, "1.36", True),
        ("1.35", "1.35", True),
        ("1.35", "1.36", True),
        ("1.34", "1.36", False),
        ("1.36", "1.35", False),
    ],
)
def test_kubernetes_version_moves_one_minor_at_a_time(deployed: str | None, wanted: str, ok: bool):
    """1.34 -> 1.36 is refused, naming the key and the next step (EKS user guide,
    update-cluster: one minor version at a time)."""
    facts = upstream.facts("aws-eks-update-cluster-2024-12")
    # A 1.36 stack names the add-on versions facts/eks_addons.py records none of for 1.36.
    named = {
        "vpcCni": "v1.22.4-eksbuild.3",
        "podIdentityAgent": "v1.3.10-eksbuild.3",
        "nodeMonitoringAgent": "v1.6.4-eksbuild.1",
    }
    addons = {"eksAddonVersions": named} if wanted == "1.36" else {}
    cfg = config.parse({"region": "us-west-2", "cluster": {**API_PATH, "kubernetesVersion": wanted}, "addons": addons})
    (finding,) = preflight.check_version_step(account(eks=_eks_system_group(deployed)), cfg)
    assert finding.ok is ok and finding.subject == "cluster.kubernetesVersion"
    if deployed == "1.34" and not ok:
        assert facts["minor_steps_per_update"] == 1
        assert "set 1.35 and `pulumi up`, then the next one" in finding.message
