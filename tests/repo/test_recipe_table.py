"""The recipe table of the docs is what the recipe registry renders (tools/recipe_table.py):
a recipe added, renamed or changed without its row fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tools import recipe_table

DOC = ROOT / "docs" / "training.md"
"""The page that holds the recipe table."""


def test_the_docs_table_is_the_rendered_registry() -> None:
    text = DOC.read_text()
    first, end = recipe_table.table_in(text)
    committed = "".join(text.splitlines(keepends=True)[first:end])
    assert committed == recipe_table.render(), f"stale: python -m tools.recipe_table --write {DOC.relative_to(ROOT)}"


def test_write_replaces_only_the_table(tmp_path: Path) -> None:
    page = tmp_path / "training.md"
    stale = "\n".join([*recipe_table.HEADER, "| `gone` | x | y | z |"])
    page.write_text(f"# Training\n\nbefore\n\n{stale}\n\nafter\n")
    assert recipe_table.main(["--write", str(page)]) == 0
    assert page.read_text() == f"# Training\n\nbefore\n\n{recipe_table.render()}\nafter\n"


def test_a_page_without_the_table_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "training.md"
    page.write_text("# Training\n")
    assert recipe_table.main(["--write", str(page)]) == 2
    assert "no recipe table" in capsys.readouterr().err
    assert page.read_text() == "# Training\n"
