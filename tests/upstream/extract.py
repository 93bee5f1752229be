"""Extract facts from an upstream file into the shape tests/upstream/*.yaml keeps.

Used to write and refresh the fact files; the tests never run it on upstream text (they only
read the recorded facts). Example, from a bare mirror made by the `fetch` tool:

    git -C <mirror> show <commit>:<path to conf>.yaml | python -m tests.upstream.extract hydra
    git -C <mirror> show <commit>:nemo/utils/exp_manager.py | python -m tests.upstream.extract fields ExpManagerConfig
    git -C <mirror> show <commit>:<script>.py | python -m tests.upstream.extract argparse

`hydra`: every leaf key of a Hydra config as a dotted path, which of them are mandatory
(`???`) and which are null. A leaf is a scalar, a list or an empty mapping. `fields`: the field names of a
dataclass (a structured-config schema such as NeMo's ExpManagerConfig). `argparse`: the
long options a script's argparse parser accepts. `cli-fields`: the fields of a dataclass tyro makes
command-line options of (not `tyro.conf.Suppress`), e.g. `cli-fields Trainer.Config`.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

import yaml

MANDATORY = "???"


def hydra_keys(text: str) -> dict[str, list[str]]:
    """`{"keys": [...], "mandatory": [...], "null": [...]}` of a Hydra YAML config.

    Values are not kept, only whether a leaf is `???` or null: Hydra lets `+key=value` add
    to a null leaf but refuses it on a leaf that has a value.
    """
    doc = yaml.safe_load(text)
    keys: list[str] = []
    mandatory: list[str] = []
    null: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
            return
        keys.append(prefix)
        if node == MANDATORY:
            mandatory.append(prefix)
        elif node is None:
            null.append(prefix)

    walk(doc, "")
    return {"keys": sorted(keys), "mandatory": sorted(mandatory), "null": sorted(null)}


def _class(tree: ast.Module, path: str) -> ast.ClassDef:
    """The class at a dotted path (`Trainer.Config`: the class Config defined in class Trainer)."""
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | None = None
    for name in path.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if found is None:
            raise KeyError(path)
        body = found.body
    assert found is not None
    return found


def dataclass_fields(text: str, class_name: str) -> list[str]:
    """The annotated fields of one class in a Python module (`Outer.Inner` for a nested class;
    a plain name is looked for anywhere in the module)."""
    tree = ast.parse(text)
    if "." in class_name:
        node = _class(tree, class_name)
    else:
        node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
        if node is None:
            raise KeyError(class_name)
    return [
        stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    ]


def cli_fields(text: str, class_name: str) -> list[str]:
    """The fields of a dataclass that tyro turns into command-line options: every annotated
    field but those annotated `tyro.conf.Suppress` (a config tree taken off the command line)."""
    tree = ast.parse(text)
    node = (
        _class(tree, class_name)
        if "." in class_name
        else next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    )
    return [
        stmt.target.id
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and "Suppress" not in ast.unparse(stmt.annotation)
    ]


def argparse_options(text: str) -> list[str]:
    """Every `--long-option` passed to an `add_argument` call."""
    tree = ast.parse(text)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    found.add(arg.value)
    return sorted(found)


def main(argv: list[str]) -> int:
    text = sys.stdin.read()
    kind = argv[0] if argv else ""
    if kind == "hydra":
        out: Any = hydra_keys(text)
    elif kind == "fields" and len(argv) == 2:
        out = dataclass_fields(text, argv[1])
    elif kind == "cli-fields" and len(argv) == 2:
        out = cli_fields(text, argv[1])
    elif kind == "argparse":
        out = argparse_options(text)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
