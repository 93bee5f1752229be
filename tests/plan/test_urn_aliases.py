"""Every live resource of an earlier release is kept: `pulumi up` after a change replaces nothing.

A resource's URN is its identity in the Pulumi state. tests/golden/<stack>/urns-earlier.txt holds
the URNs of each example stack as the last release planned them (frozen from main before the
workload got its kind: `TrainingRun` became `Workload`). Each of them must be a URN of
today's plan or an alias of one of its resources (`pulumi.Alias`, as the plan JSON records it:
tools/offline/mocks.py computes the URNs from the alias specs and multiplies them into the children as
the engine does), and no two resources may claim one. When a change renames on purpose, it adds
the alias, this test proves it keeps the live resources, and urns.txt is regenerated; the
earlier file moves on only with a release (copy urns.txt over it once the change is deployed).

The second half holds the mock monitor to the engine's alias rules on a small program of its own:
the Python SDK sends only a resource's own alias specs (the engine, like Pulumi's MockMonitor,
supports them: pulumi/runtime/resource.py `prepare_aliases`; the SDK's own multiplication,
`all_aliases`, is for engines without), so a child inherits its parent's aliases only where the
engine computes them (pulumi/pulumi pkg/resource/deploy/step_generator.go `generateAliases`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import settings

from tests.conftest import EXAMPLE_STACKS, GOLDEN, stack_plan, stack_values
from tools import plan, snapshot
from tools.offline import mocks
from workloads import deploy

EARLIER = "urns-earlier.txt"


def earlier_urns(stack: str) -> list[str]:
    path = GOLDEN / stack / EARLIER
    assert path.is_file(), f"no {path}: copy tests/golden/{stack}/urns.txt of the last release there"
    return path.read_text().splitlines()


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_urn_of_the_earlier_release_is_kept(stack: str) -> None:
    problems = snapshot.unkept(earlier_urns(stack), stack_plan(stack))
    assert not problems, "\n".join(problems[:10])


def test_without_the_workload_alias_every_run_is_deleted_and_created_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy, "ALIASES", [])
    problems = snapshot.unkept(earlier_urns("dev"), plan.run(stack_values("dev"), "dev"))
    gone = "URN gone (a deleted live resource: no resource has it or aliases it): urn:pulumi:dev::llm-training-eks::"
    assert problems == [
        f"{gone}llm-training-eks:workloads:TrainingRun$kubernetes:kubeflow.org/v2beta1:MPIJob::first-run-run-001-train",
        f"{gone}llm-training-eks:workloads:TrainingRun$kubernetes:networking.k8s.io/v1:NetworkPolicy::first-run-run-001"
        "-train-peers",
        f"{gone}pulumi:pulumi:Stack$llm-training-eks:workloads:TrainingRun::first-run",
    ]


def test_a_snapshot_takes_a_urn_gone_that_a_resource_aliases_as_that_resource(tmp_path: Path) -> None:
    (tmp_path / "urns.txt").write_text("urn:old\nurn:kept\nurn:lost\n")
    lines = snapshot.differences({"urns.txt": "urn:kept\nurn:new\nurn:added\n"}, tmp_path, {"urn:old": "urn:new"})
    assert lines == ["URN gone (a deleted live resource unless it has an alias): urn:lost", "URN new: urn:added"]


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
