"""Stack values as the Pulumi engine and the stack files hold them, turned into what `parse` takes.

A stack file is read the way the Pulumi CLI reads it (gopkg.in/yaml.v3 into Pulumi's config
objects, pulumi/pulumi v3.259.0 `sdk/go/common/resource/config/object.go`), only stricter where
a difference would be silent:

- plain scalars resolve as yaml.v3 resolves them into `any`: `true`/`false` are booleans,
  plain decimals numbers, `null`/`~`/empty nothing, everything else text (`yes`, `on`,
  `12:30`, `2027-03-01T11:30:00Z` stay text, where PyYAML's YAML 1.1 rules would make a
  boolean, the number 750 or a datetime). Number forms the two disagree on (`0755`, `0x1f`,
  `1_000`) are refused: write a plain decimal or quote the value;
- duplicate keys are refused (yaml.v3 refuses them too; PyYAML keeps the last);
- anchors and aliases (`&a`, `*a`) are refused: nothing can expand into a huge document;
- the file, its nesting and its number of values are bounded, and map keys must be text.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from config.base import did_you_mean
from config.problems import Problem, problem
from facts.names import PROJECT

SECRET = "[secret]"
"""What a `secure:` value of a stack file becomes without the stack's secrets provider."""
MAX_FILE_BYTES = 512 * 1024
"""Stack files are a few KB; anything this big is a mistake (or an attack), not a stack."""
MAX_DEPTH = 32
"""Nesting of maps and lists (the deepest real key, a run's model option, is 4 deep)."""
MAX_VALUES = 20_000
"""YAML nodes in one file."""
MAX_ENGINE_VALUE = 512 * 1024
"""Characters of one JSON-encoded value handed over by the engine."""

# pulumi-aws 7.51.1 provider configuration keys (pulumi_aws/config/vars.py; tests/unit/test_stackfile.py
# reads them from the installed SDK). The program reads `aws:region`; a typo in the aws namespace is refused.
AWS_CONFIG_KEYS = (  # noqa: SIM905 - grouped words read better than 35 quoted strings
    "accessKey allowedAccountIds assumeRoleWithWebIdentity assumeRoles customCaBundle defaultTags"
    " ec2MetadataServiceEndpoint ec2MetadataServiceEndpointMode endpoints forbiddenAccountIds httpProxy httpsProxy"
    " ignoreTags insecure maxRetries noProxy profile region retryMode s3UsEast1RegionalEndpoint s3UsePathStyle"
    " secretKey sharedConfigFiles sharedCredentialsFiles skipCredentialsValidation skipMetadataApiCheck"
    " skipRegionValidation skipRequestingAccountId stsRegion tagPolicyCompliance token tokenBucketRateLimiterCapacity"
    " useDualstackEndpoint useFipsEndpoint userAgents"
).split()
READ_NAMESPACES = (PROJECT, "aws")
"""Config namespaces this program reads (`aws` for `aws:region`)."""
TOP_LEVEL_BOOLEANS = ("protectStatefulResources",)
"""Top-level keys of type boolean: the engine hands them over as the text `true`/`false`."""
_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")} | {
    "llm-training-eks/ambiguous-number"
}


class UsageError(Exception):
    """The command line or stack file cannot be used (exit 2)."""


class StackFileError(yaml.YAMLError):
    """What the stack-file reader refuses, with the line it found it on."""

    def __init__(self, message: str, node: Any = None):
        mark = getattr(node, "start_mark", None)
        super().__init__(f"{message} (line {mark.line + 1})" if mark is not None else message)


class _Resolver(BaseResolver):
    """yaml.v3's resolution of plain scalars into `any`, not PyYAML's YAML 1.1 rules."""


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Resolver.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
# Numbers yaml.v3 and YAML 1.1 read differently from each other (octal 0755, hex, 1_000).
_AMBIGUOUS = "llm-training-eks/ambiguous-number"
_Resolver.add_implicit_resolver(
    _AMBIGUOUS,
    re.compile(r"^[-+]?(?:0[0-9_]+|0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?)$"),
    list("-+0123456789"),
)


class _Loader(Reader, Scanner, Parser, Composer, SafeConstructor, _Resolver):
    """A safe loader with the limits and refusals the module docstring lists."""

    def __init__(self, stream: str):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self._depth = 0
        self._values = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise StackFileError(f"YAML aliases (*{event.anchor}) are not allowed in stack files; write it out", event)
        if getattr(event, "anchor", None) is not None:
            raise StackFileError(f"YAML anchors (&{event.anchor}) are not allowed in stack files", event)
        self._values += 1
        if self._values > MAX_VALUES:
            raise StackFileError(f"more than {MAX_VALUES} values; a stack file is far smaller", event)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise StackFileError(f"nested more than {MAX_DEPTH} levels deep", event)
            node: Node | None = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None or node.tag not in _TAGS:
            raise StackFileError(f"YAML tag {getattr(node, 'tag', None)!r} is not allowed in stack files", node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise StackFileError(f"expected a map, found {node.id}", node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise StackFileError(f"map key {key!r} is not text; put it in quotes", key_node)
            if key in mapping:
                raise StackFileError(f"key {key!r} appears twice in one map (YAML keeps only one)", key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _refuse_ambiguous(loader: _Loader, node: Node) -> Any:
    raise StackFileError(
        f"{loader.construct_scalar(node)!r}: write numbers as plain decimals (YAML versions disagree on octal,"  # type: ignore[arg-type]
        " hex and digit groups), or quote the value if it is text",
        node,
    )


# Timestamps stay text, as yaml.v3 gives them into `any` (typeshed's stub types these generically).
_Loader.add_constructor(_AMBIGUOUS, _refuse_ambiguous)  # type: ignore[type-var]
_Loader.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]


def load_yaml(text: str) -> Any:
    """A YAML document read the way the module docstring says; raises yaml.YAMLError."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_stack_file(path: Path) -> dict[str, Any]:
    """The flat `config:` map of a Pulumi stack file; `secure:` values become placeholders."""
    if path.is_dir():
        raise UsageError(f"{path}: a directory, not a stack file")
    if not path.is_file():
        stacks = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in path.parent.glob("Pulumi.*.yaml"))
        raise UsageError(
            f"{path.name}: no such stack file in {path.parent}; stacks there: {', '.join(stacks) or 'none'}"
        )
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UsageError(f"{path.name}: {size} bytes; a stack file is at most {MAX_FILE_BYTES} (a few KB is usual)")
    try:
        doc = load_yaml(path.read_bytes().decode("utf-8")) or {}
    except UnicodeDecodeError as e:
        raise UsageError(f"{path.name}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (yaml.YAMLError, RecursionError) as e:
        raise UsageError(f"{path.name}: not a valid stack file: {_one_line(e)}") from None
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


def _one_line(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return f"nested too deeply (more than {MAX_DEPTH} levels)"
    return " ".join(str(e).split())[:300]


def engine_value(v: Any) -> str:
    """A config value as the Pulumi engine hands it to the program: text, objects as JSON. A
    YAML null is the empty string: the CLI decodes a config value into a Go string first
    (pulumi/pulumi sdk/go/common/resource/config/value.go, unmarshalValue), and yaml.v3 leaves
    a string empty for null."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def secret_keys(values: Mapping[str, Any]) -> list[str]:
    """The stack file's keys whose values were stored encrypted."""
    return [k for k, v in values.items() if v == SECRET]


def shadows_aws(full_key: str) -> bool:
    """A key of this program's namespace (or a bare key, which Pulumi puts there) named like an
    AWS provider setting: `llm-training-eks:region` looks like the region but the provider reads
    only `aws:region`, so the two could disagree unnoticed."""
    ns, _, key = full_key.rpartition(":")
    return ns in ("", PROJECT) and key in AWS_CONFIG_KEYS


def _shadow_problem(full_key: str) -> Problem:
    key = full_key.rpartition(":")[2]
    return problem(
        full_key,
        "not-supported",
        f"{key!r} is an AWS provider setting, read only as aws:{key}, never from this namespace:"
        f" remove it (`pulumi config rm {full_key}`) and set aws:{key} instead"
        f" (`pulumi config set aws:{key} <value>`)",
        allowed=f"aws:{key}",
        hint=f"pulumi config rm {full_key}; pulumi config set aws:{key} <value>",
    )


def namespace_problems(values: Mapping[str, Any]) -> list[str]:
    """Keys the program would silently ignore or misread: a namespace that looks like ours but is
    not (`llm-trainig-eks:workloads` drops the whole section), `aws:` keys pulumi-aws does not
    have (`aws:regoin`), and keys of ours named like the AWS provider's (`shadows_aws`)."""
    problems: list[str] = []
    for full_key in values:
        ns, sep, key = full_key.rpartition(":")
        if shadows_aws(full_key):
            problems.append(_shadow_problem(full_key))
            continue
        if not sep or ns == PROJECT:
            continue
        if ns == "aws":
            if key not in AWS_CONFIG_KEYS:
                hint = did_you_mean(key, AWS_CONFIG_KEYS)
                problems.append(
                    problem(
                        full_key,
                        "not-supported",
                        f"not a configuration key of the AWS provider{hint}",
                        hint=hint.strip(" ()") or None,
                    )
                )
            continue
        near = [n for n in READ_NAMESPACES if n.lower() == ns.lower()]
        near = near or difflib.get_close_matches(ns, READ_NAMESPACES, n=1, cutoff=0.6)
        if near:
            problems.append(
                problem(
                    full_key,
                    "not-supported",
                    f"unknown config namespace {ns!r} (did you mean '{near[0]}:{key}'?); this program reads"
                    f" {PROJECT}:* and aws:region, and would ignore this key",
                    allowed=f"{PROJECT}:*, aws:region",
                    hint=f"did you mean '{near[0]}:{key}'?",
                )
            )
    return problems


def from_stack_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn flat stack config (`llm-training-eks:key` / `aws:region`) into the dict `parse` takes.

    Values may be native (read from a stack file) or strings as the Pulumi engine passes
    them (objects and lists JSON-encoded, other top-level values as text: `lowerStack: 2.5`
    reaches the program as "2.5", `protectStatefulResources: true` as "true"); both give the
    same result, because native top-level scalars are first turned into the engine's text.
    Keys of other namespaces (aws:, kubernetes:, pulumi:) are not ours and are left alone
    (`namespace_problems` reports the ones that look like typos of ours); so are keys of ours
    named like an AWS provider setting (`llm-training-eks:region`: only `aws:region` counts).
    """
    raw: dict[str, Any] = {}
    for full_key, value in values.items():
        ns, _, key = full_key.rpartition(":")
        if isinstance(value, (bool, int, float)):
            value = engine_value(value)
        if full_key == "aws:region":
            raw["region"] = value
        elif ns in ("", PROJECT) and not shadows_aws(full_key):
            if isinstance(value, str) and value[:1] in ("{", "[") and len(value) <= MAX_ENGINE_VALUE:
                with contextlib.suppress(json.JSONDecodeError, RecursionError):
                    value = json.loads(value)
            elif key in TOP_LEVEL_BOOLEANS and value in ("true", "false"):
                value = value == "true"
            raw[key] = value
    if "region" not in raw:
        raw["region"] = None
    return raw
