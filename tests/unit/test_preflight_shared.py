"""Preflight adds up the node groups that share one reservation: two groups of 4 on a reservation
of 4 each pass alone, but EC2 starts only 4 (EC2 user guide, capacity-reservations-using: instances
that match launch into the reservation until its instance count is used). How many instances are
free is the account's, so this is preflight's rule; config checks that the groups agree on what the
reservation is (tests/unit/test_config_destinations.py)."""

from __future__ import annotations

from typing import Any

import config
from tests.conftest import API_PATH, placed
from tests.unit.preflight_sources import CR_ID, NOW, boto_account, instances_response, reservation
from tools.aws import reservations

ODCR = {"type": "reservation", "reservationId": CR_ID}


def _cfg(*sizes: int) -> config.StackConfig:
    groups = [
        {"name": f"trn1-{i}", "instanceType": "trn1.32xlarge", "desiredSize": n, "availabilityZone": "us-west-2d"}
        for i, n in enumerate(sizes)
    ]
    return config.parse(
        {
            "region": "us-west-2",
            "cluster": API_PATH,
            "nodeGroups": [{**g, "capacity": ODCR} for g in groups],
            **placed(*{g["availabilityZone"] for g in groups}),
        }
    )


def _check(cfg: config.StackConfig, ec2: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    account, stubbers = boto_account(ec2=ec2)
    found = reservations.check_reservations(account, cfg, NOW, 24)
    for stub in stubbers:
        stub.assert_no_pending_responses()  # one look-up of the reservation, not one per group
    return found


def test_two_groups_of_4_on_a_reservation_of_4_are_refused_together() -> None:
    own = ("describe_instances", instances_response(0))
    found = _check(
        _cfg(4, 4), [("describe_capacity_reservations", {"CapacityReservations": [reservation()]}), own, own]
    )
    lines = [f.line() for f in found if not f.ok]
    assert lines == [
        f"FAIL reservation nodeGroups[trn1-0+trn1-1] {CR_ID}: has 4 free instances and 0 used by these node groups'"
        " own instances, the 2 node groups on it need together 8: lower desiredSize or use a larger reservation"
    ]


def test_two_groups_that_fit_together_pass() -> None:
    found = _check(_cfg(2, 2), [("describe_capacity_reservations", {"CapacityReservations": [reservation()]})])
    assert [f.ok for f in found] == [True]
    assert found[0].subject == f"nodeGroups[trn1-0+trn1-1] {CR_ID}"
