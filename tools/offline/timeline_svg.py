"""The timeline as a picture: an SVG Gantt chart with a row per run (grouped under its node group),
a bar per phase, each group's capacity window shaded (a Capacity Block's scale-down marked), and
the accrued cost as a line under the rows. Plain SVG 1.1, no script, no external reference."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from html import escape

from estimates.timeline import Capacity, Timeline

WIDTH, LEFT, RIGHT, ROW, TOP, COST_H = 1100, 170, 30, 22, 40, 90
COLOURS = {
    "compile": "#9c6ade",
    "import": "#b5838d",
    "acceptance": "#2a9d8f",
    "training": "#264653",
    "replica start": "#e9c46a",
    "serving": "#f4a261",
    "export": "#6d597a",
}
OTHER = "#8d99ae"
LR_COLOURS = {"warm-up": "#f4d35e", "decay": "#83c5be", "constant": "#83c5be", "at the floor": "#9b2226"}
"""The learning-rate phases: a strip along the top of a training bar."""
MAX_WARNINGS = 6
"""Warnings written under the picture (all of them are in the text and JSON)."""


def render(t: Timeline, title: str) -> str:
    """The SVG document of timeline `t`."""
    span = max((t.end - t.start).total_seconds(), 1.0)
    plot = WIDTH - LEFT - RIGHT

    def x(when: dt.datetime) -> float:
        return LEFT + plot * min(max((when - t.start).total_seconds() / span, 0.0), 1.0)

    rows: list[tuple[str, str | None]] = []  # (group, run) in drawing order; run None: the group's header row
    for cap in t.capacities:
        rows.append((cap.group, None))
        rows += [(cap.group, r) for r in dict.fromkeys(b.run for b in t.bars if b.group == cap.group)]
    warnings = [str(w) for w in t.warnings][:MAX_WARNINGS]
    height = TOP + ROW * len(rows) + COST_H + 86 + 16 * len(warnings)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for i, (group, run) in enumerate(rows):
        y = TOP + i * ROW
        if run is None:
            n_rows = sum(1 for g, _ in rows if g == group)
            out += _window(next(c for c in t.capacities if c.group == group), t, x, y, n_rows)
        else:
            out += _run_row(t, run, group, x, y)
    base = TOP + ROW * len(rows) + 20
    out += _cost_line(t, x, base)
    out += _axis(t, x, TOP, base + COST_H)
    out += _legend(base + COST_H + 32)
    for i, line in enumerate(warnings):
        text = line if len(line) <= 160 else line[:157] + "..."
        out.append(f'<text x="6" y="{base + COST_H + 72 + 16 * i}" fill="#9b2226">warning: {escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _window(cap: Capacity, t: Timeline, x: Callable[[dt.datetime], float], y: int, n_rows: int) -> list[str]:
    """A node group's header row and its capacity window shaded over its runs' rows."""
    opens, closes = x(cap.opens or t.start), x(cap.closes or t.end)
    out = [
        f'<rect x="{opens:.1f}" y="{y}" width="{max(closes - opens, 0):.1f}" height="{ROW * n_rows}"'
        f' fill="#e9f5ec" stroke="#7fb98b"><title>{escape(cap.group)}: {escape(cap.kind)}, {cap.nodes} nodes,'
        f" ${cap.hourly:,.2f}/h</title></rect>"
    ]
    if cap.ends is not None and cap.closes is not None and cap.ends != cap.closes:
        out.append(
            f'<rect x="{closes:.1f}" y="{y}" width="{max(x(cap.ends) - closes, 0):.1f}" height="{ROW * n_rows}"'
            f' fill="#f6d5d5"><title>scale-down to the block\'s end</title></rect>'
        )
    out.append(f'<text x="6" y="{y + 15}" font-weight="bold">{escape(cap.group)} ({escape(cap.kind)})</text>')
    return out


def _run_row(t: Timeline, run: str, group: str, x: Callable[[dt.datetime], float], y: int) -> list[str]:
    """A run's row: a bar per phase (dashed where its length is unknown), a tick per checkpoint."""
    out = [f'<text x="18" y="{y + 15}">{escape(run)}</text>']
    for b in (b for b in t.bars if b.group == group and b.run == run and b.end is not None):
        assert b.end is not None
        x0, x1 = x(b.start), x(b.end)
        dash = "" if b.estimated else ' stroke-dasharray="4 2" fill-opacity="0.4"'
        out.append(
            f'<rect x="{x0:.1f}" y="{y + 4}" width="{max(x1 - x0, 1.5):.1f}" height="{ROW - 8}"'
            f' fill="{COLOURS.get(b.phase, OTHER)}" stroke="#222" stroke-width="0.3"{dash}>'
            f"<title>{escape(run)}: {escape(b.phase)} {b.start:%Y-%m-%d %H:%M}"
            f" to {b.end:%Y-%m-%d %H:%M}</title></rect>"
        )
    for _, label, first, last in (seg for seg in t.segments if seg[0] == run):
        out.append(
            f'<rect x="{x(first):.1f}" y="{y + 4}" width="{max(x(last) - x(first), 1.0):.1f}" height="4"'
            f' fill="{LR_COLOURS.get(label, OTHER)}"><title>{escape(run)}: learning rate {escape(label)}'
            f" {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M}</title></rect>"
        )
    for name, when, step in (c for c in t.checkpoints if c[0] == run):
        px = x(when)
        out.append(
            f'<line x1="{px:.1f}" y1="{y + 2}" x2="{px:.1f}" y2="{y + ROW - 2}"'
            f' stroke="#e76f51" stroke-width="1.2">'
            f"<title>{escape(name)}: checkpoint at step {step:,}, {when:%Y-%m-%d %H:%M}</title></line>"
        )
    return out


def _cost_line(t: Timeline, x: Callable[[dt.datetime], float], base: int) -> list[str]:
    top = max((c for _, c in t.cost), default=0.0) or 1.0
    pts = " ".join(f"{x(when):.1f},{base + COST_H - COST_H * c / top:.1f}" for when, c in t.cost)
    return [
        f'<rect x="{LEFT}" y="{base}" width="{WIDTH - LEFT - RIGHT}" height="{COST_H}" fill="none" stroke="#ccc"/>',
        f'<polyline points="{pts}" fill="none" stroke="#c0392b" stroke-width="2"/>',
        f'<text x="6" y="{base + 15}">cost accrued</text>',
        f'<text x="6" y="{base + 30}">${top:,.0f} at the end</text>',
    ]


def _axis(t: Timeline, x: Callable[[dt.datetime], float], top: int, bottom: int) -> list[str]:
    """Ticks at whole hours or days, at most about ten."""
    span_h = (t.end - t.start).total_seconds() / 3600
    step = next(h for h in (1, 2, 3, 6, 12, 24, 48, 96, 168, 336, 720, 10**6) if span_h / h <= 10)
    tick = t.start.replace(minute=0) + dt.timedelta(hours=1)
    if step >= 24:
        tick = t.start.replace(hour=0, minute=0) + dt.timedelta(days=1)
    out = []
    while tick < t.end:
        px = x(tick)
        label = f"{tick:%m-%d}" if step >= 24 else f"{tick:%m-%d %H:%M}"
        out.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{px:.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">{label}</text>')
        tick += dt.timedelta(hours=step)
    return out


def _legend(y: int) -> list[str]:
    out, px = [], LEFT
    for name, colour in COLOURS.items():
        out.append(f'<rect x="{px}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{px + 14}" y="{y}">{escape(name)}</text>')
        px += 30 + 7 * len(name)
    px, y = LEFT, y + 16
    for label, style in (
        ("capacity window", 'fill="#e9f5ec" stroke="#7fb98b"'),
        ("scale-down to the block's end", 'fill="#f6d5d5"'),
        ("length unknown", f'fill="{COLOURS["training"]}" fill-opacity="0.4" stroke="#222" stroke-dasharray="4 2"'),
    ):
        out.append(f'<rect x="{px}" y="{y - 9}" width="10" height="10" {style}/>')
        out.append(f'<text x="{px + 14}" y="{y}">{escape(label)}</text>')
        px += 30 + 6 * len(label)
    out.append(f'<line x1="{px}" y1="{y - 9}" x2="{px}" y2="{y + 1}" stroke="#e76f51" stroke-width="1.2"/>')
    out.append(f'<text x="{px + 6}" y="{y}">checkpoint</text>')
    return out
