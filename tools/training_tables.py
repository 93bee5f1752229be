"""The support and Neuron version tables of docs/training.md, rendered from the code.

Each recipe's support row (config/workloads/, its DOCS.support) and facts/versions.py's TABLE.

    python -m tools.training_tables      (prints both; `make docs` writes them into the page)

tools/docs.py replaces each table, from its header row to the first line that is not a table row;
tests/repo/test_docs.py fails when the page is stale.
"""

from __future__ import annotations

import sys

from config.workloads import RECIPES
from facts import versions

SUPPORT_HEADER = (
    "| recipe | hardware | software | status | why |",
    "|---|---|---|---|---|",
)
VERSIONS_HEADER = (
    "| Neuron SDK | PyTorch | trains on | framework | runtime / driver | training container"
    " (`public.ecr.aws/neuron/...`) | note |",
    "|---|---|---|---|---|---|---|",
)


def render_support() -> str:
    """One row per recipe: its hardware, software versions and support status, with the reason."""
    rows = []
    for model in RECIPES.values():
        s = model.DOCS.support
        if s is not None:
            rows.append(f"| `{model.RECIPE}` | {s.hardware} | {s.software} | {s.status} | {s.why} |")
    return "\n".join([*SUPPORT_HEADER, *rows]) + "\n"


def render_versions() -> str:
    """One row per Neuron SDK release the project pins or meets."""
    rows = []
    for r in versions.TABLE:
        trains = ", ".join(r.trains_on) or "none"
        pair = f"{r.runtime or '-'} / {r.driver or '-'}"
        dlc = f"`{r.training_dlc}`" if r.training_dlc else ""
        framework = r.framework if r.trains_on else "-"
        rows.append(f"| {r.sdk} | {r.pytorch} | {trains} | {framework} | {pair} | {dlc} | {r.note} |")
    return "\n".join([*VERSIONS_HEADER, *rows]) + "\n"


def _replace(text: str, header: tuple[str, ...], rendered: str) -> str:
    lines = text.splitlines(keepends=True)
    heads = [i for i, line in enumerate(lines) if line.rstrip("\n") == header[0]]
    if not heads:
        raise ValueError(f"no table with the header {header[0]!r}")
    first = end = heads[0]
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join([*lines[:first], rendered, *lines[end:]])


def replaced(text: str) -> str:
    """`text` with its support table and its Neuron version table rendered anew."""
    return _replace(_replace(text, SUPPORT_HEADER, render_support()), VERSIONS_HEADER, render_versions())


if __name__ == "__main__":
    sys.stdout.write(render_support() + "\n" + render_versions())
