"""Pydantic validation errors -> one `key.path: message` line per problem, as the stack file spells it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from config.base import KeyProblem, did_you_mean

# Error kinds whose message is clearer with the value that was given.
_SHOW_INPUT = (
    "int_parsing",
    "int_type",
    "bool_parsing",
    "bool_type",
    "float_type",
    "string_type",
    "list_type",
    "dict_type",
    "model_type",
    "model_attributes_type",
    "int_from_float",
    "finite_number",
    "datetime_type",
    "datetime_parsing",
    "datetime_from_date_parsing",
)
VALUE_CHARS = 60
"""Longest excerpt of a given value a message quotes."""


def shown(value: Any) -> str:
    """`repr` of a value, cut to VALUE_CHARS characters (a message stays one short line)."""
    text = repr(value) if not isinstance(value, (dict, list)) else _shape(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def _shape(value: dict[Any, Any] | list[Any]) -> str:
    # Never repr a whole structure (it may be huge): say what it is.
    return f"a map of {len(value)} keys" if isinstance(value, dict) else f"a list of {len(value)} items"


def _type_hint(kind: str, value: Any) -> str:
    """What to write instead, for the YAML mistakes strict types catch."""
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return '; YAML read it as a number (1.30 becomes 1.3): put the value in quotes as you mean it, e.g. "1.30"'
    if kind in ("string_type",) and isinstance(value, bool):
        return "; YAML read it as true/false: put the value in quotes"
    if kind in ("int_type", "float_type") and isinstance(value, bool):
        return "; true/false is not a number"
    if kind in ("int_type", "float_type", "bool_type") and isinstance(value, str):
        return "; write it without quotes"
    if kind == "int_type" and isinstance(value, float):
        return "; a whole number is needed"
    return ""


def _fields_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """camelCase key -> nested model class (or None) for a model's fields."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        ann = info.annotation
        nested = None
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                nested = cand
        out[key] = nested
    return out


def _is_map_field(model: type[BaseModel], key: str) -> bool:
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return getattr(info.annotation, "__origin__", None) is dict
    return False


def _model_at(path: tuple[Any, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = root
    skip_key = False
    for part in path:
        if model is None:
            return None
        if isinstance(part, int) or skip_key:
            # A list index, or the user's key of a map of models (registry.repositories.<key>).
            skip_key = False
            continue
        skip_key = _is_map_field(model, part)
        model = _fields_of(model).get(part)
    return model


def format_path(loc: Iterable[Any]) -> str:
    """`("nodeGroups", 0, "capacity")` -> `nodeGroups[0].capacity`; `region` is `aws:region`."""
    parts = list(loc)
    if parts[:1] == ["region"]:
        return "aws:region"
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def messages(err: ValidationError, root: type[BaseModel], recipes: Mapping[str, type[BaseModel]]) -> list[str]:
    """One line per error of validating `root`; `recipes` are the models of the `workloads`
    union, whose tag pydantic puts in the location but the stack file does not have."""
    lines: list[str] = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = e["msg"]
        kind = e["type"]
        parent_path: tuple[Any, ...] = loc[:-1]
        model: type[BaseModel] = root
        tag = loc[2] if loc[:1] == ("workloads",) and len(loc) >= 3 else None
        if isinstance(tag, str) and tag in recipes:
            model, parent_path, loc = recipes[tag], loc[3:-1], (*loc[:2], *loc[3:])
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "recipe")
            msg = f"{shown(e['input'].get('recipe'))} is not a recipe; valid: {', '.join(recipes)}"
            if kind == "union_tag_not_found":
                msg = f"required key is missing; valid: {', '.join(recipes)}"
        if kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            exc = (e.get("ctx") or {}).get("error")
            if isinstance(exc, KeyProblem):
                loc = (*loc, exc.key)
                msg = msg.removeprefix(f"{exc.key}: ")
        elif kind == "extra_forbidden":
            parent = _model_at(parent_path, model)
            valid = sorted(_fields_of(parent)) if parent else []
            key = str(loc[-1])
            hint = (
                f" (did you mean {to_camel(key)!r}? keys are camelCase)"
                if to_camel(key) in valid and to_camel(key) != key
                else did_you_mean(key, valid)
            )
            msg = f"unknown key{hint}; valid keys here: {', '.join(valid)}"
        elif kind == "missing":
            msg = "required key is missing"
        elif kind == "literal_error":
            msg = (
                f"{shown(e['input'])} is not allowed; "
                + msg[0].lower()
                + msg[1:]
                + _type_hint("string_type", e["input"])
            )
        elif kind in _SHOW_INPUT:
            msg = f"{msg} (got {shown(e['input'])}){_type_hint(kind, e['input'])}"
        lines.append(f"{format_path(loc)}: {msg}")
    return lines
