"""Pydantic validation errors -> one typed problem per error (config.problems.Problem), which is
its `key.path: message` line, as the stack file spells it.

Pydantic's error type gives the problem's kind (`missing` -> required, `literal_error` and an
unknown key -> not-supported, a KeyProblem its own kind, everything else invalid).

A line never names a Python class (a model's, a union member's): where pydantic would, it says
the shape the key expects instead (`expected a map with name, instanceType, ...`). The
location pydantic reports is walked against the models' annotations, so a union member's tag
(a recipe, a class name) never shows up as a key either.
"""

from __future__ import annotations

import datetime as dt
import types
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic.alias_generators import to_camel

from config.base import KeyProblem, Refusal, did_you_mean
from config.intents import intent
from config.problems import Kind, Problem

# Error kinds whose message is clearer with the value that was given.
_SHOW_INPUT = (
    "int_parsing",
    "int_type",
    "bool_parsing",
    "bool_type",
    "float_type",
    "string_type",
    "int_from_float",
    "finite_number",
    "datetime_type",
    "datetime_parsing",
    "datetime_from_date_parsing",
)
# Error kinds about the kind of value (a map where a list belongs, ...): answered with the shape.
_SHAPE_KINDS = (
    "model_type",
    "model_attributes_type",
    "dict_type",
    "list_type",
    "dataclass_type",
    "is_instance_of",
    "union_tag_invalid",
)
VALUE_CHARS = 60
"""Longest excerpt of a given value a message quotes."""
_SCALARS = {str: "text", bool: "true or false", int: "a whole number", float: "a number", SecretStr: "text"}


def shown(value: Any) -> str:
    """`repr` of a value, cut to VALUE_CHARS characters (a message stays one short line)."""
    text = repr(value) if not isinstance(value, (dict, list)) else _size(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def _size(value: dict[Any, Any] | list[Any]) -> str:
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


# --------------------------------------------------------------------------- annotations


def _discriminator(ann: Any) -> str | None:
    """The discriminator key of `Annotated[A | B, Field(discriminator=...)]`, else None."""
    if get_origin(ann) is Annotated:
        for meta in get_args(ann)[1:]:
            found = getattr(meta, "discriminator", None)
            if isinstance(found, str):
                return found
    return None


def _bare(ann: Any) -> Any:
    """`ann` without `Annotated[...]` and without `| None`."""
    while True:
        if get_origin(ann) is Annotated:
            ann = get_args(ann)[0]
            continue
        members = _members(ann)
        if members is not None and len(members) == 1:
            ann = members[0]
            continue
        return ann


def _members(ann: Any) -> list[Any] | None:
    """The non-None members of a union, or None when `ann` is no union."""
    if get_origin(ann) in (Union, types.UnionType):
        return [a for a in get_args(ann) if a is not type(None)]
    return None


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _tag_values(model: type[BaseModel], key: str) -> tuple[str, ...]:
    """The values of a discriminator field (`recipe: Literal["bert-neuron"]`)."""
    return tuple(str(v) for v in get_args(field_annotation(model, key)))


def _by_tag(ann: Any) -> dict[str, Any]:
    """Union member by the tag pydantic puts in an error's location: the discriminator value, or
    (a smart union) the member's name. Empty for anything but a union of two or more members."""
    key = _discriminator(ann)
    members = _members(_bare_annotated(ann)) or []
    out: dict[str, Any] = {}
    for member in members if len(members) > 1 else []:
        if key and _is_model(member):
            out.update(dict.fromkeys(_tag_values(member, key), member))
        out[getattr(member, "__name__", str(member))] = member
    return out


def _bare_annotated(ann: Any) -> Any:
    return get_args(ann)[0] if get_origin(ann) is Annotated else ann


def field_annotation(model: type[BaseModel], key: Any) -> Any:
    """The annotation of the field a stack file calls `key` (None: no such field)."""
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info.annotation
    return None


def resolve(loc: Iterable[Any], root: Any) -> tuple[tuple[Any, ...], Any]:
    """The stack-file path of an error location, and the annotation found there (None when
    the path leaves the models): union tags are dropped, keys and indexes kept."""
    path: list[Any] = []
    ann: Any = root
    for part in loc:
        if ann is None:
            path.append(part)
            continue
        tags = _by_tag(ann)
        if part in tags:
            ann = tags[part]
            continue
        bare = _bare(ann)
        origin = get_origin(bare)
        path.append(part)
        if _is_model(bare):
            ann = field_annotation(bare, part)
        elif origin is list and isinstance(part, int):
            ann = get_args(bare)[0]
        elif origin is dict:
            ann = get_args(bare)[1]
        else:
            ann = None
    return tuple(path), ann


def keys_of(model: type[BaseModel]) -> list[str]:
    """The stack-file keys of a model, in declaration order."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_shape(model: type[BaseModel]) -> str:
    required = [info.alias or n for n, info in model.model_fields.items() if info.is_required()]
    optional = [k for k in keys_of(model) if k not in required]
    if required:
        more = f" and optionally {', '.join(optional)}" if optional else ""
        return f"a map with {', '.join(required)}{more}"
    return f"a map with any of {', '.join(optional)}"


def _union_tags(ann: Any) -> tuple[str | None, list[str]]:
    """The discriminator key of a discriminated union and its tags, in order (None, []: no such union)."""
    key = _discriminator(ann)
    members = _members(_bare_annotated(ann)) or []
    if not key or len(members) < 2:
        return None, []
    return key, [t for m in members if _is_model(m) for t in _tag_values(m, key)]


def expected(ann: Any, depth: int = 0) -> str:
    """The shape a key of type `ann` takes, in the stack file's words (no class names)."""
    key, tags = _union_tags(ann)
    if key:
        return f"a map with {key} (one of: {', '.join(tags)}) and that {key}'s keys"
    bare = _bare(ann)
    origin = get_origin(bare)
    if _is_model(bare):
        return _model_shape(bare) if depth < 2 else "a map"
    if origin is list:
        return f"a list, each item {expected(get_args(bare)[0], depth + 1)}"
    if origin is dict:
        return f"a map of name: value entries, each value {expected(get_args(bare)[1], depth + 1)}"
    if origin is Literal:
        return f"one of: {', '.join(str(v) for v in get_args(bare))}"
    if bare is dt.datetime:
        return "a date and time such as 2027-03-01T11:30:00Z"
    members = _members(bare)
    if members:
        return " or ".join(expected(m, depth + 1) for m in members)
    return _SCALARS.get(bare, "a value")


# --------------------------------------------------------------------------- lines


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


REGION_REQUIRED = (
    "required: the AWS region the stack deploys to (the AWS provider reads aws:region); set it with"
    " `pulumi config set aws:region <region>` (e.g. us-west-2), or write the line `aws:region: us-west-2`"
    " under `config:` in the stack file; a stack with no file yet, or an empty one: `make new-stack"
    " STACK=<name> FROM=dev` starts it from an example"
)
"""Every stack sets a region, so a stack without one is most often a stack never started (`pulumi
stack init` without a file, an empty file): the line says how to start one as well."""


def _unknown_key(parent: Any, key: str) -> tuple[str, str | None, str | None]:
    """The message for an unknown key, what keys are valid there, and the did-you-mean (or None)."""
    model = _bare(parent)
    valid = keys_of(model) if _is_model(model) else []
    camel = to_camel(key)
    if camel in valid and camel != key:
        hint = f" (did you mean {camel!r}? keys are camelCase)"
    else:
        meant = intent(model, key) if _is_model(model) else None
        if meant:
            return f"unknown key: {meant}", None, meant
        hint = did_you_mean(key, valid)
    return f"unknown key{hint}; valid keys here: {', '.join(valid)}", ", ".join(valid), hint.strip(" ()") or None


# Pydantic's error types -> the problem's kind; every other type is `invalid`.
_KINDS: dict[str, Kind] = {
    "missing": "required",
    "union_tag_not_found": "required",
    "extra_forbidden": "not-supported",
    "literal_error": "not-supported",
    "enum": "not-supported",
    "union_tag_invalid": "not-supported",
}
# Pydantic's constraint errors -> what is allowed, from the error's context.
_BOUNDS = {
    "greater_than_equal": ("ge", "at least {}"),
    "greater_than": ("gt", "more than {}"),
    "less_than_equal": ("le", "at most {}"),
    "less_than": ("lt", "less than {}"),
    "too_short": ("min_length", "at least {} items or characters"),
    "too_long": ("max_length", "at most {} items or characters"),
    "string_pattern_mismatch": ("pattern", "text matching {}"),
    "literal_error": ("expected", "{}"),
    "enum": ("expected", "{}"),
}


def _allowed(kind: str, ctx: dict[str, Any]) -> str | None:
    key, text = _BOUNDS.get(kind, ("", ""))
    return text.format(ctx[key]) if key in ctx else None


def _guessed(kind: str, ctx: dict[str, Any]) -> bool:
    """A bare ValueError names no kind: `invalid` is then a guess (`parsed`, as for a plain line)."""
    return kind == "value_error" and not isinstance(ctx.get("error"), Refusal)


def _line(e: Any, root: type[BaseModel]) -> Problem:
    raw_loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    kind, msg, given, ctx = e["type"], e["msg"], e.get("input"), e.get("ctx") or {}
    loc, ann = resolve(raw_loc, root)
    value = None if kind in ("missing", "extra_forbidden") or isinstance(given, BaseModel) else shown(given)
    parts: dict[str, str | None] = {"value": value, "allowed": _allowed(kind, ctx), "hint": None}
    problem_kind: Kind = _KINDS.get(kind, "invalid")
    if loc == ("region",) and (kind == "missing" or given is None):
        return Problem(
            "aws:region",
            "required",
            REGION_REQUIRED,
            allowed="an AWS region such as us-west-2",
            hint="pulumi config set aws:region <region>",
        )
    key, tags = _union_tags(ann)
    if kind in ("union_tag_invalid", "union_tag_not_found") and key:
        tag = given.get(key) if isinstance(given, dict) else given
        said = "required key is missing" if kind == "union_tag_not_found" else f"{shown(tag)} is not a {key}"
        value = None if kind == "union_tag_not_found" else shown(tag)
        return Problem(
            format_path((*loc, key)),
            problem_kind,
            f"{said}; valid: {', '.join(tags)}",
            value=value,
            allowed=", ".join(tags),
        )
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        exc = ctx.get("error")
        if isinstance(exc, Refusal):
            problem_kind, parts["allowed"], parts["hint"] = exc.kind, exc.allowed, exc.hint
        if isinstance(exc, KeyProblem):
            loc = (*loc, exc.key)
            msg = msg.removeprefix(f"{exc.key}: ")
            parts["value"] = None  # the value of the whole section: the message quotes what matters
    elif kind == "extra_forbidden":
        _, parent = resolve(raw_loc[:-1], root)
        msg, parts["allowed"], parts["hint"] = _unknown_key(parent, str(loc[-1]))
    elif kind == "missing":
        msg = "required key is missing"
        if ann is not None and _is_model(_bare(ann)):
            parts["allowed"] = expected(ann)
            msg += f"; it takes {parts['allowed']}"
    elif kind == "literal_error":
        hint = _type_hint("string_type", given)
        msg = f"{shown(given)} is not allowed; " + msg[0].lower() + msg[1:] + hint
        parts["hint"] = hint.removeprefix("; ") or None
    elif kind in _SHAPE_KINDS and ann is not None:
        # An error at a union member's tag is about the whole union: say every member's shape.
        _, parent = resolve(raw_loc[:-1], root) if raw_loc else ((), None)
        whole = parent if parent is not None and raw_loc[-1] in _by_tag(parent) else ann
        parts["allowed"] = expected(whole)
        msg = f"expected {parts['allowed']} (got {shown(given)})"
    elif kind in _SHOW_INPUT:
        hint = _type_hint(kind, given)
        msg = f"{msg} (got {shown(given)}){hint}"
        parts["hint"] = hint.removeprefix("; ") or None
        parts["allowed"] = expected(ann) if ann is not None else None
    return Problem(format_path(loc), problem_kind, msg, **parts, parsed=_guessed(kind, ctx))


def error_lines(err: ValidationError, root: type[BaseModel]) -> list[Problem]:
    """One problem (which is its line) per error of validating `root`, named by the stack file's key path."""
    return list(dict.fromkeys(_line(e, root) for e in err.errors()))
