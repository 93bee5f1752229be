"""How the plan table reads a plan: resources by parent and type, inputs read through a record
of what was asked and found, and a display name per resource type.

The table's lines come from the inputs of the planned resources. A line read from an input
that a change renamed or stopped setting would vanish (or show a default) without anything
failing; with a `Reads` given, every input key and child type the table asks for is recorded
with whether the plan had it, and tests/plan/test_plan_table.py fails on one that no example
stack has (`Reads.never_found`), and on a top-level component the table has nothing to say of.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from facts.names import PROJECT, component_type


@dataclass
class Reads:
    """What the table asked of plans, and whether any plan had it."""

    keys: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(resource type, input key path) -> found in some plan."""
    children: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(component type, child type) -> some component of that type had such a child."""
    undescribed: set[str] = field(default_factory=set)
    """Top-level component types the table has no facts function for."""

    def key(self, type_: str, path: str, found: bool) -> None:
        self.keys[(type_, path)] = self.keys.get((type_, path), False) or found

    def never_found(self) -> list[str]:
        """Every input key and child type asked for that no plan had, one line each."""
        return [f"{t}: input {k} is never set" for (t, k), found in sorted(self.keys.items()) if not found] + [
            f"{t}: no child of type {c}" for (t, c), found in sorted(self.children.items()) if not found
        ]


class RecordedInputs(dict[str, Any]):
    """A resource's inputs that record each key asked with `get` or `[]` (nested maps too)."""

    def __init__(self, data: dict[str, Any], reads: Reads, type_: str, path: str = ""):
        super().__init__(data)
        self._reads, self._type, self._path = reads, type_, path

    def _wrap(self, key: str, value: Any) -> Any:
        path = f"{self._path}{key}"
        if isinstance(value, dict):
            return RecordedInputs(value, self._reads, self._type, f"{path}.")
        if isinstance(value, list):
            return [
                RecordedInputs(v, self._reads, self._type, f"{path}[].") if isinstance(v, dict) else v for v in value
            ]
        return value

    def get(self, key: str, default: Any = None) -> Any:
        self._reads.key(self._type, f"{self._path}{key}", key in self)
        return self._wrap(key, super().get(key, default))

    def __getitem__(self, key: str) -> Any:
        self._reads.key(self._type, f"{self._path}{key}", key in self)
        return self._wrap(key, super().__getitem__(key))


class PlanView:
    """A plan as the table reads it."""

    def __init__(self, plan: dict[str, Any], reads: Reads | None = None):
        self.reads = reads
        if reads is not None:
            plan = {
                **plan,
                "resources": [
                    {**r, "inputs": RecordedInputs(r["inputs"], reads, r["type"])} for r in plan["resources"]
                ],
            }
        self.plan = plan
        self._by_parent: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in plan["resources"]:
            self._by_parent[r["parent"]].append(r)
        self._types = {r["urn"]: r["type"] for r in plan["resources"]}
        self._by_urn = {r["urn"]: r for r in plan["resources"]}
        self.names = display_names(r["type"] for r in plan["resources"])

    def children(self, urn: str) -> list[dict[str, Any]]:
        return list(self._by_parent.get(urn, []))

    def parent_of(self, urn: str) -> dict[str, Any] | None:
        """The resource whose child `urn` is (None: a top-level resource, or not in the plan)."""
        r = self._by_urn.get(urn)
        return self._by_urn.get(r["parent"]) if r else None

    def descendants(self, urn: str) -> list[dict[str, Any]]:
        out = []
        for r in self.children(urn):
            out.append(r)
            out.extend(self.descendants(r["urn"]))
        return out

    def of_type(self, rs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
        found = [r for r in rs if r["type"] == type_]
        if self.reads is not None:
            for parent in {r["parent"] for r in rs}:
                key = (self._types.get(parent, "?"), type_)
                self.reads.children[key] = self.reads.children.get(key, False) or bool(found)
        return found

    def subnet_azs(self) -> dict[str, str]:
        """Subnet id -> AZ: of the subnets the plan creates, and of an existing VPC's subnets."""
        subnets = [r for r in self.all if r["type"] == "aws:ec2/subnet:Subnet"]
        azs = {r["id"]: r["inputs"].get("availabilityZone", "?") for r in subnets}
        for r in (r for r in self.all if r["type"] == component_type("infra", "Network")):
            for key in ("privateSubnetIds", "publicSubnetIds"):
                azs.update({sid: az for az, sid in (r["inputs"].get(key) or {}).items()})
        return azs

    @property
    def all(self) -> list[dict[str, Any]]:
        return list(self.plan["resources"])

    def name(self, type_: str) -> str:
        return self.names.get(type_) or display_names([type_])[type_]


OWNERS = {"eks": "pulumi-eks"}
"""Packages named by the project that publishes them (`eks:index:Cluster` is pulumi-eks's)."""


def display_names(types: Iterable[str]) -> dict[str, str]:
    """Type token -> the name the table shows: its last part (`Subnet`); a provider as
    `<package> provider`; where two types share a last part, each but the project's own says
    whose it is (`Cluster` ours, `Cluster (pulumi-eks)`, `Cluster (aws:eks)`)."""
    short: dict[str, str] = {}
    for t in set(types):
        short[t] = f"{t.split(':')[-1]} provider" if t.startswith("pulumi:providers:") else t.split(":")[-1]
    shared = defaultdict(list)
    for t, s in short.items():
        shared[s].append(t)
    names = dict(short)
    for s, ts in shared.items():
        for t in ts if len(ts) > 1 else ():
            package, module = t.split(":")[0], t.split(":")[1].split("/")[0]
            if package != PROJECT:
                owner = OWNERS.get(package) if module == "index" else None
                names[t] = f"{s} ({owner or f'{package}:{module}'})"
    return names
