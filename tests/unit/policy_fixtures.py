"""Fixtures shared by the policy tests: resources in the rules' shape, and a runner per rule."""

from __future__ import annotations

from typing import Any

from policy import rules
from policy.rules import props

U = props.UNKNOWN
GOOD_LT = {
    "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
    "networkInterfaces": [{"networkCardIndex": 0, "associatePublicIpAddress": "false"}],
}
PREFIX = "urn:pulumi:test::llm-training-eks::"


def res(
    type_: str,
    name: str,
    inputs: dict[str, Any],
    *,
    protect: bool = False,
    deps: tuple[str, ...] = (),
    prop_deps: dict[str, list[str]] | None = None,
    id_: str | None = "",
) -> dict[str, Any]:
    """A resource as the offline plan shows it (`id_` None: not known yet)."""
    r: dict[str, Any] = {
        "urn": f"{PREFIX}{type_}::{name}",
        "id": f"{name}-id" if id_ == "" else id_,
        "type": type_,
        "name": name,
        "protect": protect,
        "dependencies": [f"{PREFIX}{d}" for d in deps],
        "inputs": inputs,
    }
    if prop_deps is not None:
        r["propertyDependencies"] = {k: [f"{PREFIX}{d}" for d in v] for k, v in prop_deps.items()}
    return r


def urn(type_: str, name: str) -> str:
    return f"{type_}::{name}"


def messages(resources: list[dict[str, Any]], rule_id: str, context: rules.Context | None = None) -> list[str]:
    rule = next(r for r in rules.RULES if r.id == rule_id)
    return [v.message for v in rule.run(resources, context or rules.Context())]
