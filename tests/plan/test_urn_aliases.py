"""Aliases as the engine computes them, and the check that a plan keeps the live resources of
an earlier one (tools.snapshot.unkept): every earlier URN a URN of the plan or an alias of one
of its resources, and no two resources claiming one.

The Python SDK sends only a resource's own alias specs (the engine, like Pulumi's MockMonitor,
supports them: pulumi/runtime/resource.py `prepare_aliases`; the SDK's own multiplication,
`all_aliases`, is for engines without), so a child inherits its parent's aliases only where the
engine computes them (pulumi/pulumi pkg/resource/deploy/step_generator.go `generateAliases`):
tools/mocks.py does it as the engine does, held here on a small program of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings

from tools import mocks, snapshot


def test_a_urn_two_resources_claim_is_refused() -> None:
    planned = {
        "resources": [{"urn": "urn:new-a", "aliases": ["urn:old"]}, {"urn": "urn:new-b", "aliases": ["urn:old"]}]
    }
    assert snapshot.unkept(["urn:old", "urn:new-a"], planned) == [
        "URN claimed by 2 resources (the engine refuses the update): urn:old: ['urn:new-a', 'urn:new-b']"
    ]


# --------------------------------------------------------------------------- the engine's alias rules


class SpecsSeen(mocks.RecordingMonitor):
    """The recording monitor, also keeping how many alias specs the SDK sent for each resource."""

    def __init__(self, plan_mocks: mocks.PlanMocks):
        super().__init__(plan_mocks)
        self.sent: dict[str, int] = {}

    def RegisterResource(self, request: Any) -> Any:
        self.sent[request.name] = len(request.aliases)
        return super().RegisterResource(request)


def aliases_of_a_small_program() -> tuple[dict[str, list[str]], dict[str, int]]:
    """Register a few refactors' worth of resources; return each one's recorded aliases by name,
    and the alias specs the SDK sent for it."""
    settings.ROOT.set(None)
    plan_mocks = mocks.PlanMocks()
    monitor = SpecsSeen(plan_mocks)
    pulumi.runtime.set_mocks(plan_mocks, project="proj", stack="st", preview=False, monitor=monitor)

    def component(type_: str, name: str, **opts: Any) -> pulumi.ComponentResource:
        return pulumi.ComponentResource(type_, name, None, pulumi.ResourceOptions(**opts))

    @pulumi.runtime.test
    def program() -> Any:
        # A new type token (the Workload's case): the children keep their names under it.
        app = component("test:index:New", "app", aliases=[pulumi.Alias(type_="test:index:Old")])
        component("test:index:Child", "app-child", parent=app)
        # A renamed component: a child named after it is renamed with it, and so is its child.
        renamed = component("test:index:Comp", "newname", aliases=[pulumi.Alias(name="oldname")])
        child = component("test:index:Child", "newname-x", parent=renamed)
        component("test:index:Leaf", "newname-x-y", parent=child)
        # Moved into a component, from the top level and from under another resource.
        home = component("test:index:Home", "home")
        component("test:index:Thing", "was-top", parent=home, aliases=[pulumi.Alias(parent=None)])
        component("test:index:Thing", "was-under-app", parent=home, aliases=[pulumi.Alias(parent=app)])
        return pulumi.Output.from_input(1)

    program()
    return {r.name: r.aliases for r in monitor.registrations.values()}, monitor.sent


def test_children_inherit_their_parents_aliases_as_the_engine_derives_them() -> None:
    aliases, sent = aliases_of_a_small_program()
    urn = "urn:pulumi:st::proj::"
    assert aliases == {
        "app": [f"{urn}pulumi:pulumi:Stack$test:index:Old::app"],
        "app-child": [f"{urn}test:index:Old$test:index:Child::app-child"],
        "newname": [f"{urn}pulumi:pulumi:Stack$test:index:Comp::oldname"],
        "newname-x": [f"{urn}test:index:Comp$test:index:Child::oldname-x"],
        "newname-x-y": [f"{urn}test:index:Child$test:index:Leaf::oldname-x-y"],
        "home": [],
        "was-top": [f"{urn}pulumi:pulumi:Stack$test:index:Thing::was-top"],
        # Under `app`, by its URN today or by its alias (whichever the state holds it by).
        "was-under-app": sorted(
            [
                f"{urn}test:index:New$test:index:Thing::was-under-app",
                f"{urn}test:index:Old$test:index:Thing::was-under-app",
            ]
        ),
    }
    # The SDK sent the children no alias: what they inherit is the engine's, here the monitor's.
    assert sent["app-child"] == sent["newname-x"] == sent["newname-x-y"] == 0 and sent["app"] == 1


def test_a_snapshot_takes_a_urn_gone_that_a_resource_aliases_as_that_resource(tmp_path: Path) -> None:
    (tmp_path / "urns.txt").write_text("urn:old\nurn:kept\nurn:lost\n")
    lines = snapshot.differences({"urns.txt": "urn:kept\nurn:new\nurn:added\n"}, tmp_path, {"urn:old": "urn:new"})
    assert lines == ["URN gone (a deleted live resource unless it has an alias): urn:lost", "URN new: urn:added"]
