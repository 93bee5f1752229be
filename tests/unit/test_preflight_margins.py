"""Preflight's reservation end margin, per capacity type.

EC2 sells Capacity Blocks in 1-day increments ending 11:30 UTC, and a first day can be shorter
(tests/upstream/aws-ec2-capacity-blocks-purchase-2026-11.yaml): a fixed 24 h margin refused a
1-day block all its life and every block's last day, inside `pulumi preview`/`up` too. A block
is drained by its own scheduled scale-down, which preflight already holds ahead; an ODCR's
instances outlive it on On-Demand rates, so a day's notice stays its default.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pulumi_aws as aws
import pytest

import config
from config.capacity import CAPACITY_BLOCK_DAY_HOURS, DEFAULT_END_MARGIN_HOURS
from tests import upstream
from tests.conftest import API_PATH, MINIMAL, placed
from tests.unit.preflight_sources import (
    CR_ID,
    NOW,
    TOKENS,
    InvokeMocks,
    boto_account,
    provider_account,
    reservation,
    reservation_answer,
    under_provider,
    wire,
)
from tools import preflight
from tools.aws import reservations

SOURCES = ("boto3", "provider")


def block_group(end: dt.datetime, **capacity: Any) -> dict[str, Any]:
    return {
        "name": "trn1",
        "instanceType": "trn1.32xlarge",
        "desiredSize": 4,
        "availabilityZone": "us-west-2d",
        "capacity": {"type": "capacity-block", "reservationId": CR_ID, "endsAt": end.isoformat(), **capacity},
    }


def cfg_of(group: dict[str, Any]) -> config.StackConfig:
    return config.parse({"region": "us-west-2", "cluster": API_PATH, "nodeGroups": [group], **placed("us-west-2d")})


def last_day_block(now: dt.datetime) -> tuple[dict[str, Any], dt.datetime]:
    """A 1-day block, active, 14 hours in: it ends in 10 hours."""
    end = now + dt.timedelta(hours=10)
    return reservation(ReservationType="capacity-block", StartDate=end - dt.timedelta(days=1), EndDate=end), end


def failing_lines(source: str, cr: dict[str, Any], cfg: config.StackConfig) -> list[str]:
    """check_reservations with each group's own margin (no override), through `source`."""
    if source == "boto3":
        account, (stub,) = boto_account(ec2=[("describe_capacity_reservations", {"CapacityReservations": [cr]})])
        found = reservations.check_reservations(account, cfg, NOW)
        stub.assert_no_pending_responses()
    else:
        mocks = InvokeMocks({TOKENS["reservation"]: reservation_answer(cr)})
        (found,) = under_provider(mocks, lambda: reservations.check_reservations(provider_account(cfg), cfg, NOW))
    return [f.line() for f in found if not f.ok]


def test_the_defaults_follow_the_recorded_facts():
    facts = upstream.facts("aws-ec2-capacity-blocks-purchase-2026-11")
    assert facts["block_duration_increment_hours"] == CAPACITY_BLOCK_DAY_HOURS
    # A block's default margin must let its shortest block run at all.
    assert DEFAULT_END_MARGIN_HOURS["capacity-block"] < facts["shortest_block_hours_below"]
    assert facts["odcr_instances_at_end"].startswith("keep running")
    assert DEFAULT_END_MARGIN_HOURS["reservation"] == 24


@pytest.mark.parametrize("source", SOURCES)
def test_a_capacity_block_runs_nodes_on_its_last_day(source: str):
    cr, end = last_day_block(NOW)
    assert failing_lines(source, cr, cfg_of(block_group(end))) == []


@pytest.mark.parametrize("source", SOURCES)
def test_a_capacity_block_margin_the_stack_asks_for_is_held(source: str):
    cr, end = last_day_block(NOW)
    (line,) = failing_lines(source, cr, cfg_of(block_group(end, endMarginHours=12)))
    assert "within 12 h (capacity.endMarginHours)" in line


@pytest.mark.parametrize("source", SOURCES)
def test_an_odcr_keeps_its_day_of_notice_and_the_stack_can_shorten_it(source: str):
    ending = reservation(EndDate=NOW + dt.timedelta(hours=5))
    odcr = {"type": "reservation", "reservationId": CR_ID}
    group = {**block_group(NOW), "capacity": odcr}
    (line,) = failing_lines(source, ending, cfg_of(group))
    assert "ends at 2026-07-01 17:00 UTC, within 24 h" in line
    assert failing_lines(source, ending, cfg_of({**group, "capacity": {**odcr, "endMarginHours": 2}})) == []


@pytest.mark.parametrize("source", SOURCES)
def test_a_scale_down_before_the_block_starts_is_refused(source: str):
    """A scaleDownMinutesBeforeEnd longer than a short block leaves it never running nodes."""
    start, end = NOW + dt.timedelta(days=1), NOW + dt.timedelta(days=1, hours=6)
    cr = reservation(ReservationType="capacity-block", State="scheduled", StartDate=start, EndDate=end)
    cfg = cfg_of({**block_group(end, scaleDownMinutesBeforeEnd=420), "desiredSize": 0, "minSize": 0, "maxSize": 4})
    (line,) = failing_lines(source, cr, cfg)
    assert "comes before the block starts (2026-07-02 12:00 UTC)" in line


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        ({"type": "on-demand", "endMarginHours": 2}, "only for reservation and capacity-block, not on-demand"),
        (
            {"type": "capacity-block", "reservationId": CR_ID, "endsAt": "2027-03-01T11:30:00Z", "endMarginHours": 24},
            "24 h would refuse every block's last day",
        ),
    ],
)
def test_a_margin_that_cannot_work_is_refused_naming_the_key(capacity: dict[str, Any], message: str):
    group = {**MINIMAL["llm-training-eks:nodeGroups"][0], "capacity": capacity}
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, "llm-training-eks:nodeGroups": [group]})
    problems = e.value.problems
    assert any(p.startswith("nodeGroups[0].capacity.endMarginHours: ") and message in p for p in problems), problems


def test_the_gate_inside_pulumi_up_passes_a_block_on_its_last_day():
    """`gate()` ran the checks with a fixed 24 h margin: every preview and update of a block's last
    day failed while its group was above 0."""
    today = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)  # the gate checks against the clock
    cr, end = last_day_block(today)
    cfg = cfg_of(block_group(end))
    answers = {
        TOKENS["offerings"]: wire(aws.ec2.GetInstanceTypeOfferingsResult, id="us-west-2", locations=["us-west-2d"]),
        TOKENS["instance_type"]: wire(
            aws.ec2.GetInstanceTypeResult, id="trn1.32xlarge", efa_supported=True, efa_maximum_interfaces=8
        ),
        TOKENS["reservation"]: reservation_answer(cr),
        TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="us-west-2", names=[]),
        TOKENS["caller"]: wire(aws.GetCallerIdentityResult, arn="arn:aws:iam::123456789012:user/deployer", id="x"),
        TOKENS["quota"]: lambda args: wire(aws.servicequotas.GetServiceQuotaResult, value=4096.0, id=args["quotaCode"]),
    }
    (result,) = under_provider(InvokeMocks(answers), lambda: preflight.gate(cfg))
    assert result is None
