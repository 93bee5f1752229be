"""Which CI job previews, deploys and drift-checks each stack, and on which runner.

    python -m tools.ci stacks --stacks '["prod-aws", "prod-cluster"]' [--changed-files FILE] [--format json|github]

The workflows ask this command instead of deciding themselves, so the routing is tested
against the stack files (tests/repo/test_ci_routing.py):
- an `aws`-layer stack needs no cluster access: a GitHub-hosted runner;
- a `cluster`- or `runs`-layer stack needs the private cluster API: the in-VPC CodeBuild runner
  declared by the aws stack under it (`ciRunner`), job label `codebuild-<project>-...`;
- an all-in-one stack needs both the AWS rights of the first and the reach of the second, which
  no runner has by design: it is for a workstation (the quick start), and CI refuses it.

Output: for each phase (`aws`, `cluster`, `runs`, and `in_vpc` = cluster + runs), a list of
`{"stack", "layer", "project"}` for a GitHub Actions matrix (`project`: the CodeBuild
project of the runner, empty for GitHub-hosted). Deploys run the phases in order. With
`--format github`, `<phase>=<json>` lines and `count=<stacks>` for `$GITHUB_OUTPUT`.
`--changed-files` (one path a line, e.g. `git diff --name-only`) keeps the stacks a change
touches: its own stack file, or every stack when the program, its requirements or the policy
pack change. Exit 0; 2 for a stack that cannot be routed (one line per problem).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from config import ConfigError, StackConfig, parse_stack_values
from config.stackfile import UsageError, read_stack_file
from facts.names import ci_runner_project
from tools.cli import ROOT

HOSTED_RUNNER = "ubuntu-24.04"
"""The GitHub-hosted runner of the jobs that need no cluster access."""
PHASES = ("aws", "cluster", "runs")
PROGRAM_PATHS = ("Pulumi.yaml", "requirements.txt", "__main__.py", "stack.py")
PROGRAM_DIRS = ("config/", "facts/", "infra/", "workloads/", "policy/", "tools/")
"""A change here may change what every stack declares."""


def _config(stack: str, stack_dir: Path) -> StackConfig:
    try:
        return parse_stack_values(read_stack_file(stack_dir / f"Pulumi.{stack}.yaml"))
    except ConfigError as e:
        raise UsageError("\n".join(f"{stack}: invalid stack config: {p}" for p in e.problems)) from None


def runner_project(stack: str, stack_dir: Path) -> str | None:
    """The CodeBuild runner project a stack's jobs run on; None for a GitHub-hosted runner."""
    cfg = _config(stack, stack_dir)
    if cfg.layer == "aws":
        return None
    if cfg.layer == "all":
        raise UsageError(
            f"{stack}: an all-in-one stack needs AWS rights and the private cluster API in one job, which no CI"
            " runner has; deploy it from a workstation, or split it into aws, cluster and runs stacks"
        )
    seen = [stack]
    while cfg.layer in ("cluster", "runs"):
        lower = cfg.lower_stack_name
        if lower in seen:
            raise UsageError(f"{stack}: lowerStack goes round in a circle: {' -> '.join([*seen, lower])}")
        seen.append(lower)
        if not (stack_dir / f"Pulumi.{lower}.yaml").is_file():
            raise UsageError(f"{stack}: lowerStack {cfg.lower_stack} has no stack file Pulumi.{lower}.yaml here")
        cfg = _config(lower, stack_dir)
    if not cfg.ci_runner.enabled:
        bottom = seen[-1]
        raise UsageError(
            f"{stack}: needs the private cluster API, but {bottom} declares no in-VPC runner; set"
            f" ciRunner.enabled and ciRunner.repository in Pulumi.{bottom}.yaml"
        )
    return ci_runner_project(cfg.cluster.name)


def touched(stacks: Sequence[str], changed: Sequence[str]) -> list[str]:
    """The stacks a change touches: by their own file, or all when the program changes."""
    program = any(p in PROGRAM_PATHS or p.startswith(PROGRAM_DIRS) for p in changed)
    if program:
        return list(stacks)
    return [s for s in stacks if f"Pulumi.{s}.yaml" in changed]


def route(stacks: Sequence[str], stack_dir: Path = ROOT) -> dict[str, list[dict[str, str]]]:
    """The matrix of each phase (and `in_vpc`, every stack that needs the cluster API)."""
    out: dict[str, list[dict[str, str]]] = {p: [] for p in PHASES}
    problems = []
    for stack in stacks:
        try:
            cfg = _config(stack, stack_dir)
            project = runner_project(stack, stack_dir)
        except UsageError as e:
            problems.append(str(e))
            continue
        out[cfg.layer].append({"stack": stack, "layer": cfg.layer, "project": project or ""})
    if problems:
        raise UsageError("\n".join(problems))
    out["in_vpc"] = out["cluster"] + out["runs"]
    return out


def _stack_list(text: str) -> list[str]:
    try:
        stacks = json.loads(text or "[]")
    except json.JSONDecodeError as e:
        raise UsageError(f"--stacks: not a JSON list of stack names: {e}") from None
    if not isinstance(stacks, list) or not all(isinstance(s, str) for s in stacks):
        raise UsageError('--stacks: expected a JSON list of stack names, e.g. ["prod-aws", "prod-cluster"]')
    return stacks


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.ci", description=__doc__.split("\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    stacks = sub.add_parser("stacks", help="route stacks to CI jobs and runners")
    stacks.add_argument("--stacks", required=True, help="JSON list of the stacks CI manages (vars.PULUMI_STACKS)")
    stacks.add_argument("--changed-files", type=Path, help="only the stacks these changed paths touch")
    stacks.add_argument("--format", choices=("json", "github"), default="json")
    stacks.add_argument("--stack-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        chosen = _stack_list(args.stacks)
        if args.changed_files is not None:
            chosen = touched(chosen, [p.strip() for p in args.changed_files.read_text().splitlines() if p.strip()])
        routes = route(chosen, args.stack_dir)
    except (UsageError, OSError) as e:
        print(f"error: {e}", file=stderr)
        return 2
    if args.format == "github":
        for phase, matrix in routes.items():
            print(f"{phase}={json.dumps(matrix)}", file=stdout)
        print(f"count={len(chosen)}", file=stdout)
    else:
        print(json.dumps(routes, indent=2), file=stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
