"""Snapshots of your own stacks (URNs, Kubernetes objects) that `make test` holds them to.

    python -m tools.snapshot --stack NAME [--check]
    make snapshot STACK=NAME

The example stacks (examples/) are held to tests/golden/<stack>/ by the tests themselves. Your
stacks (`Pulumi.<name>.yaml` at the root) are not test subjects until you ask:
`make snapshot STACK=prod-aws` plans your stack offline and writes tests/snapshots/<STACK>/:
`urns.txt` (every resource's URN, its identity in the Pulumi state: a URN that changes is a
delete and a re-create of the live resource unless it carries an alias) and one YAML file per
Kubernetes object the stack renders. Commit the folder; from then on `make test` plans the
stack and fails on any difference (tests/plan/test_team_snapshots.py), but a URN gone that a
resource of the plan now aliases (`pulumi.Alias`: the same live resource, renamed). After a deliberate
change, run it again and review the diff; delete the folder to stop. `--check` compares
without writing. Exit 0; 1 when `--check` finds a difference (one line each); 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from config import ConfigError
from config.stackfile import UsageError, read_stack_file
from facts import names
from tools import cli, plan

SNAPSHOTS = cli.ROOT / "tests" / "snapshots"
"""One folder per stack of yours that the tests hold (the examples' are in tests/golden)."""
URNS = "urns.txt"
MAX_LINES = 20
"""Lines of differences shown; the rest is counted."""


def urns_text(planned: dict[str, Any]) -> str:
    """Every URN of a plan, sorted, one a line."""
    return "".join(f"{urn}\n" for urn in sorted(r["urn"] for r in planned["resources"]))


def aliased(planned: dict[str, Any]) -> dict[str, str]:
    """Every alias of a plan's resources -> the URN of the resource that has it (the plan JSON
    records a resource's aliases as URNs, those inherited from its parent's included)."""
    return {alias: r["urn"] for r in planned["resources"] for alias in r.get("aliases") or ()}


def unkept(earlier: Iterable[str], planned: dict[str, Any]) -> list[str]:
    """The URNs of an earlier plan whose live resource `pulumi up` would not keep, one line each:
    neither a URN of `planned` nor an alias of one of its resources (deleted, and re-created if
    it has a new URN); or claimed by two resources (the engine refuses the update)."""
    current = {r["urn"] for r in planned["resources"]}
    claims: dict[str, set[str]] = {}
    for r in planned["resources"]:
        for alias in r.get("aliases") or ():
            claims.setdefault(alias, set()).add(r["urn"])
    lines = []
    for urn in sorted(set(earlier)):
        by = claims.get(urn, set()) | ({urn} if urn in current else set())
        if not by:
            lines.append(f"URN gone (a deleted live resource: no resource has it or aliases it): {urn}")
        elif len(by) > 1:
            lines.append(f"URN claimed by {len(by)} resources (the engine refuses the update): {urn}: {sorted(by)}")
    return lines


def object_files(planned: dict[str, Any]) -> dict[str, str]:
    """The Kubernetes objects of a plan as YAML files: `<kind>-<name>.yaml`; an object of a team's
    namespace (where the same names recur, one per team) is `<kind>-<namespace>-<name>.yaml`."""
    out: dict[str, str] = {}
    for obj in plan.kubernetes_objects(planned):
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace")
        where = f"{namespace}-" if namespace not in (None, names.WORKLOADS_NAMESPACE) else ""
        out[f"{obj['kind'].lower()}-{where}{meta.get('name')}.yaml"] = yaml.safe_dump(obj, sort_keys=True)
    return out


def snapshot_files(planned: dict[str, Any]) -> dict[str, str]:
    """What a snapshot folder holds: `urns.txt` and the object files."""
    return {URNS: urns_text(planned), **object_files(planned)}


def snapshot_dir(stack: str) -> Path:
    return SNAPSHOTS / stack


def held_stacks() -> list[str]:
    """The stacks of yours that have a snapshot folder."""
    return sorted(p.name for p in SNAPSHOTS.iterdir() if p.is_dir()) if SNAPSHOTS.is_dir() else []


def differences(expected: dict[str, str], folder: Path, aliases: Mapping[str, str] | None = None) -> list[str]:
    """What differs between a snapshot folder and the files it should hold, one line each; a URN
    gone that a resource now aliases (`aliases`: alias -> its resource's URN) is that resource,
    renamed: neither it nor its new URN is a difference."""
    found = {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()} if folder.is_dir() else {}
    lines = []
    old, new = set(found.get(URNS, "").splitlines()), set(expected[URNS].splitlines())
    renamed = {u: (aliases or {})[u] for u in old - new if u in (aliases or {})}
    lines += [
        f"URN gone (a deleted live resource unless it has an alias): {u}" for u in sorted(old - new - set(renamed))
    ]
    lines += [f"URN new: {u}" for u in sorted(new - old - set(renamed.values()))]
    for name in sorted((set(found) | set(expected)) - {URNS}):
        if name not in expected:
            lines.append(f"object gone: {name}")
        elif name not in found:
            lines.append(f"object new: {name}")
        elif found[name] != expected[name]:
            lines.append(f"object changed: {name}")
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more"]
    return lines


def team_stack_file(stack: str) -> Path:
    """Your `Pulumi.<stack>.yaml` at the root; an example is refused (the tests hold those already)."""
    path = cli.find_stack(stack).path
    if path in cli.project_stacks().values():
        raise UsageError(
            f"{stack}: an example ({cli.shown(path)}); the tests hold the examples to tests/golden already"
            " (UPDATE_GOLDEN=1 regenerates them). A snapshot is for a stack of yours at the root"
        )
    return path


def plan_of(stack: str) -> dict[str, Any]:
    """The offline plan of your stack (a layered one on the plans of the stacks beside it)."""
    path = team_stack_file(stack)
    return plan.run(read_stack_file(path), stack, path.parent)


def check(stack: str) -> list[str]:
    """The differences between your stack's plan and its snapshot; [] when it holds."""
    folder = snapshot_dir(stack)
    if not (cli.TEAM_DIR / f"Pulumi.{stack}.yaml").is_file():
        return [
            f"{cli.shown(folder)} holds a snapshot of {stack}, which has no Pulumi.{stack}.yaml at the root:"
            " restore the stack file or delete the folder"
        ]
    if not folder.is_dir():
        return [f"no snapshot in {cli.shown(folder)}/: make snapshot STACK={stack} writes one"]
    planned = plan_of(stack)
    return differences(snapshot_files(planned), folder, aliased(planned))


def write(stack: str) -> str:
    """(Re)write your stack's snapshot folder; return what was written (one line)."""
    files = snapshot_files(plan_of(stack))
    folder = snapshot_dir(stack)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file() and old.name not in files:
            old.unlink()
    for name, text in files.items():
        (folder / name).write_text(text)
    return (
        f"wrote {cli.shown(folder)}/ ({len(files[URNS].splitlines())} URNs, {len(files) - 1} Kubernetes objects);"
        f" commit it: make test now holds {stack} to it"
    )


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.snapshot", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--stack", required=True, help="your stack: Pulumi.NAME.yaml at the root")
    parser.add_argument("--check", action="store_true", help="compare with the snapshot, write nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        team_stack_file(args.stack)
        if not args.check:
            print(write(args.stack), file=stderr)
            return 0
        problems = check(args.stack)
    except (UsageError, ConfigError) as e:
        return cli.bad_input(e, stderr)
    except Exception as e:  # noqa: BLE001 - as tools.plan: any other failure is exit 1, no traceback
        print(f"error: the program failed under mocks: {type(e).__name__}: {e}", file=stderr)
        return 1
    for line in problems:
        print(f"{args.stack}: {line}", file=stderr)
    if not problems:
        print(f"{args.stack}: matches {cli.shown(snapshot_dir(args.stack))}/", file=stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
