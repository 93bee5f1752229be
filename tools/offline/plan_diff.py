"""What `pulumi up` would do from one offline plan to another: diff the two plans the way a real
update goes (`make diff` and the day-2 tests, tests/plan/test_day2_*.py, read it).

A resource is matched by URN, or by one of the new resource's aliases (the engine takes a state
entry found under an alias as the same resource). Each resource then is created, deleted,
updated, replaced or left alone; a replacement is decided by the provider's replace-forcing
inputs (facts/replacements.py: terraform-provider-aws's ForceNew attributes as pulumi-aws bridges
them, pulumi-kubernetes's forceNew fields), and runs
create-before-delete unless the provider or the resource's own option says delete first. A
replaced resource gets a new id: every input that held the old id changes too, so replacements
cascade (a subnet replaced replaces the node group and the file system in it). `protect` on the
deployed resource blocks its delete or replacement: the engine stops the update there.

Mocks give each resource an id derived from its name, so the cascade is computed here from the
ids the plan JSON carries. A changed input of a type whose replace-forcing inputs were never
read from its source raises `NoFacts` (strict, the tests) or is an update marked `unknown` (the
command): no verdict without the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from facts import replacements

COMPUTED = "<computed>"


class NoFacts(Exception):
    """A resource changed whose type's replace-forcing inputs were not read from upstream."""


@dataclass(frozen=True)
class Step:
    """What the update does to one resource."""

    urn: str
    op: str
    """create | delete | update | replace | same"""
    type: str
    changed: tuple[str, ...] = ()
    """The input paths that changed (an update) or that force the replacement (a replace)."""
    delete_first: bool = False
    """A replacement that deletes the deployed resource before it creates the new one."""
    protected: bool = False
    """The deployed resource is protected: a delete or replacement of it stops the update."""
    unknown: bool = False
    """An update of a type whose replace-forcing inputs were never read: it may be a replacement."""

    @property
    def blocked(self) -> bool:
        return self.protected and self.op in ("delete", "replace")


@dataclass
class Update:
    """The steps of one `pulumi up` from the `before` plan (deployed) to the `after` plan."""

    steps: dict[str, Step] = field(default_factory=dict)

    def of(self, op: str) -> dict[str, Step]:
        return {u: s for u, s in self.steps.items() if s.op == op}

    def named(self, name_part: str) -> Step:
        """The one step whose URN ends in `::<name_part>`."""
        (step,) = [s for u, s in self.steps.items() if u.endswith(f"::{name_part}")]
        return step

    @property
    def blocked(self) -> list[str]:
        return sorted(u for u, s in self.steps.items() if s.blocked)

    def touched(self) -> dict[str, Step]:
        return {u: s for u, s in self.steps.items() if s.op != "same"}


# --------------------------------------------------------------------------- input paths


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths of an input value (lists keep their order as `[i]`)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def under(path: str, prefixes: Iterable[str]) -> str | None:
    """The prefix (dotted, list indexes ignored) that `path` lies under, if any."""
    bare = "".join(part.split("[")[0] + "." for part in path.split(".")).rstrip(".")
    for p in prefixes:
        if bare == p or bare.startswith(p + "."):
            return p
    return None


def conflicting_creates(
    update: Update, before: Mapping[str, Any], after: Mapping[str, Any], type_: str, key: str
) -> list[str]:
    """Creates (and create-before-delete replacements) of a resource whose `key` input names what
    a deployed resource still holds at that moment: EKS access entries per principal, names that
    must be unique. A deployed resource frees its value only when deleted first (a plain delete
    runs at the end of the update)."""
    olds = {r["urn"]: r for r in before["resources"] if r["type"] == type_}
    news = {r["urn"]: r for r in after["resources"] if r["type"] == type_}
    held = {}
    for urn, r in olds.items():
        step = update.steps.get(urn)
        freed_first = step is not None and step.op == "replace" and step.delete_first
        if key in r["inputs"] and not freed_first:
            held[urn] = r["inputs"][key]
    out = []
    for urn, s in update.steps.items():
        if urn in news and (s.op == "create" or (s.op == "replace" and not s.delete_first)):
            value = news[urn]["inputs"].get(key)
            if value is not None and value in held.values():
                out.append(f"{urn}: {key}={value} is still held")
    return sorted(out)


def changed_paths(old: Mapping[str, Any], new: Mapping[str, Any], new_ids: Mapping[str, str]) -> set[str]:
    """Leaf paths whose value differs, or that held the id of a resource being replaced."""
    a, b = _flatten(old), _flatten(new)
    # A value only the real component knows (tools.offline.remote_components.COMPUTED) is not compared.
    out = {p for p in a.keys() | b.keys() if a.get(p) != b.get(p) and COMPUTED not in (a.get(p), b.get(p))}
    for p, v in b.items():
        if isinstance(v, str) and any(old_id in v for old_id in new_ids):
            out.add(p)
    return out


# --------------------------------------------------------------------------- replacement rules


def _kubernetes_kind(r: Mapping[str, Any]) -> str | None:
    inputs = r["inputs"]
    return str(inputs["kind"]) if r["type"].startswith("kubernetes:") and "kind" in inputs else None


def forcing(r: Mapping[str, Any], old: Mapping[str, Any], paths: set[str]) -> tuple[str, ...]:
    """The changed paths that force replacing `r` (after) over `old` (deployed)."""
    kind = _kubernetes_kind(r)
    if kind is not None:
        rules = [*replacements.KUBERNETES_FORCE_NEW["every_kind"], *replacements.KUBERNETES_FORCE_NEW.get(kind, [])]
        # The resource's own replaceOnChanges option (`[*]` any element, as `under` ignores indexes).
        rules += [p.replace("[*]", "") for p in r.get("replaceOnChanges") or []]
        return tuple(sorted({p for p in paths if under(p, rules)}))
    t = r["type"]
    if t in replacements.AWS_FORCE_NEW:
        rules = replacements.AWS_FORCE_NEW[t]
        hits = {p for p in paths if under(p, rules)}
        for key in replacements.AWS_FORCE_NEW_IF_DECREASED.get(t, []):
            before, after = old["inputs"].get(key), r["inputs"].get(key)
            if key in paths and isinstance(before, int) and isinstance(after, int) and after < before:
                hits.add(key)
        return tuple(sorted(hits))
    if not r["custom"] or t.startswith(("pulumi:providers:", "pulumi:pulumi:")):
        return ()
    raise NoFacts(f"{t}: inputs {sorted(paths)} changed; its replace-forcing inputs are not in facts/replacements.py")


def deletes_first(r: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Delete-before-create: the resource's own option, else the provider's rule."""
    if r.get("deleteBeforeReplace") is not None:
        return bool(r["deleteBeforeReplace"])
    if _kubernetes_kind(r) is not None:
        meta_new, meta_old = r["inputs"].get("metadata", {}), old["inputs"].get("metadata", {})
        named = "name" in meta_new and "generateName" not in meta_new
        same = (meta_new.get("name"), meta_new.get("namespace")) == (meta_old.get("name"), meta_old.get("namespace"))
        return named and same
    autonamed = replacements.AWS_AUTONAMED.get(r["type"])
    return bool(autonamed and autonamed in r["inputs"])


# --------------------------------------------------------------------------- the update


def _as_sets(r: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs with set-typed lists sorted: the provider sees no change in a new order."""
    inputs = dict(r["inputs"])
    for key in replacements.AWS_SETS.get(r["type"], []):
        if isinstance(inputs.get(key), list):
            inputs[key] = sorted(inputs[key], key=str)
    return inputs


def _ignored(r: Mapping[str, Any], paths: set[str]) -> set[str]:
    return {p for p in paths if not under(p, r.get("ignoreChanges") or [])}


def diff(before: Mapping[str, Any], after: Mapping[str, Any], strict: bool = True) -> Update:
    """The steps of `pulumi up` from the deployed `before` plan to the `after` plan; `strict`
    raises NoFacts for a changed type without replacement rules, else marks its update `unknown`."""
    olds = {r["urn"]: r for r in before["resources"]}
    news = {r["urn"]: r for r in after["resources"]}
    match: dict[str, str] = {}
    for urn, r in news.items():
        for candidate in (urn, *(r.get("aliases") or [])):
            if candidate in olds and candidate not in match.values():
                match[urn] = candidate
                break
    replaced_ids: dict[str, str] = {}
    update = Update()
    # Replacements give new ids, which change the inputs that held them: repeat until stable.
    while True:
        steps: dict[str, Step] = {}
        for urn, r in news.items():
            if urn not in match:
                steps[urn] = Step(urn, "create", r["type"])
                continue
            old = olds[match[urn]]
            paths = _ignored(r, changed_paths(_as_sets(old), _as_sets(r), replaced_ids))
            if not paths:
                steps[urn] = Step(urn, "same", r["type"], protected=old["protect"])
                continue
            try:
                force = forcing(r, old, paths)
            except NoFacts:
                if strict:
                    raise
                steps[urn] = Step(
                    urn, "update", r["type"], tuple(sorted(paths)), protected=old["protect"], unknown=True
                )
                continue
            if force:
                steps[urn] = Step(urn, "replace", r["type"], force, deletes_first(r, old), old["protect"])
            else:
                steps[urn] = Step(urn, "update", r["type"], tuple(sorted(paths)), protected=old["protect"])
        for urn, old in olds.items():
            if urn not in match.values():
                steps[urn] = Step(urn, "delete", old["type"], protected=old["protect"])
        ids = {
            str(olds[match.get(u, u)]["id"]): u
            for u, s in steps.items()
            if s.op == "replace" and olds[match.get(u, u)].get("id")
        }
        if ids == replaced_ids:
            update.steps = steps
            return update
        replaced_ids = ids
