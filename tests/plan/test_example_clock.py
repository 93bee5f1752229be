"""The example stacks plan on any date. Their Capacity Blocks carry dates of their
own (ending in March 2027): judged by the real clock, `make plan` of them would refuse every one from
then on, while the tests, which pin the clock, stay green. `tools.plan` plans a file of examples/ at
the example clock (config.checks.capacity.EXAMPLE_CLOCK); a stack of your own keeps the real clock,
so an ended block is still refused where it matters (EC2 Auto Scaling refuses a scheduled action in
the past: PutScheduledUpdateGroupAction, tests/upstream/aws-ec2-capacity-blocks-2026-11.yaml)."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest

from config.checks import capacity
from tests.conftest import EXAMPLE_STACKS, example_file
from tools import plan

LATER = dt.datetime(2028, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def in_2028(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capacity, "utc_now", lambda: LATER)


@pytest.mark.usefixtures("in_2028")
@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_example_plans_in_2028(stack: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert plan.main(["--stack", stack, "--format", "json"], stdout=out, stderr=err) == 0, err.getvalue()


@pytest.mark.usefixtures("in_2028")
def test_a_copy_of_an_example_keeps_the_real_clock(tmp_path: Path) -> None:
    copy = tmp_path / "Pulumi.mine.yaml"
    copy.write_text(example_file("p5-capacity-block").read_text())
    err = io.StringIO()
    assert plan.main(["--config-file", str(copy)], stdout=io.StringIO(), stderr=err) == 2
    assert "nodeGroups[0].capacity.endsAt: the block ends 2027-03-01 11:30 UTC" in err.getvalue()
