"""Which layer owns each stack key, and the rule that a layered stack says only its own.

A layered stack declares one lifecycle: `aws` (everything that needs only the AWS API),
`cluster` (everything that needs the Kubernetes API but outlives a run) or `runs` (the
training runs). A key in the wrong layer's stack would be silently ignored there, so it is
refused, naming the layer it belongs to. `all` (one stack, the quick start) takes every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.problems import problem
from facts.names import LAYERS, LOWER_LAYER, PROJECT

OWNER: dict[str, str] = {
    "network": "aws",
    "cluster": "aws",
    "systemNodeGroup": "aws",
    "nodeGroups": "aws",
    "storage": "aws",
    "registry": "aws",
    "protectStatefulResources": "aws",
    "bucketLifecycle": "aws",
    "tags": "aws",
    "ciRunner": "aws",
    "addons": "cluster",
    "teams": "cluster",
    "queueing": "cluster",
    "workloads": "runs",
    "huggingFaceToken": "runs",
}
"""Top-level key -> the layer that reads it."""
EVERY_LAYER = ("region", "layer", "lowerStack")
"""Keys every stack may set: `aws:region` (also prices the plan), the layer, the lower stack."""
AWS_ADDON_KEYS = ("eksAddonVersions", "observability", "loadBalancerController")
"""`addons` keys of the aws layer: EKS managed add-ons (and the observability add-on's log groups)
go through the AWS API, as does the Load Balancer Controller's IAM role (the cluster layer installs
its chart where the aws layer made the role); the rest are charts."""


def owner_of(key: str, sub: str | None = None) -> str | None:
    """The layer that reads `key` (or `key.sub`); None for keys every layer may set."""
    if key == "addons" and sub in AWS_ADDON_KEYS:
        return "aws"
    return OWNER.get(key)


def misplaced(layer: str, raw: Mapping[str, Any]) -> list[str]:
    """Keys of a layered stack that another layer reads."""
    problems: list[str] = []
    for key, value in raw.items():
        if key in EVERY_LAYER or value is None:
            continue
        subs = list(value) if key == "addons" and isinstance(value, dict) else [None]
        for sub in subs:
            owner = owner_of(key, sub)
            if owner is not None and owner != layer:
                path = f"{key}.{sub}" if sub else key
                said = f"read by the {owner} layer; this stack is the {layer} layer, so move it to the {owner} stack"
                problems.append(problem(path, "not-supported", said, hint=f"move it to the {owner} stack"))
    return problems


def layer_problems(raw: Mapping[str, Any]) -> list[str]:
    """`lowerStack` exactly where a lower layer exists, and every key in its own layer."""
    layer = raw.get("layer", "all")
    if layer not in LAYERS:
        return []  # the model reports it
    lower = raw.get("lowerStack") or ""
    if layer in LOWER_LAYER and not lower:
        example = f"organization/{PROJECT}/<env>-{LOWER_LAYER[layer]}"
        said = f"required for the {layer} layer: the stack of its {LOWER_LAYER[layer]} layer, e.g. {example}"
        return [problem("lowerStack", "required", said, allowed=f"a stack such as {example}")]
    if layer not in LOWER_LAYER and lower:
        said = f"only the cluster and runs layers read a lower stack; this stack is {layer!r}"
        return [problem("lowerStack", "conflict", said, value=repr(lower), hint="leave it out")]
    return [] if layer == "all" else misplaced(layer, raw)
