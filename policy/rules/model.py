"""Rules, violations and what the rules know beyond the resources.

Two kinds of rule, as CrossGuard has two kinds of policy:
- `ResourceRule`: looks at one resource at a time (its type among `types`). Inside CrossGuard
  it is a resource validation policy: the engine calls it on each resource's inputs as the
  resource is registered, during previews too.
- `StackRule`: looks across resources (a node group and its launch template, a bucket and
  its public-access block). Inside CrossGuard it is a stack validation policy: the engine
  calls it once, after the preview or update, on every resource's outputs.
The offline plan runs both kinds over the planned resources (`Rule.run`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from policy.rules.props import Resource, matches, type_of

Enforcement = Literal["mandatory", "advisory"]


@dataclass(frozen=True)
class Context:
    """What the rules need beyond the resources (CrossGuard: the pack's config)."""

    protect_stateful_resources: bool = True
    """The stack's `protectStatefulResources`: false turns the protection rules off on purpose."""
    reservation_azs: Mapping[str, str] = field(default_factory=dict)
    """Capacity reservation id -> its AZ, where known (CrossGuard looks them up in EC2)."""


@dataclass(frozen=True, order=True)
class Violation:
    """One broken rule on one resource."""

    rule: str
    name: str
    urn: str
    message: str
    enforcement: Enforcement

    def line(self) -> str:
        """One line for a terminal or CI log: enforcement, rule, resource, what to do."""
        return f"policy {self.enforcement} [{self.rule}] {self.name}: {self.message}"

    def as_dict(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "name": self.name,
            "urn": self.urn,
            "message": self.message,
            "enforcement": self.enforcement,
        }


Finding = tuple[Resource, str]
ResourceCheck = Callable[[Resource, Context], Iterable[str]]
StackCheck = Callable[[Sequence[Resource], Context], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named check with one enforcement level. `config` names the pack-config keys it reads."""

    id: str
    description: str
    enforcement: Enforcement
    config: tuple[str, ...] = ()

    def findings(self, resources: Sequence[Resource], context: Context) -> Iterable[Finding]:
        raise NotImplementedError

    def run(self, resources: Sequence[Resource], context: Context) -> list[Violation]:
        return sorted(
            Violation(self.id, str(r.get("name", "")), str(r.get("urn", "")), msg, self.enforcement)
            for r, msg in self.findings(resources, context)
        )


@dataclass(frozen=True)
class ResourceRule(Rule):
    """A rule over one resource of the given types (`prefix*` matches a type prefix)."""

    types: tuple[str, ...] = ()
    check: ResourceCheck = lambda r, c: ()

    def applies(self, type_: str) -> bool:
        return matches(type_, self.types)

    def findings(self, resources: Sequence[Resource], context: Context) -> Iterable[Finding]:
        for r in resources:
            if self.applies(type_of(r)):
                for msg in self.check(r, context):
                    yield r, msg


@dataclass(frozen=True)
class StackRule(Rule):
    """A rule across resources."""

    check: StackCheck = lambda rs, c: ()

    def findings(self, resources: Sequence[Resource], context: Context) -> Iterable[Finding]:
        return self.check(resources, context)
