"""docs/contributing.md's checklists are enough alone: each names everything the registry it
describes makes a new item state. A recipe's facts (`RECIPE_FACTS` and each kind's `KIND_FACTS`,
config/workloads/base.py) and an add-on entry's fields (`Addon`, infra/addons/catalog.py) are read
from the code, so a fact or field added there without its line in the checklist fails here."""

from __future__ import annotations

import dataclasses
import re

from config.workloads import RECIPE_FACTS, AcceptanceRun, ServingRun, TrainingRun
from infra.addons.catalog import Addon
from tests.conftest import ROOT

TEXT = (ROOT / "docs" / "contributing.md").read_text()


def checklist(title: str) -> str:
    """The text of one checklist: from its bold title to the next bold title of a checklist."""
    start = TEXT.index(f"**{title}.**")
    end = TEXT.find("\n**", start + 1)
    return TEXT[start : end if end > 0 else None]


def named(text: str) -> set[str]:
    """Every name the text puts in backticks."""
    return {w for span in re.findall(r"`([^`]+)`", text) for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}


def test_the_recipe_checklist_names_every_fact_a_recipe_states() -> None:
    facts = set(RECIPE_FACTS).union(*(kind.KIND_FACTS for kind in (TrainingRun, ServingRun, AcceptanceRun)))
    missing = facts - named(checklist("Add a recipe"))
    assert not missing, f"docs/contributing.md, Add a recipe: name {sorted(missing)}"


def test_the_addon_checklist_names_every_field_of_an_entry() -> None:
    fields = {f.name for f in dataclasses.fields(Addon)}
    missing = fields - named(checklist("Add an add-on")) - {"name"}  # "its name" says it in prose
    assert not missing, f"docs/contributing.md, Add an add-on: name {sorted(missing)}"
