"""The code's shape: data flows one way between the layers, no import circle, no import hidden
in a function to dodge one, files and functions small enough to read.

Size is a prompt to look, not a place to cut: a module over 400 lines says in one comment line
why it is one file (`# size: <why>`) and is listed as a warning; only past 450 lines, or over 400
without a reason, does the test fail. Code is split where the design has a seam, never just to
get under a number. A function stays within 60 lines.

Layers, lowest first: facts -> estimates -> config -> infra -> workloads -> stack -> tools. The
estimates read facts only and take typed inputs that config builds; the policy pack reads facts only
and the tools run it; __main__ is the entry point above all. A module may
import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from tests.conftest import ROOT

LAYERS = ("facts", "estimates", "config", "infra", "workloads", "stack", "tools")
PACKAGES = (*LAYERS, "policy")
ALLOWED = {
    **{layer: set(LAYERS[: i + 1]) for i, layer in enumerate(LAYERS)},
    "tools": {*LAYERS, "policy"},
    "policy": {"facts", "policy"},
    "__main__": {*LAYERS},
}
WARN_FILE_LINES = 400
"""Past this a module carries a `# size:` line saying why it is one file, and the test warns."""
MAX_FILE_LINES = 450
"""Past this a module fails, reason or not: split it at a seam of the design."""
MAX_FUNCTION_LINES = 60
SIZE_REASON = re.compile(r"^# size: \S.*$", re.MULTILINE)


def project_files() -> dict[str, Path]:
    """Module name -> path of every project module (tests excluded)."""
    files = {"__main__": ROOT / "__main__.py", "stack": ROOT / "stack.py"}
    for package in ("facts", "estimates", "config", "infra", "workloads", "tools", "policy"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


FILES = project_files()


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function body) of every import in a file."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.extend((f"{child.module}.{a.name}", child.lineno, in_function) for a in child.names)
                found.append((child.module, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return [(name, line, inner) for name, line, inner in found if name.split(".")[0] in PACKAGES]


def resolve(name: str) -> str | None:
    """The project module an imported name refers to (a module, or the module holding a name)."""
    while name and name not in FILES:
        name = name.rpartition(".")[0]
    return name or None


def graph() -> dict[str, set[str]]:
    return {
        module: {target for name, _, _ in imports_of(path) if (target := resolve(name)) and target != module}
        for module, path in FILES.items()
    }


def test_the_walker_finds_the_layers() -> None:
    assert {"config", "config.stack", "infra.cluster", "workloads.manifests.mpijob", "tools.plan", "stack"} <= set(
        FILES
    )
    assert "facts.instances" in graph()["config.nodegroups"]
    assert "estimates.checkpoints" in graph()["config.storage"]


def test_data_flows_one_way() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[module.split(".")[0]]
    ]
    assert not wrong, (
        "imports against the flow facts -> estimates -> config -> infra -> workloads -> stack -> tools:\n"
        + "\n".join(wrong)
    )


def test_no_import_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_project_import_hides_in_a_function() -> None:
    hidden = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in FILES.values()
        for name, line, inner in imports_of(path)
        if inner
    ]
    assert not hidden


def size_problem(path: Path, text: str) -> str | None:
    """Why a module's length fails the test (None when it passes; a warning may still be due)."""
    lines = text.count("\n")
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if lines > MAX_FILE_LINES:
        return f"{name} has {lines} lines, over {MAX_FILE_LINES}: split it where the design has a seam"
    if lines > WARN_FILE_LINES and not SIZE_REASON.search(text):
        return f"{name} has {lines} lines, over {WARN_FILE_LINES}, and no `# size: <why it is one file>` line"
    return None


def test_the_size_rule_reads_a_reason_and_fails_past_the_cap(tmp_path: Path) -> None:
    short, reasoned = "x = 1\n" * WARN_FILE_LINES, "# size: one table\n" + "x = 1\n" * WARN_FILE_LINES
    assert size_problem(tmp_path / "a.py", short) is None
    assert size_problem(tmp_path / "a.py", reasoned) is None
    assert "no `# size:" in str(size_problem(tmp_path / "a.py", short + "x = 1\n"))
    assert "over 450" in str(size_problem(tmp_path / "a.py", reasoned + "x = 1\n" * 50))
    assert size_problem(tmp_path / "a.py", "# size:\n" + short) is not None, "an empty reason is none"


@pytest.mark.parametrize("module", sorted(FILES))
def test_files_and_functions_stay_small(module: str) -> None:
    path = FILES[module]
    text = path.read_text()
    problem = size_problem(path, text)
    assert problem is None, problem
    if text.count("\n") > WARN_FILE_LINES:
        reason = SIZE_REASON.search(text)
        warnings.warn(
            f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines; {reason and reason.group(0)}", stacklevel=1
        )
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.relative_to(ROOT)}: {', '.join(long)}"
