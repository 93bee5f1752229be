"""`make timeline`: the layout of runs on capacity over time (estimates.timeline), with a pinned
clock; the command's text, JSON and SVG (tools.timeline)."""

from __future__ import annotations

import datetime as dt
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from estimates.timeline import Capacity, Checkpointing, Phase, RunInput, play
from tests.conftest import CONFIG_NOW
from tools import timeline
from tools.cli import EXAMPLES_DIR

START = dt.datetime(2027, 1, 4, 8, 0, tzinfo=dt.UTC)
SVG = "{http://www.w3.org/2000/svg}"


def block(hours: float, nodes: int = 2) -> Capacity:
    """A Capacity Block open from START, its scale-down `hours` later, its end an hour after that."""
    closes = START + dt.timedelta(hours=hours)
    return Capacity(
        "p5",
        "capacity-block",
        nodes,
        110.0,
        None,
        closes,
        closes + dt.timedelta(hours=1),
        "nodeGroups.p5.capacity.endsAt",
        prepaid=True,
    )


def training(steps: int = 1000, step_seconds: float = 60.0, every: int = 100, write: float = 60.0) -> RunInput:
    ck = Checkpointing(every, step_seconds, write, "workloads.pre.checkpointInterval")
    length = steps * step_seconds + steps // every * write
    return RunInput(
        "pre", "training", "p5", 2, (Phase("training", length),), steps, ck, length_key="workloads.pre.steps"
    )


def test_a_run_that_outlasts_its_block_is_warned_with_its_last_checkpoint() -> None:
    # 10 h = 36,000 s; a period is 100 x 60 s + 60 s = 6,060 s: 5 whole periods (step 500 saved),
    # then 5,700 s = 95 more steps done and lost at the scale-down.
    t = play([block(10)], [training()], START)
    texts = [str(w) for w in t.warnings]
    assert any(
        w.startswith("workloads.pre.steps: pre outlasts p5's capacity")
        and "about step 595 of 1,000" in w
        and "last checkpoint at step 500" in w
        for w in texts
    ), texts
    assert any(w.startswith("workloads.pre.checkpointInterval: pre loses 95 steps (10% of the run") for w in texts)
    (bar,) = t.bars
    assert bar.end == START + dt.timedelta(hours=10)
    assert [step for _, _, step in t.checkpoints] == [100, 200, 300, 400, 500]
    assert t.checkpoints[-1][1] == START + dt.timedelta(seconds=5 * 6060)


def test_a_run_that_fits_its_block_is_not_warned() -> None:
    t = play([block(17.5)], [training()], START)  # 16.9 h of training, 0.6 h idle after it
    assert t.warnings == []
    assert t.bars[0].end == START + dt.timedelta(seconds=1000 * 60 + 10 * 60)


def test_loss_within_the_share_is_not_warned_but_the_overrun_is() -> None:
    t = play([block(10)], [training()], START, max_loss=0.2)
    assert [w.key for w in t.warnings] == ["workloads.pre.steps"]


def test_a_block_that_idles_is_warned() -> None:
    gate = RunInput("fabric", "acceptance", "p5", 2, (Phase("acceptance", 120),))
    t = play([block(10)], [gate], START)
    (w,) = t.warnings
    assert w.key == "nodeGroups.p5.capacity.endsAt"
    assert "idles 10.0 h, 2027-01-04 08:02Z to 2027-01-04 18:00Z" in w.message


def test_a_short_gap_is_not_idle() -> None:
    gate = RunInput("fabric", "acceptance", "p5", 2, (Phase("acceptance", 120),))
    run = RunInput("pre", "training", "p5", 2, (Phase("training", 10 * 3600 - 120 - 1800),), after=("fabric",))
    assert play([block(10)], [gate, run], START).warnings == []


def test_a_run_that_cannot_start_before_its_block_closes() -> None:
    gate = RunInput("fabric", "acceptance", "p5", 2, (Phase("acceptance", 11 * 3600),))
    run = RunInput("pre", "training", "p5", 2, (Phase("training", 3600),), after=("fabric",))
    t = play([block(10)], [gate, run], START)
    assert any(w.message.startswith("pre cannot start before p5's capacity closes") for w in t.warnings)
    assert {b.run for b in t.bars} == {"fabric"}


def test_runs_wait_for_free_nodes_and_their_gate() -> None:
    od = Capacity("p5", "on-demand", 2, 110.0)
    gate = RunInput("fabric", "acceptance", "p5", 2, (Phase("acceptance", 600),))
    a = RunInput("a", "training", "p5", 2, (Phase("training", 3600),), after=("fabric",))
    b = RunInput("b", "training", "p5", 1, (Phase("training", 3600),), after=("fabric",))
    t = play([od], [b, gate, a], START)
    starts = {x.run: x.start for x in t.bars}
    assert starts["fabric"] == START
    assert starts["b"] == START + dt.timedelta(minutes=10)  # the stack file's order: b first
    assert starts["a"] == START + dt.timedelta(minutes=70)  # a needs both nodes: after b


def test_cost_accrues_the_whole_block_whatever_runs() -> None:
    t = play([block(10)], [], START, fixed_hourly=1.0)
    # 11 h of block (to its end, prepaid) at $110/h plus 11 h of the fixed part
    assert t.cost[-1] == (START + dt.timedelta(hours=11), 1221.0)


def _stack(tmp_path: Path, example: str, edit: Any) -> Path:
    doc = yaml.safe_load((EXAMPLES_DIR / f"Pulumi.{example}.yaml").read_text())
    edit(doc["config"])
    path = tmp_path / f"Pulumi.{example}-edited.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = timeline.main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_warns_of_a_capacity_block_run_that_outlasts_its_block(tmp_path: Path) -> None:
    ends = CONFIG_NOW + dt.timedelta(hours=30)

    def to_block(c: dict[str, Any]) -> None:
        c["llm-training-eks:nodeGroups"][0]["capacity"] = {
            "type": "capacity-block",
            "reservationId": "cr-0123456789abcdef0",
            "endsAt": ends.isoformat().replace("+00:00", "Z"),
        }

    stack = _stack(tmp_path, "trn1-llama2", to_block)
    code, out, err = _run("--config-file", str(stack), "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "trn1: 4 nodes, capacity-block" in out
    warning = next(line for line in out.splitlines() if "llama2 outlasts trn1's capacity" in line)
    assert "last checkpoint at step" in warning, warning
    data = json.loads((tmp_path / "out" / "timeline.json").read_text())
    assert data["start"] == "2026-07-01T12:00:00Z"  # the pinned clock
    assert any("llama2 outlasts" in w["message"] for w in data["warnings"])
    root = ET.parse(tmp_path / "out" / "timeline.svg").getroot()
    assert root.tag == f"{SVG}svg"
    titles = [e.findtext(f"{SVG}title") or "" for e in root.iter(f"{SVG}rect")]
    assert any(t.startswith("llama2: training") for t in titles)


def test_the_command_warns_of_a_block_that_idles() -> None:
    code, out, _ = _run("--stack", "p6-b300", "--format", "json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert any(w["key"] == "nodeGroups.b300.capacity.endsAt" and "idles" in w["message"] for w in warnings)


@pytest.mark.parametrize(
    "argv",
    [
        ["--stack", "p5-capacity-block", "--from", "tomorrow"],
        ["--stack", "no-such-stack"],
        ["--stack", "dev", "--max-loss", "5"],
    ],
)
def test_bad_input_exits_2(argv: list[str]) -> None:
    code, _, err = _run(*argv)
    assert code == 2
    assert "Traceback" not in err and len(err.splitlines()) <= 5


def test_learning_rate_phases_lie_on_the_training_bar_and_a_floor_is_warned() -> None:
    """The schedule the plan shows (estimates.schedule) in time: warm-up to step 100, decay to 800,
    200 steps at the floor: its schedule ends before the run."""
    base = training()
    run = RunInput(
        base.name, base.kind, base.group, base.nodes, base.phases, base.steps, base.checkpoints,
        lr_phases=(("warm-up", 0, 100), ("decay", 100, 800), ("at the floor", 800, 1000)),
        schedule_key="workloads.pre.schedule.decaySteps",
    )  # fmt: skip
    t = play([block(20)], [run], START)
    seg = {label: (a, b) for _, label, a, b in t.segments}
    # step k ends at k x 60 s plus a 60 s write per 100 steps before it
    assert seg["warm-up"] == (START, START + dt.timedelta(seconds=100 * 60 + 60))
    assert seg["at the floor"][0] == START + dt.timedelta(seconds=800 * 60 + 8 * 60)
    assert any(
        w.key == "workloads.pre.schedule.decaySteps" and "floor for its last 200 steps" in w.message for w in t.warnings
    )


def test_a_run_behind_one_that_never_ends_waits_without_a_bar() -> None:
    od = Capacity("p5", "on-demand", 2, 110.0)
    unknown = RunInput("a", "training", "p5", 2, (Phase("training", None, "no step time"),))
    behind = RunInput("b", "training", "p5", 2, (Phase("training", 3600),))
    t = play([od], [unknown, behind], START)
    assert {bar.run for bar in t.bars} == {"a"}
    assert any(w.key == "workloads.b" and "never end" in w.message for w in t.warnings)
