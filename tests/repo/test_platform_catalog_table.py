"""docs/platform.md's table of accelerated instance types says what the catalog, the floors and the
price table say: each row's EFA devices and cards, price and floor are the facts' own."""

from __future__ import annotations

import re

from facts import fabric, prices
from facts import instances as catalog
from tests.conftest import ROOT


def rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "platform.md").read_text()
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in catalog.ACCELERATED:
            out[cells[0]] = cells
    return out


def test_every_accelerated_type_has_a_row_with_its_facts() -> None:
    table = rows()
    assert set(table) == set(catalog.ACCELERATED)
    for name, (_, _, efa, _, price, floor) in table.items():
        it = catalog.ACCELERATED[name]
        assert efa == f"{it.efa_interfaces} ({it.network_cards})", name
        assert float(re.match(r"[0-9.]+", price).group()) == round(prices.EC2_ON_DEMAND_HOURLY[name], 2), name
        f = fabric.FLOORS[name]
        if floor.endswith("'s"):  # a type with another's fabric borrows its published figure
            (other,) = [n for n in catalog.ACCELERATED if n.split(".")[0] == floor.removesuffix("'s")]
            assert f.published is not None and f.published == fabric.FLOORS[other].published, name
            continue
        assert floor.startswith(f"{f.min_bus_bandwidth_gb_per_second:g} GB/s at {f.message_size}"), name
        assert ("presence floor" in floor) == (f.published is None), name
