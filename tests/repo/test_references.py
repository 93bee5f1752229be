"""What the code, tests and docs cite exists: a path into the project names a file or folder
that is there, and no reason is given as a number of this project's issue tracker (a reader of
the code has no tracker; the fact the issue stood for is written out instead)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PROJECT_DIRS = (
    "config",
    "estimates",
    "infra",
    "facts",
    "tools",
    "workloads",
    "policy",
    "tests",
    "images",
    "schema",
    ".github",
    ".ci",
)
PATH = re.compile(rf"(?<![\w./:-])((?:{'|'.join(re.escape(d) for d in PROJECT_DIRS)})/[\w./-]*[\w])")
DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z_-]*\.md)\b")
"""A page named alone (`README.md`): at the root or beside the file that names it."""
ISSUE = re.compile(r"\bissue \d+\b", re.IGNORECASE)
SKIPPED_DIRS = {".git", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "golden", "docs-pending"}
"""Not the project's own text: tools' caches, rendered goldens, the hand-over notes for the lead."""
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ""}
NOT_PROJECT_FILES = {
    ("tests/repo/test_delivery.py", "tests/unit/test_x.py"),
    ("tests/repo/test_delivery.py", "images/README.md"),
    ("workloads/manifests/vllm_serve.py", "policy/v1"),
    ("workloads/manifests/lws.py", "policy/v1"),
}
"""Made-up changed files a test routes (they need not exist), and a Kubernetes API version that
reads like a path (PodDisruptionBudget's `policy/v1`)."""


def text_files() -> Iterator[Path]:
    """The project's files: tracked or new, never ignored (virtualenvs, caches), as git lists them."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    for name in sorted(listed):
        path = ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file() and not SKIPPED_DIRS & set(path.relative_to(ROOT).parts):
            yield path


def cited_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a file that speak for the project (in an upstream facts file, its comments:
    its `paths` are another repository's)."""
    upstream_facts = path.parent == ROOT / "tests" / "upstream" and path.suffix == ".yaml"
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not upstream_facts or line.lstrip().startswith("#"):
            yield n, line


def test_every_cited_project_path_exists() -> None:
    missing = []
    for path in text_files():
        rel = path.relative_to(ROOT).as_posix()
        if path == Path(__file__):
            continue
        for n, line in cited_lines(path):
            for m in PATH.finditer(line):
                ref = m.group(1).rstrip(".")
                if re.match(r"[^\s`'\"),;]*[<*{$]", line[m.end() :]):
                    continue  # a pattern (`chart-<name>-<version>.yaml`), not a path
                module = ROOT / f"{ref.split('.')[0]}.py"  # `infra/cluster.node_args`: a module's name
                if not (ROOT / ref).exists() and not module.is_file() and (rel, ref) not in NOT_PROJECT_FILES:
                    missing.append(f"{rel}:{n}: {ref}")
            missing += [
                f"{rel}:{n}: {page}"
                for page in DOC.findall(line)
                if not (ROOT / page).is_file() and not (path.parent / page).is_file()
            ]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_no_reason_is_an_issue_number() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in text_files()
        if path != Path(__file__)
        for n, line in cited_lines(path)
        if ISSUE.search(line)
    ]
    assert not cited, "write out the fact the issue stood for:\n" + "\n".join(cited)
