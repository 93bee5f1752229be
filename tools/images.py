"""Whether the images a stack's runs use are built, and a rebuild on demand.

    python -m tools.images check   --stack NAME    # exit 1 at once when an image will not come
    python -m tools.images rebuild --stack NAME [--image REPOSITORY]

The stack's aws layer builds each image in AWS CodeBuild when its source is uploaded
(infra/images.py); a run's image-check Job then waits for the push. `check` says at once what
that Job would otherwise wait hours to find out: for each image of the stack (its runs' images;
an aws-layer stack: the images it builds), pushed (ok), building or about to be retried by
CodeBuild (ok: the Job waits), or failed with no retry left, or never built (exit 1, naming the
build, its log and the two ways to build it again). The deploy workflow runs it before
`pulumi up` of a runs-layer stack. `rebuild` starts the image's build now (the project builds
the source of the current tag, and skips a tag already pushed).

Reads the stack files (Pulumi.<stack>.yaml, found as every command finds it: yours at the root,
else the example in examples/; and the stacks below it, beside it) for the cluster name and
region; calls ECR DescribeImages and CodeBuild ListBuildsForProject, BatchGetBuilds, StartBuild
with the credentials of the environment. Exit 0 ok, 1 an image will not come, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from config import ConfigError, StackConfig, parse_stack_values
from config.stackfile import UsageError, read_stack_file
from facts.images import IMAGES
from facts.names import image_project, image_repository
from stack import built_repositories
from tools import cli

FAILED = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
"""Build states with no push to come (botocore codebuild StatusType; SUCCEEDED, IN_PROGRESS are the others)."""
RECENT_BUILDS = 20


@dataclass(frozen=True)
class Wanted:
    """One image a stack needs: its repository key, tag, ECR repository and build project."""

    repo: str
    tag: str
    repository: str
    project: str
    aws_stack: str


def _config(stack: str, stack_dir: Path) -> StackConfig:
    try:
        return parse_stack_values(read_stack_file(stack_dir / f"Pulumi.{stack}.yaml"))
    except ConfigError as e:
        raise UsageError("\n".join(f"{stack}: invalid stack config: {p}" for p in e.problems)) from None


def wanted(stack: str, stack_dir: Path | None = None) -> tuple[str, list[Wanted]]:
    """The region and the images `stack` needs, named as its aws layer builds them (`stack_dir`:
    where its file is; by default where `--stack` finds it, tools.cli)."""
    stack_dir = stack_dir or cli.find_stack(stack).path.parent
    cfg = _config(stack, stack_dir)
    repos = built_repositories(cfg)
    bottom, seen = stack, [stack]
    while cfg.layer in ("cluster", "runs"):
        bottom = cfg.lower_stack_name
        if bottom in seen or not (stack_dir / f"Pulumi.{bottom}.yaml").is_file():
            raise UsageError(f"{stack}: lowerStack {cfg.lower_stack}: no stack file Pulumi.{bottom}.yaml beside it")
        seen.append(bottom)
        cfg = _config(bottom, stack_dir)
    cluster = cfg.cluster.name
    return cfg.region, [
        Wanted(r, IMAGES[r].tag, image_repository(cluster, r), image_project(cluster, r), bottom)
        for r in repos
        if r in IMAGES
    ]


def _is_pushed(ecr: Any, w: Wanted) -> bool:
    try:
        ecr.describe_images(repositoryName=w.repository, imageIds=[{"imageTag": w.tag}])
    except ecr.exceptions.ImageNotFoundException:
        return False
    except ecr.exceptions.RepositoryNotFoundException:
        raise UsageError(
            f"{w.repo}: ECR repository {w.repository} does not exist: deploy the aws layer ({w.aws_stack}) first"
        ) from None
    return True


def _builds_of(codebuild: Any, w: Wanted) -> list[dict[str, Any]]:
    """The project's recent builds of this tag, newest first."""
    # A project without builds answers without `ids` (the model's list has at least one member).
    answer = codebuild.list_builds_for_project(projectName=w.project, sortOrder="DESCENDING")
    ids = answer.get("ids", [])[:RECENT_BUILDS]
    if not ids:
        return []
    builds = {b["id"]: b for b in codebuild.batch_get_builds(ids=ids)["builds"]}
    out = []
    for i in ids:
        env = builds.get(i, {}).get("environment", {}).get("environmentVariables", [])
        if {"name": "IMAGE_TAG", "value": w.tag} in [{"name": v["name"], "value": v["value"]} for v in env]:
            out.append(builds[i])
    return out


def how_to_rebuild(w: Wanted) -> str:
    return (
        f"build it again: `python -m tools.images rebuild --stack {w.aws_stack} --image {w.repo}`, or through a"
        f" reviewed deploy: raise registry.repositories.{w.repo}.rebuild by one in Pulumi.{w.aws_stack}.yaml"
    )


def status(ecr: Any, codebuild: Any, w: Wanted) -> tuple[bool, str]:
    """(fine, what to say) for one image."""
    name = f"{w.repository}:{w.tag}"
    if _is_pushed(ecr, w):
        return True, f"{name}: pushed"
    builds = _builds_of(codebuild, w)
    if not builds:
        return False, (
            f"{name}: not pushed and never built by {w.project}: deploy the aws layer ({w.aws_stack}), whose"
            f" `pulumi up` uploads images/{w.repo}/ and so starts the build, or {how_to_rebuild(w)}"
        )
    latest = builds[0]
    state = latest.get("buildStatus", "IN_PROGRESS")
    if state == "IN_PROGRESS":
        return True, f"{name}: building ({latest['id']}, phase {latest.get('currentPhase', '?')})"
    if state in FAILED and (latest.get("autoRetryConfig") or {}).get("nextAutoRetry"):
        return (
            True,
            f"{name}: build {latest['id']} {state}; CodeBuild retries it"
            f" ({latest['autoRetryConfig']['nextAutoRetry']})",
        )
    log = (latest.get("logs") or {}).get("deepLink", "its CloudWatch log")
    if state in FAILED:
        return False, f"{name}: build {latest['id']} {state} and no retry is left; read {log}; then {how_to_rebuild(w)}"
    return False, f"{name}: build {latest['id']} {state} but the tag is not in {w.repository}; {how_to_rebuild(w)}"


def main(argv: Sequence[str] | None = None, stdout: Any = None, stderr: Any = None, session: Any = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m tools.images", description=__doc__.split("\n")[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command, text in (("check", "fail at once when an image will not come"), ("rebuild", "start a build now")):
        p = sub.add_parser(command, help=text)
        p.add_argument("--stack", required=True, help="a stack: the images its runs use (aws layer: it builds)")
        p.add_argument("--stack-dir", type=Path, help=argparse.SUPPRESS)
        if command == "rebuild":
            p.add_argument("--image", help="one repository key (default: every image of the stack)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        if args.stack_dir is None:
            found = cli.find_stack(args.stack)
            if found.note():
                print(found.note(), file=stderr)
            args.stack_dir = found.path.parent
        region, images = wanted(args.stack, args.stack_dir)
        if getattr(args, "image", None):
            images = [w for w in images if w.repo == args.image]
            if not images:
                raise UsageError(f"--image {args.image}: {args.stack} builds or uses no such image")
        session = session or boto3.session.Session(region_name=region)
        codebuild = session.client("codebuild")
        if args.command == "rebuild":
            for w in images:
                build = codebuild.start_build(projectName=w.project)["build"]
                print(f"{w.repository}:{w.tag}: started {build['id']}", file=stdout)
            return 0
        ecr, failed = session.client("ecr"), 0
        for w in images:
            fine, line = status(ecr, codebuild, w)
            print(line, file=stdout if fine else stderr)
            failed += not fine
    except UsageError as e:
        print(f"error: {e}", file=stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
