"""JSON Schema of a stack file (`Pulumi.<stack>.yaml`), generated from the config models.

    python -m tools.schema [--write]      (make schema)

`--write` also generates the `config:` section of Pulumi.yaml (`pulumi_declarations`), so a
default is stated once: in the config model.

Editors complete and check a stack file against it (docs/configuration.md, "Editor completion"): the keys of
every section, their types, defaults, allowed values and descriptions, as `config/` defines
them. The schema only helps while typing; `config.parse` stays the judge (cross-section rules,
AWS's own patterns). Generated, committed as schema/stack-config.schema.json, and held current
by tests/repo/test_schema.py. `--write` writes it; without, it is printed.

The file's top level is Pulumi's project stack (pulumi/pulumi v3.259.0,
sdk/go/common/workspace/project.go, ProjectStack): `secretsprovider`, `encryptedkey`,
`encryptionsalt`, `config`, `environment`. Under `config`, this project's keys are namespaced
`llm-training-eks:<key>` (the region is `aws:region`); other namespaces are left open.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from config import SECRET_KEYS
from config.base import Model
from config.stack import StackConfig
from facts.names import PROJECT
from tools.cli import ROOT

SCHEMA_FILE = ROOT / "schema" / "stack-config.schema.json"
PULUMI_YAML = ROOT / "Pulumi.yaml"
PULUMI_TYPES: dict[Any, str] = {bool: "boolean", int: "integer", str: "string"}
"""Pulumi's project-config types for the scalar keys it can check on `pulumi config set`."""
SCHEMA_ID = "stack-config.schema.json"
SECURE = {
    "type": "object",
    "description": "A value encrypted by the stack's secrets provider: pulumi config set --secret <key> <value>.",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


def _models() -> dict[str, type[Model]]:
    """Every config model by class name (pydantic's name for its `$defs` entry)."""
    found: dict[str, type[Model]] = {}
    todo: list[type[Model]] = [Model]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


def _fillable(defs: dict[str, Any]) -> None:
    """Drop `required` from models that fill their own keys when left out (the Llama2 shape,
    filled from `model.preset` before validation): what the model accepts, the schema accepts."""
    models = _models()
    for name, definition in defs.items():
        model = models.get(name)
        if model is None or "required" not in definition:
            continue
        try:
            model.model_validate({})
        except ValidationError:
            continue
        del definition["required"]


def stack_file_schema() -> dict[str, Any]:
    """The schema of a whole stack file, its `config` keys from `StackConfig`."""
    model = StackConfig.model_json_schema(by_alias=True, mode="validation")
    defs = model.pop("$defs", {})
    _fillable(defs)
    keys: dict[str, Any] = {}
    for key, prop in model["properties"].items():
        name = "aws:region" if key == "region" else f"{PROJECT}:{key}"
        keys[name] = {**SECURE, "description": prop.get("description", "")} if key in SECRET_KEYS else prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"Pulumi.<stack>.yaml of {PROJECT}",
        "description": "Generated from config/ by `make schema` (tools/schema.py); do not edit.",
        "type": "object",
        "properties": {
            "secretsprovider": {"type": "string", "description": "The stack's secrets provider."},
            "encryptedkey": {"type": "string", "description": "Cloud secrets providers: the encrypted data key."},
            "encryptionsalt": {"type": "string", "description": "The passphrase provider's salt."},
            "environment": {"description": "Pulumi ESC environments the stack imports."},
            "config": {
                "type": "object",
                "properties": keys,
                "required": ["aws:region"],
                # Other namespaces (aws:, kubernetes:, pulumi:) are not this project's to check.
                "patternProperties": {f"^(?!{PROJECT}:)[^:]+:.+$": {}},
                "additionalProperties": False,
            },
        },
        "required": ["config"],
        "additionalProperties": False,
        "$defs": defs,
    }


def pulumi_declarations() -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's `config:` section, from StackConfig: every optional top-level key of a plain
    scalar type (structured keys are beyond Pulumi's project-config types; secret keys are left
    out, since a declared secret without a default is required on every stack). Each carries the
    model's default, because Pulumi makes a declared key without one required on every stack:
    generated, so that default is stated once, in the model."""
    out: dict[str, dict[str, Any]] = {}
    for name, info in StackConfig.model_fields.items():
        key = info.alias or name
        kind = PULUMI_TYPES.get(info.annotation)
        if kind is None or key in (*SECRET_KEYS, "region") or info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        out[key] = {"type": kind, "default": default, "description": " ".join((info.description or "").split())}
    return out


def pulumi_yaml(text: str) -> str:
    """Pulumi.yaml's text with its `config:` section (the last one) generated by pulumi_declarations."""
    head, found, _ = text.partition("\nconfig:\n")
    if not found:
        raise ValueError("Pulumi.yaml has no top-level `config:` section to generate")
    return head + "\n" + yaml.safe_dump({"config": pulumi_declarations()}, sort_keys=False, width=10_000)


def render() -> str:
    return json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.schema", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        SCHEMA_FILE.parent.mkdir(exist_ok=True)
        SCHEMA_FILE.write_text(text)
        PULUMI_YAML.write_text(pulumi_yaml(PULUMI_YAML.read_text()))
        print(f"wrote {SCHEMA_FILE.relative_to(ROOT)} and the config section of Pulumi.yaml", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
