"""URN snapshot of every example stack.

A resource's URN is its identity in the Pulumi state: a URN that changes (a renamed
resource, a new parent, a new type token) makes `pulumi up` delete the live resource and
create a new one, unless the resource carries an alias. Refactors must keep these files
unchanged; a deliberate change regenerates them and shows up in review:

    UPDATE_GOLDEN=1 python -m pytest -q tests -k urn_snapshot

A renamed resource keeps its live resource through an alias: tests/plan/test_urn_aliases.py holds
every URN of the last release (urns-earlier.txt) to today's plan and its aliases. A team's own
stacks get the same check when the team asks for it (tools.snapshot,
tests/plan/test_team_snapshots.py).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import EXAMPLE_STACKS, GOLDEN, stack_plan
from tools import snapshot


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_urn_snapshot(stack: str) -> None:
    path = GOLDEN / stack / "urns.txt"
    text = snapshot.urns_text(stack_plan(stack))
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no URN snapshot for {stack}; create it with UPDATE_GOLDEN=1"
    old, new = set(path.read_text().splitlines()), set(text.splitlines())
    assert not old - new and not new - old, (
        f"URNs of {stack} changed: gone {sorted(old - new)[:5]}, new {sorted(new - old)[:5]}"
        " (a gone URN is a deleted live resource unless it has an alias; regenerate with UPDATE_GOLDEN=1)"
    )
