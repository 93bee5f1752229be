"""ODCRs in preflight. pulumi-aws 7.51.1 has no ODCR data source; its
getCapacityBlockReservation is DescribeCapacityReservations by id with no type filter
(terraform-provider-aws ec2_capacity_block_reservation_data_source.go @23b9e58d, recorded in
tests/upstream/pulumi-aws-invokes-7.51.1.yaml), so it is the ODCR API and returns an ODCR whole.
These tests hold that against the SDK's result type and botocore's ec2 model, and check what only
an ODCR varies: its platform and tenancy, which EC2 matches before an instance may use it."""

from __future__ import annotations

import botocore.session
import pulumi_aws as aws
import pytest

from tests import upstream
from tests.unit.preflight_sources import reservation
from tests.unit.test_preflight_day2 import ODCR, SOURCES, cfg_of, failing, findings
from tools.aws import reservations


def test_the_data_source_returns_every_odcr_member_preflight_reads() -> None:
    """Each CapacityReservation member preflight reads (botocore's ec2 model) is an attribute of the
    SDK's GetCapacityBlockReservationResult, ODCR-only members included."""
    shape = botocore.session.get_session().get_service_model("ec2").shape_for("CapacityReservation")
    fields = upstream.facts("pulumi-aws-invokes-7.51.1")["reservation_fields"]
    read = {**{k: v.split(" ")[0] for k, v in fields.items()}, "instance_platform": "InstancePlatform",
            "tenancy": "Tenancy", "end_date_type": "EndDateType", "instance_match_criteria": "InstanceMatchCriteria"}  # fmt: skip
    for attribute, member in read.items():
        assert member in shape.members, member
        assert isinstance(getattr(aws.ec2.GetCapacityBlockReservationResult, attribute, None), property), attribute
    assert upstream.facts("pulumi-aws-invokes-7.51.1")["reservation_lookup_filters_type"] is False


@pytest.mark.parametrize("source", SOURCES)
def test_an_open_ended_odcr_is_read_as_an_odcr(source: str) -> None:
    """EndDateType unlimited: no EndDate. Both sources read it, and the group fits."""
    cr = reservation(EndDateType="unlimited", InstanceMatchCriteria="open")
    del cr["EndDate"]
    found = findings(source, cr, cfg_of(ODCR))
    assert failing(found) == [], found


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"InstancePlatform": "Windows"}, "is for Windows instances, EKS nodes are Linux/UNIX"),
        ({"InstancePlatform": "Red Hat Enterprise Linux"}, "is for Red Hat Enterprise Linux instances"),
        ({"Tenancy": "dedicated"}, "has dedicated tenancy, the nodes launch with default tenancy"),
    ],
)
def test_an_odcr_the_nodes_cannot_use_is_refused(source: str, over: dict[str, str], says: str) -> None:
    """EC2 user guide, capacity-reservations-using: an instance uses a reservation only when its
    instance type, platform, AZ and tenancy match. AL2023 nodes are Linux/UNIX at default tenancy
    (botocore ec2 model: CapacityReservationInstancePlatform, CapacityReservationTenancy); another
    ODCR leaves the targeted launch without capacity."""
    assert over.get("InstancePlatform", reservations.LINUX) in _enum("CapacityReservationInstancePlatform")
    assert over.get("Tenancy", "default") in _enum("CapacityReservationTenancy")
    (line,) = failing(findings(source, reservation(**over), cfg_of(ODCR)))
    assert says in line


def _enum(name: str) -> list[str]:
    return list(botocore.session.get_session().get_service_model("ec2").shape_for(name).enum)
