"""The README is a newcomer's path and docs/ the reference: short, linked, each page starting
with something to run, and every link pointing at a page and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tools import docs

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
README_MAX_LINES = 300
"""The README is a tutorial path a newcomer finishes (at most about 300 lines); reference goes to docs/."""
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation but hyphens dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for a page's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"^#{1,6} (.+)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_slug_is_githubs() -> None:
    assert slug("Sharing the cluster: Kueue") == "sharing-the-cluster-kueue"
    assert slug("The first hour: `dev`") == "the-first-hour-dev"
    assert slug("Namespaces and `/shared`") == "namespaces-and-shared"


def test_the_readme_is_a_newcomers_path() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_points_at_a_page_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading with anchor #{anchor}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_docs_page_opens_with_a_runnable_example(page: Path) -> None:
    text = page.read_text()
    first_section = text.find("\n## ")
    head = text if first_section < 0 else text[:first_section]
    assert text.startswith("# "), f"{page.name}: starts with its title"
    assert re.search(r"```(sh|yaml)\n", head), f"{page.name}: needs a sh or yaml example before its first section"


def test_the_readme_indexes_every_docs_page() -> None:
    text = README.read_text()
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(text) if t.startswith("docs/")}
    missing = sorted(p.name for p in PAGES if p.name not in linked)
    assert not missing, f"README.md's documentation index lacks {missing}"


def test_the_generated_parts_of_the_docs_are_current() -> None:
    """The configuration reference, the recipe table and what each example stack needs are
    generated from the code (`make docs`): a page that differs is stale."""
    assert docs.stale() == [], "run `make docs` and commit docs/"
