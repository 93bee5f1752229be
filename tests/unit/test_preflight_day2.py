"""Preflight on day 2: a reservation the node group already fills, blocks bought ahead, blocks
that ended; the same checks against both sources (boto3 for the command line, the stack's AWS
provider under `pulumi up`), with the answers each source really gets."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import botocore.session
import pulumi_aws as aws
import pytest

import config
import stack
from config import amis
from tests import upstream
from tests.conftest import API_PATH, MINIMAL, placed, resources, run_plan
from tests.unit.preflight_sources import (
    CR_ID,
    NOW,
    PROVIDER_URN,
    TOKENS,
    InvokeMocks,
    boto_account,
    instances_answer,
    instances_response,
    provider_account,
    reservation,
    reservation_answer,
    under_provider,
    wire,
)
from tools import preflight
from tools.aws import account, account_invokes, reservations

SOURCES = ("boto3", "provider")


def cfg_of(capacity: dict[str, Any], **group: Any) -> config.StackConfig:
    ng = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "availabilityZone": "us-west-2d"}
    return config.parse(
        {
            "region": "us-west-2",
            "cluster": API_PATH,
            "nodeGroups": [{**ng, **group, "capacity": capacity}],
            **placed("us-west-2d"),
        }
    )


ODCR = {"type": "reservation", "reservationId": CR_ID}
BLOCK_END = NOW + dt.timedelta(days=30)
BLOCK = {"type": "capacity-block", "reservationId": CR_ID, "endsAt": BLOCK_END.isoformat()}


def findings(source: str, cr: dict[str, Any], cfg: config.StackConfig, own: int | None = None) -> list[Any]:
    """check_reservations through `source`; `own` = the group's instances in the reservation, when
    preflight must ask for them (both sources fail on a call they were not told to expect)."""
    if source == "boto3":
        ec2 = [("describe_capacity_reservations", {"CapacityReservations": [cr]})]
        if own is not None:
            ec2.append(("describe_instances", instances_response(own)))
        account, stubbers = boto_account(ec2=ec2)
        found = reservations.check_reservations(account, cfg, NOW, 24)
        for stub in stubbers:
            stub.assert_no_pending_responses()
        return found
    answers: dict[str, Any] = {TOKENS["reservation"]: reservation_answer(cr)}
    if own is not None:
        answers[TOKENS["instances"]] = instances_answer(own)
    mocks = InvokeMocks(answers)
    (found,) = under_provider(mocks, lambda: reservations.check_reservations(provider_account(cfg), cfg, NOW, 24))
    asked = [(tok, provider) for tok, _, provider in mocks.calls]
    assert [tok for tok, _ in asked] == [TOKENS["reservation"]] + ([TOKENS["instances"]] if own is not None else [])
    assert all(provider.startswith(PROVIDER_URN + "::") for _, provider in asked), asked
    return list(found)


def failing(found: list[Any]) -> list[str]:
    return [f.line() for f in found if not f.ok]


@pytest.mark.parametrize("source", SOURCES)
def test_a_reservation_filled_by_the_groups_own_instances_is_available_to_it(source: str):
    """A group of 4 on a fully used reservation of 4: the next `pulumi up` is not refused."""
    found = findings(source, reservation(AvailableInstanceCount=0), cfg_of(ODCR), own=4)
    assert failing(found) == []
    assert "0 free + 4 used by this node group's own instances" in found[0].message


@pytest.mark.parametrize("source", SOURCES)
def test_a_reservation_partly_used_by_the_group_counts_its_instances(source: str):
    assert failing(findings(source, reservation(AvailableInstanceCount=1), cfg_of(ODCR), own=3)) == []


@pytest.mark.parametrize("source", SOURCES)
def test_a_reservation_filled_by_other_instances_is_refused(source: str):
    lines = failing(findings(source, reservation(AvailableInstanceCount=0), cfg_of(ODCR), own=0))
    assert lines == [
        f"FAIL reservation nodeGroups[trn1] {CR_ID}: has 0 free instances and 0 used by this node group's own"
        " instances, the node group needs 4: lower desiredSize or use a larger reservation"
    ]


@pytest.mark.parametrize("source", SOURCES)
def test_free_capacity_needs_no_instance_lookup(source: str):
    assert failing(findings(source, reservation(), cfg_of(ODCR))) == []


def scheduled_block(**over: Any) -> dict[str, Any]:
    """A Capacity Block bought ahead: scheduled, 0 available until it starts (EC2 user guide,
    capacity-blocks-view)."""
    start = NOW + dt.timedelta(days=2)
    return (
        reservation(
            ReservationType="capacity-block",
            State="scheduled",
            AvailableInstanceCount=0,
            StartDate=start,
            EndDate=BLOCK_END,
        )
        | over
    )


@pytest.mark.parametrize("source", SOURCES)
def test_a_scheduled_block_is_fine_for_a_group_at_desired_zero(source: str):
    found = findings(source, scheduled_block(), cfg_of(BLOCK, desiredSize=0, minSize=0, maxSize=4))
    assert failing(found) == []
    assert "starts at 2026-07-03 12:00 UTC; the group stays at 0 until then" in found[0].message


@pytest.mark.parametrize("source", SOURCES)
def test_a_scheduled_block_refuses_nodes_and_says_when_it_starts(source: str):
    lines = failing(findings(source, scheduled_block(), cfg_of(BLOCK)))
    assert lines == [
        f"FAIL reservation nodeGroups[trn1] {CR_ID}: is scheduled and starts at 2026-07-03 12:00 UTC: keep"
        " desiredSize: 0 (and minSize: 0) until it is active, then raise it"
    ]


@pytest.mark.parametrize("source", SOURCES)
def test_a_scheduled_block_too_small_for_the_group_says_so(source: str):
    """The block's size before it starts is its incrementalRequestedQuantity tag."""
    tag = {"Key": "aws:ec2capacityreservation:incrementalRequestedQuantity", "Value": "2"}
    lines = failing(findings(source, scheduled_block(Tags=[tag]), cfg_of(BLOCK)))
    assert len(lines) == 2 and lines[1].endswith("will have 2 instances, the node group needs 4")


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("state", sorted(reservations.GONE))
def test_a_reservation_that_is_gone_is_fine_only_at_zero(source: str, state: str):
    ended = reservation(State=state, AvailableInstanceCount=0, EndDate=NOW - dt.timedelta(days=1))
    assert failing(findings(source, ended, cfg_of(ODCR, desiredSize=0, minSize=0, maxSize=4))) == []
    (line,) = failing(findings(source, ended, cfg_of(ODCR)))
    assert f"is {state}: its capacity is gone; set desiredSize: 0 or use another reservation" in line


@pytest.mark.parametrize("source", SOURCES)
def test_a_reservation_ending_soon_is_fine_for_a_group_at_zero(source: str):
    ending = reservation(EndDate=NOW + dt.timedelta(hours=5))
    assert failing(findings(source, ending, cfg_of(ODCR, desiredSize=0, minSize=0, maxSize=4))) == []
    assert "within 24 h" in failing(findings(source, ending, cfg_of(ODCR)))[0]


def test_every_state_ec2_reports_is_handled_deliberately():
    """botocore's ec2 model, CapacityReservationState: each value is usable, not usable now, or
    gone; a value EC2 adds later fails this test until it is classified."""
    enum = botocore.session.get_session().get_service_model("ec2").shape_for("CapacityReservationState").enum
    classes = [set(reservations.USABLE), set(reservations.NOT_NOW), set(reservations.GONE)]
    assert set().union(*classes) == set(enum)
    assert sum(len(c) for c in classes) == len(enum)


def test_a_state_preflight_does_not_know_is_refused():
    lines = failing(findings("boto3", reservation(State="hibernating"), cfg_of(ODCR)))
    assert lines and "is in state 'hibernating', which preflight does not know" in lines[0]


def test_the_tags_preflight_looks_for_are_the_ones_the_launch_template_puts_on_instances():
    """Own instances are found by their launch template's instance tags (infra/cluster.py)."""
    values = {
        **MINIMAL,
        "llm-training-eks:nodeGroups": [{**MINIMAL["llm-training-eks:nodeGroups"][0], "capacity": ODCR}],
    }
    plan = run_plan(values)
    (template,) = [r for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if "ng-trn1" in r["name"]]
    (spec,) = [s for s in template["inputs"]["tagSpecifications"] if s["resourceType"] == "instance"]
    cfg = config.parse(config.from_stack_values(values))
    assert reservations.own_instance_tags(cfg, cfg.node_groups[0]).items() <= spec["tags"].items()


# --------------------------------------------------------------------------- node groups (upgrade check)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("deployed", "desired", "ok"), [(None, 0, True), ("1.34", 4, False), ("1.34", 0, True)])
def test_capacity_block_upgrade_reads_the_deployed_group(source: str, deployed: str | None, desired: int, ok: bool):
    cfg = config.parse(
        {
            "region": "us-west-2",
            "cluster": {**API_PATH, "kubernetesVersion": "1.35"},
            "nodeGroups": [{"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "capacity": BLOCK}],
        }
    )
    name = cfg.cluster.name
    if source == "boto3":
        account, (stub,) = boto_account(eks=[("list_clusters", {"clusters": [name] if deployed else []})])
        if deployed:
            stub.add_response("list_nodegroups", {"nodegroups": ["trn1"]})
            group = {"nodegroupName": "trn1", "version": deployed, "scalingConfig": {"desiredSize": desired}}
            stub.add_response("describe_nodegroup", {"nodegroup": group})
        (finding,) = preflight.check_capacity_block_upgrades(account, cfg)
    else:
        answers = {
            TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="us-west-2", names=[name] if deployed else []),
            TOKENS["node_groups"]: wire(aws.eks.GetNodeGroupsResult, cluster_name=name, id=name, names=["trn1"]),
            TOKENS["node_group"]: wire(
                aws.eks.GetNodeGroupResult,
                cluster_name=name,
                node_group_name="trn1",
                version=deployed,
                scaling_configs=[wire(aws.eks.outputs.GetNodeGroupScalingConfigResult, desired_size=desired)],
            ),
        }
        (found,) = under_provider(
            InvokeMocks(answers), lambda: preflight.check_capacity_block_upgrades(provider_account(cfg), cfg)
        )
        (finding,) = found
    assert finding.ok is ok, finding.line()


OLDER = "1.35.2-20260318"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("release", "desired", "ok"), [(OLDER, 4, False), (OLDER, 0, True), (None, 4, True)])
def test_a_release_bump_of_a_block_group_with_nodes_is_refused(
    source: str, release: str | None, desired: int, ok: bool
) -> None:
    """EKS user guide, capacity-blocks-mng: update a Capacity Block group only at desired size 0. A
    new AMI release (here the automatic one: no releaseVersion pinned, and facts/amis.py's newest for
    1.35 is not what the group runs) rolls every node: refused while it has nodes, naming the pin that
    holds it and the way through. `None`: the group already runs the release the update pins."""
    cfg = config.parse(
        {
            "region": "us-west-2",
            "cluster": {**API_PATH, "kubernetesVersion": "1.35"},
            "nodeGroups": [{"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4, "capacity": BLOCK}],
        }
    )
    name, newest = cfg.cluster.name, amis.pinned_release(cfg, cfg.node_groups[0])
    assert newest is not None and newest.release_version != OLDER
    running = release or newest.release_version
    if source == "boto3":
        account, (stub,) = boto_account(eks=[("list_clusters", {"clusters": [name]})])
        stub.add_response("list_nodegroups", {"nodegroups": ["trn1"]})
        group = {"nodegroupName": "trn1", "version": "1.35", "releaseVersion": running,
                 "scalingConfig": {"desiredSize": desired}}  # fmt: skip
        stub.add_response("describe_nodegroup", {"nodegroup": group})
        (finding,) = preflight.check_capacity_block_upgrades(account, cfg)
    else:
        answers = {
            TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="us-west-2", names=[name]),
            TOKENS["node_groups"]: wire(aws.eks.GetNodeGroupsResult, cluster_name=name, id=name, names=["trn1"]),
            TOKENS["node_group"]: wire(
                aws.eks.GetNodeGroupResult,
                cluster_name=name,
                node_group_name="trn1",
                version="1.35",
                release_version=running,
                scaling_configs=[wire(aws.eks.outputs.GetNodeGroupScalingConfigResult, desired_size=desired)],
            ),
        }
        (found,) = under_provider(
            InvokeMocks(answers), lambda: preflight.check_capacity_block_upgrades(provider_account(cfg), cfg)
        )
        (finding,) = found
    assert finding.ok is ok, finding.line()
    if not ok:
        assert f"set nodeGroups[].releaseVersion: {OLDER} until the block ends" in finding.message
        assert "desiredSize: 0" in finding.message


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("state", sorted(set(reservations.NOT_NOW) - {"scheduled"}))
def test_a_reservation_not_usable_now_is_fine_only_at_zero(source: str, state: str):
    waiting = reservation(State=state, AvailableInstanceCount=0)
    assert failing(findings(source, waiting, cfg_of(ODCR, desiredSize=0, minSize=0, maxSize=4))) == []
    (line,) = failing(findings(source, waiting, cfg_of(ODCR)))
    assert line.endswith("keep desiredSize: 0 (and minSize: 0) until it is active, then raise it")


def test_a_missing_reservation_is_reported_by_both_sources():
    ec2_account, (stub,) = boto_account(ec2=[])
    stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound")
    by_boto = reservations.check_reservations(ec2_account, cfg_of(ODCR), NOW, 24)
    # terraform-provider-aws: NotFound from EC2 becomes retry.NotFoundError, "couldn't find resource".
    provider_error = f"reading EC2 Capacity Block Reservation ({CR_ID}): couldn't find resource"
    mocks = InvokeMocks({TOKENS["reservation"]: provider_error})
    (by_provider,) = under_provider(
        mocks, lambda: reservations.check_reservations(provider_account(cfg_of(ODCR)), cfg_of(ODCR), NOW, 24)
    )
    expected = [f"FAIL reservation nodeGroups[trn1] {CR_ID}: not found in us-west-2: check the id and the region"]
    assert failing(by_boto) == failing(by_provider) == expected


def test_the_code_follows_the_recorded_facts():
    """The tag, states, instance filters and not-found texts preflight relies on are the recorded ones."""
    states = upstream.facts("ec2-capacity-reservation-states")
    invokes = upstream.facts("pulumi-aws-invokes-7.51.1")
    assert states["block_size_tag"] == account.UPCOMING_TAG
    assert set(states["states"]) == set(reservations.USABLE) | set(reservations.NOT_NOW) | set(reservations.GONE)
    assert set(states["undocumented_in_state_doc"]) <= set(reservations.NOT_NOW)
    assert set(invokes["not_found_texts"]) <= set(account_invokes._NOT_FOUND)
    sdk = Path(aws.__file__).parent
    for token in invokes["tokens"].values():
        module = token.split(":")[1].split("/")
        path = sdk / ("" if module[0] == "index" else module[0]) / f"{_snake(module[1])}.py"
        assert f"'{token}'" in path.read_text(), f"{token} is not invoked by {path}"


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


# --------------------------------------------------------------------------- the program: gate, then the stack


def test_the_gate_asks_through_the_provider_the_stack_then_uses():
    """Inside `pulumi up` preflight invokes through the stack's one AWS provider (same region and
    credentials as every resource), and the components reuse that provider."""
    values = {
        **MINIMAL,
        "llm-training-eks:nodeGroups": [{**MINIMAL["llm-training-eks:nodeGroups"][0], "capacity": ODCR}],
    }
    cfg = config.parse(config.from_stack_values(values))
    today = dt.datetime.now(dt.UTC)  # the gate checks against the clock
    answers = {
        TOKENS["offerings"]: wire(
            aws.ec2.GetInstanceTypeOfferingsResult, id="us-west-2", locations=["us-west-2c", "us-west-2d"]
        ),
        TOKENS["instance_type"]: wire(
            aws.ec2.GetInstanceTypeResult, id="trn1.32xlarge", efa_supported=True, efa_maximum_interfaces=8
        ),
        TOKENS["reservation"]: reservation_answer(
            reservation(TotalInstanceCount=2, AvailableInstanceCount=2, EndDate=today + dt.timedelta(days=30))
        ),
        TOKENS["caller"]: wire(aws.GetCallerIdentityResult, arn="arn:aws:iam::123456789012:user/deployer", id="x"),
        TOKENS["quota"]: lambda args: wire(aws.servicequotas.GetServiceQuotaResult, value=4096.0, id=args["quotaCode"]),
        # Not deployed yet: no cluster, so no deployed Kubernetes version to step from.
        TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="us-west-2", names=[]),
        # ... and no file system to hold the storage keys against.
        TOKENS["resources_by_tag"]: wire(
            aws.resourcegroupstaggingapi.GetResourcesResult,
            id="us-west-2",
            resource_arn_lists=[],
            resource_tag_mapping_lists=[],
        ),
    }
    mocks = InvokeMocks(answers)

    def program() -> None:
        preflight.gate(cfg)
        stack.build_layer(cfg)

    under_provider(mocks, program)
    asked = {tok for tok, _, _ in mocks.calls if tok in TOKENS.values()}
    assert asked == {answers_token for answers_token in answers}
    assert all(p.startswith(PROVIDER_URN + "::") for tok, _, p in mocks.calls if tok in TOKENS.values())
    assert mocks.providers == ["aws"], "one AWS provider, shared by preflight and the components"
