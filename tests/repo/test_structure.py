"""The code's shape: data flows one way between the layers, no import circle, no import hidden
in a function to dodge one, files and functions small enough to read.

Layers, lowest first: facts -> estimates -> config -> infra -> workloads -> stack -> tools. The
estimates read facts only and take typed inputs that config builds; the policy pack reads facts only
and the tools run it; __main__ is the entry point above all. A module may
import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

import ast
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
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


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


@pytest.mark.parametrize("module", sorted(FILES))
def test_files_and_functions_stay_small(module: str) -> None:
    path = FILES[module]
    text = path.read_text()
    assert text.count("\n") <= MAX_FILE_LINES, f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.relative_to(ROOT)}: {', '.join(long)}"
