"""The fabric facts: every accelerated type's all-reduce floor, held to the published figures it is
85% of (tests/upstream/awsome-distributed-ai-allreduce-figures.yaml), and the pinned GPU fabric
stack held to its sources (tests/upstream/gpu-fabric-stack-2026-11.yaml)."""

from __future__ import annotations

import pytest

from facts import fabric
from facts import instances as catalog
from tests import upstream

FIGURES = upstream.facts("awsome-distributed-ai-allreduce-figures")


def test_every_accelerated_type_has_a_floor() -> None:
    assert set(fabric.FLOORS) == set(catalog.ACCELERATED)


@pytest.mark.parametrize("name", sorted(catalog.ACCELERATED))
def test_floor_is_85_percent_of_the_published_figure(name: str) -> None:
    """A published figure is the one recorded for this type (p5e borrows p5's: the same 32 x 100
    Gbps EFA), at the same message size; the floor is at least 85% of it and below it. Types with
    nothing published carry a presence floor and say why."""
    floor = fabric.FLOORS[name]
    if floor.published is None:
        assert name in FIGURES["not_published"]
        assert floor.presence_floor_gbps and floor.why
        assert "no published figure" in floor.basis
        return
    fig = FIGURES.get(name) or FIGURES["p5.48xlarge"]
    assert name in FIGURES or name in FIGURES["not_published"]
    p = floor.published
    assert (p.bus_bandwidth_gbps, p.message_size, p.nodes) == (fig["busbw"], fig["size"], fig["nodes"])
    assert fig["path"] in p.source
    assert floor.message_size == p.message_size
    assert fabric.FLOOR_SHARE * p.bus_bandwidth_gbps - 0.1 <= floor.min_bus_bandwidth_gbps < p.bus_bandwidth_gbps
    assert f"{p.bus_bandwidth_gbps:g} GB/s" in floor.basis


def test_brief_floors() -> None:
    """The figures the issue names: p5, p5en, p6-b200, p6-b300 published; trn2/trn2u honest about
    having none."""
    got = {n: fabric.FLOORS[n].min_bus_bandwidth_gbps for n in ("p5.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge")}
    assert got == {"p5.48xlarge": 414.0, "p6-b200.48xlarge": 320.4, "p6-b300.48xlarge": 555.9}
    assert fabric.FLOORS["trn2u.48xlarge"].published is None
