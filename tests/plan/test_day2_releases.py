"""Day 2 on a pinned EKS AMI release: the p4d block group (2 x p4d.24xlarge) moved from the v20260129
release (1.35.0-20260129) to v20260318 (1.35.2-20260318), both builds in facts/amis.py as
awslabs/amazon-eks-ami lists them (tests/upstream: the release notes at 81fec2e8). The provider
updates releaseVersion in place and EKS carries it out with UpdateNodegroupVersion, which replaces
every node of the group (terraform-provider-aws internal/service/eks/node_group.go @b11fc0fd,
resourceNodeGroupUpdate; facts.replacements.EKS_NODE_GROUP_ROLLS): a roll under the run, never a new
node group. The same pair a year on: an example file is judged at the example clock and still plans;
a stack of your own is judged at the real clock and its ended block is refused, naming the key.
(A GPU stack: both releases carry Neuron driver 2.25/2.26, which config refuses for the Neuron SDK
2.33 images of the trn2 examples, naming the release that fits.)
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from config.checks import capacity
from facts import amis
from tests.conftest import CONFIG_NOW, run_plan, stack_values
from tests.plan import day2, day2_nodes
from tools import cli

STACK = "p4d"
NS = "llm-training-eks:"
WAS, NOW = "1.35.0-20260129", "1.35.2-20260318"
GROUP = "a100"
ROLL = "! node group a100: its 2 node(s) roll (releaseVersion)"


def pinned(release: str) -> dict[str, Any]:
    values = stack_values(STACK)
    values[NS + "nodeGroups"][0]["releaseVersion"] = release
    return values


def test_the_v20260318_bump_rolls_the_group_in_place() -> None:
    assert amis.find(WAS) is not None and amis.find(NOW) is not None
    before = run_plan(pinned(WAS), STACK)
    after = run_plan(pinned(NOW), STACK, deployed=before)
    update = day2.diff(before, after)
    assert not update.of("replace") and not update.of("delete") and update.blocked == []
    (urn, roll) = next(iter(day2_nodes.rolls(update).items()))
    assert roll.changed == ("releaseVersion",) and len(day2_nodes.rolls(update)) == 1
    assert day2_nodes.group_label(after, urn) == GROUP
    assert day2_nodes.runs_on(after, GROUP) == sorted(stack_values(STACK)[NS + "workloads"])
    assert [r["inputs"]["releaseVersion"] for r in after["resources"] if r["urn"] == urn] == [NOW]
    # No launch template version: the release is the node group's, the AMI EKS picks from it.
    assert {u.rsplit("::", 1)[1] for u in update.touched()} & {f"ng-{GROUP}-lt"} == set()


def test_make_diff_names_the_roll_and_the_way_through(tmp_path: Path) -> None:
    """p4d's runs on the group are acceptance runs (fabric, fsx-read): done once they reported, so the
    roll disrupts no work (exit 0); the line still says a block group rolls only at desired size 0."""
    code, out, err = day2.make_diff(tmp_path, STACK, pinned(WAS), pinned(NOW))
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if f"node group {GROUP}:" in x]
    assert line.strip().startswith(f"- {ROLL[2:]}; nothing runs on them"), line
    assert "make this edit after the block ends, or deploy desiredSize: 0 and minSize: 0 first" in line
    assert f"~ NodeGroup ng-{GROUP}-ng update: releaseVersion" in out


A_YEAR_ON = CONFIG_NOW + dt.timedelta(days=365)


def test_a_year_on_an_example_still_plans_a_stack_of_your_own_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(capacity, "utc_now", lambda: A_YEAR_ON)
    ends = stack_values(STACK)[NS + "nodeGroups"][0]["capacity"]["endsAt"]
    assert dt.datetime.fromisoformat(ends.replace("Z", "+00:00")) < A_YEAR_ON
    # As the examples folder holds it (EXAMPLES_DIR pointed at the pair's folder): the example clock.
    monkeypatch.setattr(cli, "EXAMPLES_DIR", tmp_path / "examples")
    code, out, err = day2.make_diff(tmp_path / "examples", STACK, pinned(WAS), pinned(NOW))
    assert code == 0 and ROLL[2:] in out, err
    # A stack of your own: the real clock, a year on; the block has ended.
    code, out, err = day2.make_diff(tmp_path / "mine", STACK, pinned(WAS), pinned(NOW))
    assert (code, out) == (2, ""), out
    when = dt.datetime.fromisoformat(ends.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M UTC")
    assert f"nodeGroups[0].capacity.endsAt: the block ends {when}" in err, err
