"""A stack over time, offline: capacity windows, run phases, cost and warnings (make timeline).

Each node group's capacity window and, on it, each run's phases and each server's start, with the
cost accrued and the warnings that name the key to change.

    python -m tools.timeline (--stack NAME | --config-file PATH) [--from TIME] [--out DIR]
                             [--format table|json] [--max-loss SHARE]

Reads the stack file and the estimates the plan shows (workloads.plans, estimates.*); asks no
AWS API. Text on stdout (or JSON with --format json); with --out, `timeline.svg` (a Gantt chart)
and `timeline.json` in DIR. Exit 0 (warnings included), 2 on invalid config or arguments.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import config
from config.stackfile import read_stack_file
from estimates.cost import Prices
from estimates.timeline import MAX_LOSS_SHARE, Timeline, hours, play
from tools.cli import add_stack_arguments, judged_clock, load_stack_config, stack_file, stack_name
from tools.offline import timeline_inputs, timeline_svg


def _when(text: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: not an ISO 8601 time (2027-01-05T08:00Z)") from e
    return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def _share(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text[:30]!r}: a share between 0 and 1 (0.05 is 5%)")
    return v


def as_json(t: Timeline) -> dict[str, Any]:
    """The timeline as data (times in ISO 8601 UTC)."""

    def iso(x: dt.datetime | None) -> str | None:
        return None if x is None else x.isoformat().replace("+00:00", "Z")

    return {
        "start": iso(t.start),
        "end": iso(t.end),
        "capacity": [
            {
                "nodeGroup": c.group,
                "kind": c.kind,
                "nodes": c.nodes,
                "hourly": round(c.hourly, 2),
                "opens": iso(c.opens),
                "closes": iso(c.closes),
                "ends": iso(c.ends),
                "prepaid": c.prepaid,
            }
            for c in t.capacities
        ],
        "phases": [
            {
                "run": b.run,
                "nodeGroup": b.group,
                "phase": b.phase,
                "start": iso(b.start),
                "end": iso(b.end),
                "estimated": b.estimated,
            }
            for b in t.bars
        ],
        "learningRate": [{"run": r, "phase": p, "start": iso(a), "end": iso(b)} for r, p, a, b in t.segments],
        "checkpoints": [{"run": r, "at": iso(w), "step": step} for r, w, step in t.checkpoints],
        "cost": [{"at": iso(w), "accrued": c} for w, c in t.cost],
        "warnings": [{"key": w.key, "message": w.message} for w in t.warnings],
        "notes": list(t.notes),
    }


def as_text(t: Timeline, stack: str) -> list[str]:
    """The terminal's view: per node group its window, then each run's phases; cost; warnings."""
    lines = [f"Timeline of stack '{stack}' from {t.start:%Y-%m-%d %H:%MZ} to {t.end:%Y-%m-%d %H:%MZ}"]
    for c in t.capacities:
        window = "from the start" if c.opens is None else f"from {c.opens:%Y-%m-%d %H:%MZ}"
        if c.closes is not None:
            window += f" to {c.closes:%Y-%m-%d %H:%MZ}"
            if c.ends is not None and c.ends != c.closes:
                window += f" (scale-down; the block ends {c.ends:%Y-%m-%d %H:%MZ})"
        lines += ["", f"{c.group}: {c.nodes} nodes, {c.kind}, ${c.hourly:,.2f}/h, {window}"]
        for run in dict.fromkeys(b.run for b in t.bars if b.group == c.group):
            for b in (b for b in t.bars if b.run == run):
                assert b.end is not None
                length = hours((b.end - b.start).total_seconds())
                mark = "" if b.estimated else " (length unknown)"
                if b.phase == "training" and (ck := [c for c in t.checkpoints if c[0] == run]):
                    mark += f"; {len(ck)} checkpoints, the last at step {ck[-1][2]:,} ({ck[-1][1]:%m-%d %H:%M})"
                lines.append(
                    f"    {run:<14} {b.phase:<14} {b.start:%m-%d %H:%M} -> {b.end:%m-%d %H:%M}  {length}{mark}"
                )
                if b.phase == "training" and (lr := [x for x in t.segments if x[0] == run]):
                    lines.append(
                        "    "
                        + " " * 15
                        + "learning rate: "
                        + ", ".join(f"{p} to {e:%m-%d %H:%M}" for _, p, _, e in lr)
                    )
    total = t.cost[-1][1] if t.cost else 0.0
    lines += ["", f"Cost: ${total:,.0f} accrued by {t.end:%Y-%m-%d %H:%MZ} (list prices, facts/prices.py)"]
    lines += [f"    note: {n}" for n in t.notes]
    lines += ["", "Warnings:" if t.warnings else "Warnings: none"] + [f"    {w}" for w in t.warnings]
    return lines


def play_stack(cfg: config.StackConfig, start: dt.datetime, max_loss: float = MAX_LOSS_SHARE) -> Timeline:
    """The timeline of a parsed stack (whole or aws layer) from `start`."""
    prices = Prices()
    return play(
        timeline_inputs.capacities(cfg, prices),
        timeline_inputs.runs(cfg),
        start,
        timeline_inputs.fixed_hourly(cfg, prices),
        max_loss,
    )


def svg_of(path: Path, start: str) -> str:
    """The SVG picture of the stack file at `path` from `start` (ISO 8601), as docs/ shows it."""
    with judged_clock(path):
        cfg = config.parse_stack_values(read_stack_file(path))
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return timeline_svg.render(play_stack(cfg, _when(start)), f"{name}: capacity and runs over time")


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    """The command line."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.timeline", description="A stack over time, offline.")
    add_stack_arguments(parser)
    parser.add_argument("--from", dest="start", type=_when, help="start time, ISO 8601 UTC (default: now)")
    parser.add_argument("--out", type=Path, help="write timeline.svg and timeline.json here")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--max-loss",
        type=_share,
        default=MAX_LOSS_SHARE,
        help=f"warn where a block's end loses more than this share of a run's steps ({MAX_LOSS_SHARE})",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    cfg = load_stack_config(args, stderr)
    if cfg is None:
        return 2
    if cfg.layer in ("cluster", "runs"):
        print(
            f"timeline: stack {stack_name(args)} is a {cfg.layer} layer; give the whole stack or its aws layer"
            " (the runs are laid out on the node groups the aws layer declares)",
            file=stderr,
        )
        return 2
    # an example is laid out from the clock its dates are written for (the example clock)
    with judged_clock(stack_file(args)):
        start = args.start or timeline_inputs.default_start()
    t = play_stack(cfg, start, args.max_loss)
    data = as_json(t)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "timeline.json").write_text(json.dumps(data, indent=2) + "\n")
        (args.out / "timeline.svg").write_text(
            timeline_svg.render(t, f"{stack_name(args)}: capacity and runs over time")
        )
    if args.format == "json":
        print(json.dumps(data, indent=2), file=stdout)
    else:
        print("\n".join(as_text(t, stack_name(args))), file=stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
