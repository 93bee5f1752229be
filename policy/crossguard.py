"""The rules of `policy.rules` as CrossGuard policies (pulumi-policy 1.21.0).

- A `ResourceRule` becomes a `ResourceValidationPolicy`: the engine calls it as each resource
  is registered, with the resource's inputs, in previews and updates; a mandatory violation
  stops that resource before it is created.
- A `StackRule` becomes a `StackValidationPolicy`: the engine calls it once after the preview
  or update, with every resource's outputs and the dependencies between them.

pulumi-policy hands properties wrapped in proxies (`Mapping`/`Sequence`, not `dict`/`list`)
that raise `UnknownValueError` when a value unknown during the preview is read; the SDK then
drops the whole policy for that call with an advisory "can't run policy ... during preview".
So the adapter never reads through the proxies: it unwraps them with the SDK's own
`serialize_properties` (which keeps unknowns as they came) and turns each unknown sentinel
into `props.UNKNOWN`, a value the rules handle. Every rule therefore runs in every preview.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import proxy as policy_proxy
from pulumi_policy.deserialize import serialize_properties

from policy import rules
from policy.rules.props import T_LAUNCH_TEMPLATE, UNKNOWN, dig, known, of_type

PACK_NAME = "llm-training-eks-guardrails"
LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}

# The seven sentinels the engine sends for values unknown during a preview (one per type).
SENTINELS = frozenset(
    {
        policy_proxy.UNKNOWN_BOOLEAN_VALUE,
        policy_proxy.UNKNOWN_NUMBER_VALUE,
        policy_proxy.UNKNOWN_STRING_VALUE,
        policy_proxy.UNKNOWN_ARRAY_VALUE,
        policy_proxy.UNKNOWN_ASSET_VALUE,
        policy_proxy.UNKNOWN_ARCHIVE_VALUE,
        policy_proxy.UNKNOWN_OBJECT_VALUE,
    }
)

CONFIG_SCHEMA: dict[str, dict[str, Any]] = {
    "protectStatefulResources": {
        "type": "boolean",
        "default": True,
        "description": "false for a throwaway stack (its protectStatefulResources: false)",
    },
    "reservationAzs": {  # with lookUpReservations, for efa-node-groups
        "type": "object",
        "additionalProperties": {"type": "string"},
        "default": {},
        "description": "capacity reservation id -> its AZ, where EC2 cannot be asked",
    },
    "lookUpReservations": {
        "type": "boolean",
        "default": True,
        "description": "ask EC2 for the AZ of each capacity reservation a launch template targets",
    },
}


def plain(props: Mapping[str, Any]) -> dict[str, Any]:
    """Properties as pulumi-policy hands them -> plain dicts and lists, unknowns as UNKNOWN."""

    def swap(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return UNKNOWN if isinstance(v, str) and v in SENTINELS else v

    return dict(swap(serialize_properties(props)))


def resource_of_args(args: ResourceValidationArgs) -> dict[str, Any]:
    """The resource a resource validation sees (its inputs), in the rules' shape."""
    return {
        "urn": args.urn,
        "id": None,
        "type": args.resource_type,
        "name": args.name,
        "parent": args.opts.parent,
        "dependencies": [],
        "protect": bool(args.opts.protect),
        "inputs": plain(args.props),
    }


def resource_of(r: PolicyResource) -> dict[str, Any]:
    """A resource of a stack validation (its outputs and dependencies), in the rules' shape."""
    props = plain(r.props)
    return {
        "urn": r.urn,
        "id": props.get("id"),  # UNKNOWN until the resource exists; None where not shown
        "type": r.resource_type,
        "name": r.name,
        "parent": r.parent.urn if r.parent else r.opts.parent,
        "dependencies": [d.urn for d in r.dependencies],
        "propertyDependencies": {k: [d.urn for d in v] for k, v in r.property_dependencies.items()},
        "protect": bool(r.opts.protect),
        "inputs": props,
    }


Lookup = Callable[[Sequence[str], str | None, str | None], Mapping[str, str]]


def ec2_reservation_azs(ids: Sequence[str], region: str | None, profile: str | None) -> dict[str, str]:
    """Reservation id -> AZ from EC2 DescribeCapacityReservations, with the region (and
    profile) of the stack's AWS provider. Best effort: on any error nothing is known, and
    preflight (which fails the program on a bad reservation) stays the authority."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
        found = session.client("ec2").describe_capacity_reservations(CapacityReservationIds=list(ids))
    except Exception:  # noqa: BLE001 no credentials, no network, not found, throttled: nothing known
        return {}
    return {
        str(cr["CapacityReservationId"]): str(cr["AvailabilityZone"])
        for cr in found.get("CapacityReservations", [])
        if cr.get("CapacityReservationId") and cr.get("AvailabilityZone")
    }


def context_of(
    config: Mapping[str, Any],
    resources: Sequence[Mapping[str, Any]] = (),
    providers: Mapping[str, Mapping[str, Any]] | None = None,
    lookup: Lookup | None = None,
) -> rules.Context:
    """The rules' context from the policy's config (and, given a lookup, reservation AZs
    from EC2 for the reservations launch templates target)."""
    azs = {str(k): str(v) for k, v in dict(config.get("reservationAzs") or {}).items()}
    if lookup is not None and config.get("lookUpReservations", True):
        for lt in of_type(resources, T_LAUNCH_TEMPLATE):
            rid = dig(lt.get("inputs"), "capacityReservationSpecification", "capacityReservationTarget")
            rid = dig(rid, "capacityReservationId")
            if known(rid) and rid not in azs:
                provider = (providers or {}).get(str(lt.get("urn")), {})
                azs.update(lookup([rid], provider.get("region"), provider.get("profile")))
    return rules.Context(
        protect_stateful_resources=config.get("protectStatefulResources", True) is not False,
        reservation_azs=azs,
    )


def _metadata(rule: rules.Rule) -> dict[str, Any]:
    """What CrossGuard shows of a policy: name, description, level, config schema."""
    schema = PolicyConfigSchema(properties={k: CONFIG_SCHEMA[k] for k in rule.config}) if rule.config else None
    return {
        "name": rule.id,
        "description": rule.description,
        "enforcement_level": LEVELS[rule.enforcement],
        "config_schema": schema,
    }


def resource_policy(rule: rules.ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not rule.applies(args.resource_type):
            args.not_applicable(f"{rule.id} looks at {', '.join(rule.types)}")
        context = context_of(args.get_config())
        for message in rule.check(resource_of_args(args), context):
            report_violation(message, None)

    return ResourceValidationPolicy(validate=validate, **_metadata(rule))


def stack_policy(rule: rules.StackRule, lookup: Lookup = ec2_reservation_azs) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [resource_of(r) for r in args.resources]
        providers = {r.urn: plain(r.provider.props) for r in args.resources if r.provider is not None}
        reservations = lookup if "reservationAzs" in rule.config else None
        context = context_of(args.get_config(), resources, providers, reservations)
        for r, message in rule.findings(resources, context):
            report_violation(message, str(r.get("urn") or "") or None)

    return StackValidationPolicy(validate=validate, **_metadata(rule))


def policies(lookup: Lookup = ec2_reservation_azs) -> list[Policy]:
    """One CrossGuard policy per rule, in the order of `rules.RULES`."""
    return [
        resource_policy(rule) if isinstance(rule, rules.ResourceRule) else stack_policy(rule, lookup)  # type: ignore[arg-type]
        for rule in rules.RULES
    ]
