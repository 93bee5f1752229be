"""CrossGuard adapter: each rule of `policy.rules` as a stack validation policy.

    pulumi preview --policy-pack policy [--policy-pack-config policy/config.json]

Rules look across resources (a node group and its launch template, a bucket and its
public-access block), so each one is a `StackValidationPolicy` over all resources, turned
into the plan's shape first. Stacks that set `protectStatefulResources: false` pass
`{"stateful-protected": {"protectStatefulResources": false}}` as pack config.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The pack runs from policy/; the rules import facts/ from the project root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy import rules

LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}


def plan_resource(r: PolicyResource) -> dict[str, Any]:
    """A CrossGuard resource in the offline plan's shape (props are camelCase there too)."""
    props = dict(r.props)
    return {
        "urn": r.urn,
        "id": props.get("id"),
        "type": r.resource_type,
        "name": r.name,
        "parent": r.parent.urn if r.parent else None,
        "dependencies": [d.urn for d in r.dependencies],
        "protect": bool(r.opts.protect),
        "inputs": props,
    }


def policy_for(rule: rules.Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        config = args.get_config()
        context = rules.Context(protect_stateful_resources=bool(config.get("protectStatefulResources", True)))
        for v in rule.run([plan_resource(r) for r in args.resources], context):
            report_violation(v.message, v.urn)

    schema = None
    if rule.id == "stateful-protected":
        schema = PolicyConfigSchema(properties={"protectStatefulResources": {"type": "boolean", "default": True}})
    return StackValidationPolicy(
        name=rule.id,
        description=rule.description,
        validate=validate,
        enforcement_level=LEVELS[rule.enforcement],
        config_schema=schema,
    )


if __name__ == "__main__":
    PolicyPack(name="llm-training-eks-guardrails", policies=[policy_for(rule) for rule in rules.RULES])
