"""Rules, violations and what the rules know beyond the resources."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from policy.rules.props import Resource

Enforcement = Literal["mandatory", "advisory"]


@dataclass(frozen=True)
class Context:
    """What the rules need beyond the resources."""

    protect_stateful_resources: bool = True
    """The stack's `protectStatefulResources`: false turns rule 8 off on purpose."""
    reservation_azs: Mapping[str, str] = field(default_factory=dict)
    """Capacity reservation id -> its AZ, where known (preflight looks them up)."""


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
Check = Callable[[Sequence[Resource], Context], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named check with one enforcement level."""

    id: str
    description: str
    enforcement: Enforcement
    check: Check

    def run(self, resources: Sequence[Resource], context: Context) -> list[Violation]:
        return sorted(
            Violation(self.id, str(r.get("name", "")), str(r.get("urn", "")), msg, self.enforcement)
            for r, msg in self.check(resources, context)
        )
