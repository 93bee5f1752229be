"""Which CI job previews, deploys and drift-checks each stack, on which runner, for how long.

    python -m tools.ci deployed --stacks '["prod-aws", "prod-cluster"]' --repo OWNER/REPO > deployed.json
    python -m tools.ci stacks --stacks '["prod-aws", "prod-cluster"]' [--since deployed.json [--head SHA]]
                              [--changed-files FILE] [--format json|github]

The workflows ask this command instead of deciding themselves, so the routing is tested
against the stack files (tests/repo/test_delivery.py):
- an `aws`-layer stack needs no cluster access: a GitHub-hosted runner, AWS credentials by OIDC;
- a `cluster`- or `runs`-layer stack needs the private cluster API: the in-VPC CodeBuild runners
  declared by the aws stack under it (`ciRunner`): `preview` (pull requests, drift) and `deploy`;
- an all-in-one stack needs both the AWS rights of the first and the reach of the second, which
  no runner has by design: it is for a workstation (the quick start), and CI refuses it.

Output: for each phase (`aws`, `cluster`, `runs`, and `in_vpc` = cluster + runs), a list of
`{"stack", "layer", "preview", "deploy", "timeout", "session"}` for a GitHub Actions matrix:
`preview` / `deploy` the CodeBuild project of each runner (empty for GitHub-hosted);
`timeout` the deploy job's `timeout-minutes`, derived from the longest chain of awaited creates
in the stack's offline plan (tools/delivery/budget.py); `session` the OIDC session of an aws-layer deploy.
A stack whose deploy cannot fit what waits on it (its runner's life, the job limits, the deploy
role's session) is refused, naming the key to change.

Which stacks: `--since` (the JSON `deployed` prints: each stack's last successfully deployed
commit) keeps the stacks changed between that commit and `--head`, and every stack never
deployed, so a merge whose own deploy was cancelled or failed is deployed by the next run.
`--changed-files` (one path a line) keeps the stacks those paths touch. A stack is touched by its
own stack file, by a change of the program (every stack), and by a change under `images/<repo>/`
(the aws stacks that build that image and the stacks whose runs use it); a change under
examples/ touches none (an example is nobody's deployed stack).
Exit 0; 2 for a stack that cannot be routed or deployed (one line per problem).

The stacks are a team's own, `Pulumi.<stack>.yaml` at the root of the checkout, where the jobs'
`pulumi preview --stack` and `pulumi up --stack` read them; a name that is only an example
(examples/) is refused, saying how to make it a stack of yours.
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
from stack import built_repositories
from tools.cli import ROOT
from tools.delivery import budget, deploys
from tools.plan import run as offline_plan

HOSTED_RUNNER = "ubuntu-24.04"
"""The GitHub-hosted runner of the jobs that need no cluster access."""
PHASES = ("aws", "cluster", "runs")
PROGRAM_PATHS = ("Pulumi.yaml", "requirements.txt", "__main__.py", "stack.py")
PROGRAM_DIRS = ("config/", "estimates/", "facts/", "infra/", "workloads/", "policy/", "tools/")
"""A change here may change what every stack declares."""
IMAGES_DIR = "images/"


def _stack_path(stack: str, stack_dir: Path) -> Path:
    path = stack_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file() and (stack_dir / "examples" / path.name).is_file():
        raise UsageError(
            f"{stack}: only the example examples/{path.name} exists; CI runs `pulumi preview --stack {stack}`,"
            f" which reads {path.name} at the root: copy the example there to make it a stack of yours"
            f" (make new-stack STACK={stack} FROM={stack})"
        )
    return path


def _config(stack: str, stack_dir: Path) -> StackConfig:
    try:
        return parse_stack_values(read_stack_file(_stack_path(stack, stack_dir)))
    except ConfigError as e:
        raise UsageError("\n".join(f"{stack}: invalid stack config: {p}" for p in e.problems)) from None


def aws_stack_under(stack: str, stack_dir: Path) -> tuple[str, StackConfig]:
    """The aws-layer stack under a cluster or runs stack, and its config."""
    cfg = _config(stack, stack_dir)
    if cfg.layer == "all":
        raise UsageError(
            f"{stack}: an all-in-one stack needs AWS rights and the private cluster API in one job, which no CI"
            " runner has; deploy it from a workstation, or split it into aws, cluster and runs stacks"
        )
    seen, bottom = [stack], stack
    while cfg.layer in ("cluster", "runs"):
        bottom = cfg.lower_stack_name
        if bottom in seen:
            raise UsageError(f"{stack}: lowerStack goes round in a circle: {' -> '.join([*seen, bottom])}")
        seen.append(bottom)
        if not _stack_path(bottom, stack_dir).is_file():
            raise UsageError(f"{stack}: lowerStack {cfg.lower_stack} has no stack file Pulumi.{bottom}.yaml beside it")
        cfg = _config(bottom, stack_dir)
    return bottom, cfg


def runner_projects(stack: str, stack_dir: Path) -> dict[str, str]:
    """The CodeBuild runner projects (`preview`, `deploy`) a stack's jobs run on; none for a
    GitHub-hosted runner."""
    bottom, cfg = aws_stack_under(stack, stack_dir)
    if bottom == stack:
        return {}
    if not cfg.ci_runner.enabled:
        raise UsageError(
            f"{stack}: needs the private cluster API, but {bottom} declares no in-VPC runner; set"
            f" ciRunner.enabled and ciRunner.repository in Pulumi.{bottom}.yaml"
        )
    return {kind: ci_runner_project(cfg.cluster.name, kind) for kind in ("preview", "deploy")}


def touched(stacks: Sequence[str], changed: Sequence[str], stack_dir: Path = ROOT) -> list[str]:
    """The stacks a change touches: their own file, every stack when the program changes, and the
    stacks that build or run an image whose folder changed."""
    if any(p in PROGRAM_PATHS or p.startswith(PROGRAM_DIRS) for p in changed):
        return list(stacks)
    images = {p.split("/")[1] for p in changed if p.startswith(IMAGES_DIR) and p.count("/") >= 2}
    return [s for s in stacks if f"Pulumi.{s}.yaml" in changed or images & set(_images_of(s, stack_dir))]


def _images_of(stack: str, stack_dir: Path) -> list[str]:
    """The image repositories a stack builds (aws layer) or whose tags its runs name."""
    try:
        return built_repositories(_config(stack, stack_dir))
    except UsageError:
        return []  # routing reports the stack's own problem


def since(stacks: Sequence[str], deployed: dict[str, str | None], head: str, stack_dir: Path) -> list[str]:
    """The stacks with changes not yet deployed: each stack's changes since its last deploy."""
    out = []
    for stack in stacks:
        changed = deploys.changed_since(deployed.get(stack), head, stack_dir)
        if changed is None or touched([stack], changed, stack_dir):
            out.append(stack)
    return out


def _deploy_budget(stack: str, layer: str, cfg_aws: StackConfig, aws_stack: str, stack_dir: Path) -> dict[str, int]:
    """The deploy job's `timeout-minutes` (and an aws-layer job's OIDC session), refused when
    what waits on the job would give up first."""
    chain, names = budget.worst_case(
        offline_plan(read_stack_file(stack_dir / f"Pulumi.{stack}.yaml"), stack, stack_dir)
    )
    minutes = budget.job_minutes(chain)
    what = (
        f"{stack}: its deploy job needs {minutes} min (awaits {' -> '.join(names) or 'nothing'} for {chain // 60} min"
    )
    if layer == "aws":
        session = budget.session_seconds(minutes)
        if minutes > budget.GITHUB_HOSTED_JOB_MINUTES:
            raise UsageError(
                f"{what}), more than the {budget.GITHUB_HOSTED_JOB_MINUTES} min a GitHub-hosted job may run"
            )
        if session > budget.DEPLOY_ROLE_MAX_SESSION_SECONDS:
            raise UsageError(
                f"{what}), more than the deploy role's MaxSessionDuration ({budget.DEPLOY_ROLE_MAX_SESSION_SECONDS} s,"
                " ci/aws/README.md): raise it there and in tools/delivery/budget.py"
            )
        return {"timeout": minutes, "session": session}
    runner = cfg_aws.ci_runner
    limit = min(budget.GITHUB_TOKEN_MINUTES, budget.SELF_HOSTED_JOB_MINUTES) - 1
    if minutes > limit:
        raise UsageError(
            f"workloads: {what}), more than a job may last ({limit} min: its GITHUB_TOKEN lives 24 h); shorten the"
            " runs' awaited steps or split the runs into more stacks"
        )
    if minutes + budget.RUNNER_START_MINUTES > runner.build_timeout_minutes:
        raise UsageError(
            f"ciRunner.buildTimeoutMinutes: {what}); the deploy runner of {aws_stack} lives"
            f" {runner.build_timeout_minutes} min: set at least {minutes + budget.RUNNER_START_MINUTES} in"
            f" Pulumi.{aws_stack}.yaml (CodeBuild allows up to 2160)"
        )
    if stack not in runner.stacks_written(cfg_aws.cluster.name):
        raise UsageError(
            f"ciRunner.deployStacks: the deploy runner of {aws_stack} may not write the state of {stack}; add it to"
            f" ciRunner.deployStacks in Pulumi.{aws_stack}.yaml"
        )
    if runner.preview_build_timeout_minutes < budget.PREVIEW_JOB_MINUTES + budget.RUNNER_START_MINUTES:
        raise UsageError(
            f"ciRunner.previewBuildTimeoutMinutes: preview and drift jobs run {budget.PREVIEW_JOB_MINUTES} min;"
            f" set at least {budget.PREVIEW_JOB_MINUTES + budget.RUNNER_START_MINUTES} in Pulumi.{aws_stack}.yaml"
        )
    return {"timeout": minutes}


def route(stacks: Sequence[str], stack_dir: Path = ROOT, *, budgets: bool = True) -> dict[str, list[dict[str, Any]]]:
    """The matrix of each phase (and `in_vpc`, every stack that needs the cluster API)."""
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in PHASES}
    problems = []
    for stack in stacks:
        try:
            projects = runner_projects(stack, stack_dir)
            cfg = _config(stack, stack_dir)
            entry: dict[str, Any] = {
                "stack": stack,
                "layer": cfg.layer,
                **{k: projects.get(k, "") for k in ("preview", "deploy")},
            }
            if budgets:
                aws_stack, cfg_aws = aws_stack_under(stack, stack_dir)
                entry |= _deploy_budget(stack, cfg.layer, cfg_aws, aws_stack, stack_dir)
        except (UsageError, ConfigError) as e:
            problems.append(str(e))
            continue
        out[cfg.layer].append(entry)
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.ci", description=__doc__.split("\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    stacks = sub.add_parser("stacks", help="route stacks to CI jobs and runners")
    stacks.add_argument("--stacks", required=True, help="JSON list of the stacks CI manages (vars.PULUMI_STACKS)")
    stacks.add_argument("--changed-files", type=Path, help="only the stacks these changed paths touch")
    stacks.add_argument("--since", type=Path, help="only the stacks changed since their last deploy (`deployed`)")
    stacks.add_argument("--head", default="HEAD", help="the commit to deploy or preview (with --since)")
    stacks.add_argument("--no-budget", action="store_true", help="route only (drift: no deploy job)")
    stacks.add_argument("--format", choices=("json", "github"), default="json")
    deployed = sub.add_parser("deployed", help="each stack's last successfully deployed commit (GitHub deployments)")
    deployed.add_argument("--stacks", required=True)
    deployed.add_argument("--repo", required=True, help="OWNER/REPO")
    for p in (stacks, deployed):
        # The checkout the workflow runs in: its stack files and its git history.
        p.add_argument("--stack-dir", type=Path, default=Path("."), help=argparse.SUPPRESS)
    return parser


def main(
    argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None, fetch: deploys.Fetch | None = None
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        chosen = _stack_list(args.stacks)
        if args.command == "deployed":
            print(
                json.dumps(deploys.last_deployed_all(fetch or deploys.github_fetch(), args.repo, chosen)), file=stdout
            )
            return 0
        if args.since is not None:
            chosen = since(chosen, json.loads(args.since.read_text()), args.head, args.stack_dir)
        if args.changed_files is not None:
            changed = [p.strip() for p in args.changed_files.read_text().splitlines() if p.strip()]
            chosen = touched(chosen, changed, args.stack_dir)
        routes = route(chosen, args.stack_dir, budgets=not args.no_budget)
    except (UsageError, OSError, json.JSONDecodeError) as e:
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
