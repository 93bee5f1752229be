"""The recipe table of the docs, rendered from the recipe registry (config/workloads/).

    python -m tools.recipe_table [--write] [FILE]      (FILE: docs/training.md by default)

Each row is what the recipe states of itself (its DOCS, REPOSITORY and STEPS): what it follows
upstream, its image (a built image's folder derived from its repository), and what runs: its
steps in order (` -> `), then what runs beside them (`; `). Without `--write` the table is
printed; with it, the table in FILE (from its header row to the first line that is not a
table row) is replaced. The docs' copy is held to this by tests/repo/test_recipe_table.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from config.workloads import RECIPES, RunConfig
from tools.cli import ROOT

DEFAULT_PAGE = ROOT / "docs" / "training.md"
"""The page that holds the table."""
HEADER = (
    "| recipe | follows (upstream version) | image (built by the stack) | what runs, in order |",
    "|---|---|---|---|",
)


def row(model: type[RunConfig]) -> str:
    """The table row of one recipe."""
    docs = model.DOCS
    image = f"`images/{model.REPOSITORY}/` ({docs.image})" if model.REPOSITORY else docs.image
    chain = " -> ".join(docs.steps[step] for step in model.STEPS if step not in docs.beside)
    steps = "; ".join([chain, *(docs.steps[step] for step in model.STEPS if step in docs.beside)])
    return f"| `{model.RECIPE}` | {docs.follows} | {image} | {steps} |"


def render() -> str:
    """The whole table, one row per recipe in the registry's order."""
    return "\n".join([*HEADER, *(row(model) for model in RECIPES.values())]) + "\n"


def table_in(text: str) -> tuple[int, int]:
    """(first, end) line indexes of the recipe table in a markdown text; ValueError without one."""
    lines = text.splitlines()
    if HEADER[0] not in lines:
        raise ValueError(f"no recipe table (a line {HEADER[0]!r})")
    first = lines.index(HEADER[0])
    end = first
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return first, end


def replaced(text: str) -> str:
    """`text` with its recipe table rendered anew."""
    first, end = table_in(text)
    lines = text.splitlines(keepends=True)
    return "".join([*lines[:first], render(), *lines[end:]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.recipe_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_PAGE, help="the page of the table")
    parser.add_argument("--write", action="store_true", help="replace the table in FILE")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(render())
        return 0
    try:
        args.file.write_text(replaced(args.file.read_text()))
    except (OSError, ValueError) as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
