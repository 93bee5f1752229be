"""Facts read from upstream sources at the versions this project pins, one YAML file each.

Mocks are not evidence: a chart value, a Hydra key, an image path or an AWS rule that the
program relies on is held against a fact recorded here, and each file says where the fact
came from (repository, tag or commit, path; or the documentation page). A version bump
changes the source, and the tests then show exactly which facts to re-read.

Files hold facts extracted from the source (key sets, names, values), never a copy of it.
See README.md in this folder for the format and how to refresh a file.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


@cache
def load(name: str) -> dict[str, Any]:
    """The document `tests/upstream/<name>.yaml`: `{"source": {...}, "facts": {...}}`."""
    doc = yaml.safe_load((HERE / f"{name}.yaml").read_text())
    if not isinstance(doc, dict) or "source" not in doc or "facts" not in doc:
        raise ValueError(f"tests/upstream/{name}.yaml needs top-level 'source' and 'facts'")
    return doc


def facts(name: str) -> Any:
    """The `facts` of `tests/upstream/<name>.yaml`."""
    return load(name)["facts"]


def names() -> list[str]:
    """Every upstream fact file."""
    return sorted(p.stem for p in HERE.glob("*.yaml"))
