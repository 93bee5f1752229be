"""Hand-written prose that points at something checks that it is there: a section cited by its
heading (`docs/training.md, "Build the images"`, the convention of comments, Dockerfiles and
workflows) is a heading of that page; an anchor cited outside a Markdown link
(`docs/deploy.md#example-stacks` in a comment) exists; a `make X` shown as a command is a target
of the Makefile; a `python -m tools.X` named anywhere is a command of tools/; every example
stack has its row in docs/deploy.md's table. Markdown links themselves are
tests/repo/test_docs.py's."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import EXAMPLE_STACKS, ROOT
from tests.repo.test_docs import anchors
from tests.repo.test_references import text_files

SECTION = re.compile(
    r"(?<![\w/.-])(?P<page>(?:[\w.-]+/)*[\w.-]+\.md|README)(?:,| see|,? see)?\s+\"(?P<heading>[^\"]+)\""
)
"""`<page> "Heading"` or `<page>, "Heading"`: a section named by its heading (a prefix of it)."""
CONTINUATION = re.compile(r"\n[ \t]*(?:#|//|\*)?[ \t]*")
"""A line break inside a comment (and its `#`): a cited heading may wrap onto the next line."""
ANCHOR = re.compile(r"(?<![\w/.(-])(?P<page>(?:[\w.-]+/)*[\w.-]+\.md)#(?P<anchor>[\w-]+)")
"""`page.md#anchor` outside a Markdown link (a link's target follows `(`, and test_docs.py reads it)."""
CODE = re.compile(r"```(?:sh|bash|console)?\n(.*?)```|`([^`\n]+)`", re.DOTALL)
MAKE = re.compile(r"(?:^|[\s;&|(])make\s+(?:-\S+\s+)*([a-z][\w-]*)(?![\w=])", re.MULTILINE)
WAITING = {
    f'images/{name}/Dockerfile: README "Build the images": no such heading in README.md'
    for name in ("bert-neuronx", "nemo", "neuronx-nemo-megatron")
}
"""Stale, and left until the image next changes for a reason of its own: a Dockerfile's comments
are part of its content tag (facts/images.py, `content_tag`), so fixing one rebuilds the image and
changes every manifest that runs it. The section is docs/training.md, "Build the images"."""
PROSE = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "launch" / "README.md")


def page_of(cited: str, source: Path) -> Path | None:
    """The project page a citation names: `README` is the root's; a bare name may sit beside the
    citing file; None for a page of another project (an upstream's docs)."""
    name = "README.md" if cited == "README" else cited
    for candidate in (ROOT / name, source.parent / name):
        if candidate.is_file():
            return candidate
    return None


def shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def headings(page: Path) -> list[str]:
    """A page's headings as plain lowercase text (code marks dropped), code blocks skipped."""
    out, in_code = [], False
    for line in page.read_text().splitlines():
        in_code ^= line.startswith("```")
        if not in_code and (m := re.match(r"^#{1,6} (.+)$", line)):
            out.append(m.group(1).replace("`", "").strip().lower())
    return out


def missing_sections(source: Path, text: str) -> list[str]:
    """`<page> "Heading"` citations in a text whose page has no heading starting so."""
    out = []
    for m in SECTION.finditer(CONTINUATION.sub(" ", text)):
        page = page_of(m.group("page"), source)
        heading = " ".join(m.group("heading").replace("`", "").split()).lower()
        if page is not None and not any(h.startswith(heading) for h in headings(page)):
            out.append(f'{m.group("page")} "{m.group("heading")}": no such heading in {shown(page)}')
    return out


def missing_anchors(source: Path, text: str) -> list[str]:
    """`page.md#anchor` citations (outside links) whose page has no such anchor."""
    out = []
    for m in ANCHOR.finditer(text):
        page = page_of(m.group("page"), source)
        if page is not None and m.group("anchor") not in anchors(page):
            out.append(f"{m.group(0)}: no such anchor in {shown(page)}")
    return out


def make_targets() -> set[str]:
    """The Makefile's targets (rules at the start of a line; variables and pattern rules aside)."""
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", text, re.MULTILINE))


def commands_named(text: str) -> list[str]:
    """The `make X` commands shown as code in a Markdown page (a code span or a shell block)."""
    found = []
    for block, span in CODE.findall(text):
        found += MAKE.findall(block or span)
    return found


def test_the_finders_see_what_they_should(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n## Build the `images`\n```sh\n# not a heading\n```\n")
    source = tmp_path / "x.py"
    assert missing_sections(source, '# see page.md, "Build the\n# images" for it') == []
    assert missing_sections(source, '# page.md "Not a heading"') == [
        'page.md "Not a heading": no such heading in page.md'
    ]
    assert missing_sections(ROOT / "x.py", 'README "No such section here"') == [
        'README "No such section here": no such heading in README.md'
    ]
    assert missing_sections(ROOT / "x.py", 'upstream/concepts.md, "Anything"') == [], "another project's page"
    assert missing_anchors(ROOT / "x.py", "docs/deploy.md#no-such-anchor") == [
        "docs/deploy.md#no-such-anchor: no such anchor in docs/deploy.md"
    ]
    assert commands_named("Run `make plan STACK=dev`, or:\n```sh\nmake -s test-fast && make nope\n```\nto make it") == [
        "plan",
        "test-fast",
        "nope",
    ]
    assert {"plan", "test-fast", "docs", "venv"} <= make_targets()


def test_every_cited_section_and_anchor_exists() -> None:
    wrong = []
    for path in text_files():
        if path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        rel = path.relative_to(ROOT)
        wrong += [f"{rel}: {problem}" for problem in missing_sections(path, text) + missing_anchors(path, text)]
    assert set(wrong) >= WAITING, f"fixed, so take them out of WAITING: {sorted(WAITING - set(wrong))}"
    wrong = [w for w in wrong if w not in WAITING]
    assert not wrong, "cited sections that do not exist (a heading renamed, or moved to another page):\n" + "\n".join(
        wrong
    )


def test_every_make_command_in_the_docs_is_a_target() -> None:
    targets = make_targets()
    wrong = [
        f"{page.relative_to(ROOT)}: make {name}"
        for page in PROSE
        for name in commands_named(page.read_text())
        if name not in targets
    ]
    assert not wrong, "make commands the Makefile has no target for:\n" + "\n".join(wrong)


def examples_listed(section: str) -> set[str]:
    """The example stacks a table names: `examples/Pulumi.<name>.yaml`, the project's own
    `Pulumi.dev.yaml` at the root, and a layered trio's shorthand (`examples/Pulumi.x-aws.yaml`,
    `-cluster.yaml`, `-runs.yaml`)."""
    names = set(re.findall(r"(?:examples/|`)Pulumi\.([\w-]+)\.yaml", section))
    for base, rest in re.findall(r"examples/Pulumi\.([\w-]+)-aws\.yaml`((?:, `-\w+\.yaml`)+)", section):
        names |= {f"{base}-{layer}" for layer in re.findall(r"`-(\w+)\.yaml`", rest)}
    return names


def test_the_example_stacks_table_names_every_example_stack() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("\n## Example stacks\n", 1)[1].split("\n## ", 1)[0]
    assert examples_listed("`examples/Pulumi.a-aws.yaml`, `-cluster.yaml`, `-runs.yaml` | x") == {
        "a-aws",
        "a-cluster",
        "a-runs",
    }
    missing = sorted(set(EXAMPLE_STACKS) - examples_listed(section))
    assert not missing, f'docs/deploy.md, "Example stacks" lacks a row for {missing}'


COMMAND = re.compile(r"python -m (tools(?:\.\w+)+)")


def is_command(module: str) -> bool:
    """Whether `python -m <module>` runs something: a project module with a `__main__` guard."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return path.is_file() and 'if __name__ == "__main__":' in path.read_text()


def test_every_tools_command_named_anywhere_runs() -> None:
    assert is_command("tools.plan") and not is_command("tools.offline.plan_view") and not is_command("tools.nope")
    wrong = sorted(
        {
            f"{path.relative_to(ROOT)}: python -m {module}"
            for path in text_files()
            if path != Path(__file__)
            for module in COMMAND.findall(path.read_text(errors="replace"))
            if not is_command(module)
        }
    )
    assert not wrong, "commands that are not a module of tools/ with a __main__:\n" + "\n".join(wrong)
