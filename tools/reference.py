"""The configuration reference of docs/configuration.md, generated from the config models.

    python -m tools.reference [--write]      (make docs)

Every key a stack file may set, spelled as in the file (`nodeGroups[].capacity.type`), with its
type and allowed values, its default, the layer whose stack holds it, and its meaning: all read
from `config/` (each field's annotation, constraints, default and description; a default the
program derives from other keys is said by the field's `x-default`). Training-run keys are a table
of their own with the recipes that take each. `--write` rewrites the block between the markers in
docs/configuration.md; without, the block is printed. tests/repo/test_readme.py fails when the
committed page differs.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from config import SECRET_KEYS
from config.layers import owner_of
from config.stack import StackConfig
from config.workloads import RECIPES
from tools.cli import ROOT

PAGE = ROOT / "docs" / "configuration.md"
START = "<!-- reference:start (generated from config/ by `make docs`; do not edit) -->"
END = "<!-- reference:end -->"
RUNS = "workloads.<name>."


@dataclass(frozen=True)
class Row:
    """One key of the reference."""

    key: str
    type: str
    default: str
    layer: str
    meaning: str
    recipes: tuple[str, ...] = ()


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without Optional/Annotated, whether None is allowed)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner, _ = _unwrap(args[0]) if len(args) == 1 else (annotation, False)
        return inner, len(args) < len(typing.get_args(annotation))
    return annotation, False


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The config models a field holds (directly, in a list or map, or as union members)."""
    inner, _ = _unwrap(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return [inner]
    origin = typing.get_origin(inner)
    if origin in (list, tuple, dict):
        args = typing.get_args(inner)
        return _models(args[-1]) if args else []
    if origin is typing.Union or isinstance(inner, types.UnionType):
        return [m for a in typing.get_args(inner) for m in _models(a)]
    return []


def _bounds(info: FieldInfo) -> str:
    lo = hi = None
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = m.ge
        elif isinstance(m, annotated_types.Gt):
            lo = f"more than {m.gt}"
        elif isinstance(m, annotated_types.Le):
            hi = m.le
        elif isinstance(m, annotated_types.Lt):
            hi = f"less than {m.lt}"
    if lo is not None and hi is not None:
        return f", {lo} to {hi}"
    if lo is not None:
        return f", at least {lo}" if not isinstance(lo, str) else f", {lo}"
    if hi is not None:
        return f", at most {hi}" if not isinstance(hi, str) else f", {hi}"
    return ""


def _extra(info: FieldInfo | None) -> dict[str, Any]:
    return info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}


def type_text(annotation: Any, info: FieldInfo | None = None) -> str:
    """How the reference names a field's type and allowed values (a field's `x-values` lists the
    values a validator allows, `x-type` names a type its annotation does not say)."""
    extra = _extra(info)
    if "x-values" in extra:
        return " \\| ".join(f"`{v}`" for v in extra["x-values"])
    if "x-type" in extra:
        return str(extra["x-type"])
    inner, _ = _unwrap(annotation)
    origin = typing.get_origin(inner)
    if origin is Literal:
        return " \\| ".join(f"`{v}`" for v in typing.get_args(inner))
    if inner is SecretStr:
        return "secret string"
    if inner is bool:
        return "bool"
    if inner is int:
        return "int" + (_bounds(info) if info else "")
    if inner is float:
        return "number" + (_bounds(info) if info else "")
    if inner is str:
        return "string"
    if origin in (list, tuple):
        return "list of " + type_text(typing.get_args(inner)[0]) if typing.get_args(inner) else "list"
    if origin is dict:
        return "map of " + type_text(typing.get_args(inner)[1])
    if (isinstance(inner, type) and issubclass(inner, BaseModel)) or _models(inner):
        return "map"
    return "value"


def default_text(info: FieldInfo) -> str:
    """The default as the reference states it: the Field default, the one source of a default.

    `x-default` (prose in json_schema_extra) only where the default is no plain value the
    model can hold: derived from another key or the instance type, or decided at deploy time.
    A model default of None there would read "none", which is wrong for those keys; where it
    would say the same as the default, tests/repo/test_readme.py refuses it as a copy."""
    extra = _extra(info)
    if "x-default" in extra:
        return str(extra["x-default"])
    if info.is_required():
        return "(required)"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (int, float, str)):
        return f"`{value}`" if value != "" else '`""`'
    if isinstance(value, (list, tuple)):
        return "`[]`" if not value else ", ".join(f"`{v}`" for v in value)
    if isinstance(value, dict):
        return "`{}`" if not value else ", ".join(f"`{k}`" for k in value)
    return "(see below)"


def _meaning(info: FieldInfo) -> str:
    return " ".join((info.description or "").split()).replace("|", "\\|")


def _walk(model: type[BaseModel], prefix: str, layer: str) -> Iterator[tuple[str, FieldInfo, str]]:
    for name, info in model.model_fields.items():
        if name in getattr(model, "UNUSED_KEYS", ()):
            continue  # a key of every run that this recipe does not take
        key = info.alias or name
        path = "aws:region" if (not prefix and key == "region") else prefix + key
        here = layer if prefix else (owner_of(key) or "every")
        inner, _ = _unwrap(info.annotation)
        sub = _models(info.annotation)
        if not sub:
            yield path, info, here
            continue
        origin = typing.get_origin(inner)
        container = f"{path}[]" if origin in (list, tuple) else f"{path}.<name>" if origin is dict else path
        if container != path:
            yield container, info, here  # a list or map of sections: its own row; a plain section has none
        for m in sub:
            for sub_path, sub_info, sub_layer in _walk(m, container + ".", here):
                if not prefix and key == "addons":
                    sub_layer = owner_of(key, sub_path[len("addons.") :].split(".")[0]) or here
                yield sub_path, sub_info, sub_layer


def fields() -> Iterator[tuple[str, FieldInfo]]:
    """Every key of a stack file with the model field behind it (each recipe's own)."""
    for path, info, _ in _walk(StackConfig, "", ""):
        yield path, info
    for model in RECIPES.values():
        for path, info, _ in _walk(model, RUNS, "runs"):
            yield path, info


def rows() -> list[Row]:
    """Every key of a stack file, training-run keys merged across the recipes that take them."""
    out: dict[str, Row] = {}
    recipes_of: dict[str, list[str]] = {}
    for path, info, layer in _walk(StackConfig, "", ""):
        if path.startswith(RUNS):
            continue
        secret = path in SECRET_KEYS
        out[path] = Row(path, "secret string" if secret else type_text(info.annotation, info), default_text(info),
                        layer, _meaning(info))  # fmt: skip
    recipes_type = " \\| ".join(f"`{r}`" for r in RECIPES)
    out[f"{RUNS}recipe"] = Row(f"{RUNS}recipe", recipes_type, "(required)", "runs",
                               "The recipe; it decides which other keys the run takes (below).")  # fmt: skip
    for recipe, model in RECIPES.items():
        for path, info, _ in _walk(model, RUNS, "runs"):
            if path == f"{RUNS}recipe":
                recipes_of.setdefault(path, []).append(recipe)
                continue
            row = Row(path, type_text(info.annotation, info), default_text(info), "runs", _meaning(info))
            recipes_of.setdefault(path, []).append(recipe)
            seen = out.get(path)
            if seen is None:
                out[path] = row
            elif (seen.type, seen.default, seen.meaning) != (row.type, row.default, row.meaning):
                out[f"{path}@{recipe}"] = row
    final: list[Row] = []
    for key, row in out.items():
        base = key.split("@")[0]
        if base.startswith(RUNS):
            recipes = recipes_of[base] if "@" not in key else [key.split("@")[1]]
            if "@" not in key:
                recipes = [r for r in recipes if f"{base}@{r}" not in out]
            final.append(Row(base, row.type, row.default, row.layer, row.meaning, tuple(recipes)))
        else:
            final.append(row)
    return final


def render() -> str:
    """The markdown between the markers: the platform's keys, then the training runs' keys."""
    platform = [r for r in rows() if not r.key.startswith(RUNS)]
    runs = [r for r in rows() if r.key.startswith(RUNS)]
    lines = ["| key | type | default | layer | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{r.key}` | {r.type} | {r.default} | {r.layer} | {r.meaning} |" for r in platform]
    lines += ["", "Training runs (`workloads.<name>`), by the recipes that take each key:", ""]
    lines += ["| key | recipes | type | default | meaning |", "|---|---|---|---|---|"]
    every = len(RECIPES)
    for r in runs:
        recipes = "every" if len(r.recipes) == every else ", ".join(f"`{x}`" for x in r.recipes)
        lines.append(f"| `{r.key}` | {recipes} | {r.type} | {r.default} | {r.meaning} |")
    return "\n".join(lines) + "\n"


def update(text: str, block: str) -> str:
    """The page with its generated block replaced."""
    if START not in text or END not in text:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no block between {START!r} and {END!r}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}{END}{tail}"


def committed(text: str) -> str | None:
    """The generated block as committed (None without markers)."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].lstrip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reference", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the reference in {PAGE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    block = render()
    if args.write:
        PAGE.write_text(update(PAGE.read_text(), block))
        print(f"wrote {PAGE.relative_to(ROOT)}", file=sys.stderr)
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
