"""Stack values as the Pulumi engine and the stack files hold them, turned into what `parse` takes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from facts.names import PROJECT

SECRET = "[secret]"
"""What a `secure:` value of a stack file becomes without the stack's secrets provider."""


class UsageError(Exception):
    """The command line or stack file cannot be used (exit 2)."""


def read_stack_file(path: Path) -> dict[str, Any]:
    """The flat `config:` map of a Pulumi stack file; `secure:` values become placeholders."""
    if not path.is_file():
        stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in path.parent.glob("Pulumi.*.yaml"))
        raise UsageError(f"{path.name}: no such stack file; stacks here: {', '.join(stacks) or 'none'}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UsageError(f"{path.name}: not valid YAML: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise UsageError(f"{path.name}: expected a top-level 'config:' map")
    values = doc.get("config") or {}

    def unsecret(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"secure"}:
                return SECRET
            return {k: unsecret(x) for k, x in v.items()}
        if isinstance(v, list):
            return [unsecret(x) for x in v]
        return v

    return {k: unsecret(v) for k, v in values.items()}


def engine_value(v: Any) -> str:
    """A config value as the Pulumi engine hands it to the program: text, objects as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def secret_keys(values: Mapping[str, Any]) -> list[str]:
    """The stack file's keys whose values were stored encrypted."""
    return [k for k, v in values.items() if v == SECRET]


def from_stack_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn flat stack config (`llm-training-eks:key` / `aws:region`) into the dict `parse` takes.

    Values may be native (read from a stack file) or strings as the Pulumi engine passes
    them (objects and lists JSON-encoded, scalars as text); both give the same result.
    Keys of other namespaces (aws:, kubernetes:, pulumi:) are not ours and are left alone.
    """
    raw: dict[str, Any] = {}
    for full_key, value in values.items():
        ns, _, key = full_key.rpartition(":")
        if full_key == "aws:region":
            raw["region"] = value
        elif ns in ("", PROJECT):
            if isinstance(value, str) and value[:1] in ("{", "["):
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(value)
            raw[key] = value
    if "region" not in raw:
        raw["region"] = None
    return raw
