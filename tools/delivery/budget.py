"""How long a stack's `pulumi up` can wait at worst, from its offline plan.

Every wait in the chain must end before what waits on it: an awaited object's timeout before
the CI job's `timeout-minutes`, the job before the runner's CodeBuild build timeout (the
runner) or the OIDC session (GitHub-hosted), each before the platform limit above it. A runner
killed mid-update leaves the stack's lock and pending operations behind (pulumi/pulumi
pkg/backend/diy/lock.go): every later deploy of that stack fails until someone cancels it.

The bound of one resource is its create timeout (tests/upstream/pulumi-kubernetes-4.32.0-await.yaml,
tests/upstream/terraform-provider-aws-create-timeouts.yaml):
- Kubernetes objects (pulumi-kubernetes await.go, metadata/overrides.go): the resource's
  customTimeouts, else `pulumi.com/timeoutSeconds`, else 10 minutes; nothing for
  `pulumi.com/skipAwait: "true"`. Helm releases: `timeout`, else 300 s, nothing with skipAwait.
- AWS resources: the provider's default create timeout of the type (terraform-provider-aws,
  which pulumi-aws bridges); OTHER_AWS_SECONDS for a type without one.
The stack's bound is the longest chain of dependencies, each resource after all it depends on
(a dependency on a component waits for every resource under it, and a resource under a component
also waits for what the component depends on: a remote component such as pulumi-eks's Cluster
creates its children once its inputs are known).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from facts import awaits

KUBERNETES_DEFAULT_SECONDS = 600
HELM_RELEASE_DEFAULT_SECONDS = 300
AWS_CREATE_TIMEOUTS = {
    "aws:eks/cluster:Cluster": 30 * 60,
    "aws:eks/nodeGroup:NodeGroup": 60 * 60,
    "aws:eks/addon:Addon": 20 * 60,
    "aws:fsx/lustreFileSystem:LustreFileSystem": 30 * 60,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": 10 * 60,
    "aws:ec2/natGateway:NatGateway": 10 * 60,
    "aws:ec2/subnet:Subnet": 10 * 60,
}
OTHER_AWS_SECONDS = 10 * 60
"""A type whose default timeout is not recorded: the longest default of the EC2 network types
read (subnet, NAT gateway); API calls without a timeout return within the provider's retries."""
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def create_bound_seconds(resource: Mapping[str, Any]) -> int:
    """The longest `pulumi up` can wait for this resource's create."""
    type_, inputs = resource["type"], resource.get("inputs") or {}
    if not resource.get("custom") or type_.startswith("pulumi:providers:"):
        return 0
    if type_ == HELM_RELEASE:
        return 0 if inputs.get("skipAwait") else int(inputs.get("timeout") or HELM_RELEASE_DEFAULT_SECONDS)
    if type_.startswith("kubernetes:"):
        if awaits.skips_await(inputs):
            return 0
        return awaits.timeout_seconds(inputs) or KUBERNETES_DEFAULT_SECONDS
    if type_.startswith("aws:"):
        return AWS_CREATE_TIMEOUTS.get(type_, OTHER_AWS_SECONDS)
    return OTHER_AWS_SECONDS


def worst_case(plan: Mapping[str, Any]) -> tuple[int, list[str]]:
    """The longest chain of create bounds in the plan: (seconds, the chain's resource names)."""
    resources = {r["urn"]: r for r in plan["resources"]}
    children: dict[str, list[str]] = {}
    for urn, r in resources.items():
        if r.get("parent"):
            children.setdefault(r["parent"], []).append(urn)

    def custom_under(urn: str) -> list[str]:
        r = resources.get(urn)
        if r is None:
            return []
        if r.get("custom"):
            return [urn]
        return [u for c in children.get(urn, []) for u in custom_under(c)]

    def waits_for(urn: str) -> list[str]:
        deps, parent = list(resources[urn].get("dependencies") or []), resources[urn].get("parent")
        while parent in resources:
            deps += resources[parent].get("dependencies") or []
            parent = resources[parent].get("parent")
        return deps

    @cache
    def longest(urn: str) -> tuple[int, tuple[str, ...]]:
        best: tuple[int, tuple[str, ...]] = (0, ())
        for dep in waits_for(urn):
            for d in custom_under(dep):
                if d != urn:
                    best = max(best, longest(d))
        own = create_bound_seconds(resources[urn])
        return best[0] + own, (*best[1], resources[urn]["name"]) if own else best[1]

    chains = [longest(u) for u, r in resources.items() if r.get("custom")]
    seconds, names = max(chains, default=(0, ()))
    return seconds, list(names)


# --------------------------------------------------------------------------- what waits on the chain

SETUP_MINUTES = 15
"""A deploy job's own steps around `pulumi up`: checkout, virtualenv, CLI and plugins, the plan
artifact, `tools.images check`, and Pulumi's own work between the awaited creates."""
RUNNER_START_MINUTES = 10
"""From a runner build's start to its job's start: provisioning in the VPC, runner registration."""
PREVIEW_JOB_MINUTES = 45
"""`timeout-minutes` of every preview and drift job (the workflows hold the same number)."""
GITHUB_HOSTED_JOB_MINUTES = 6 * 60
"""GitHub Actions limits: a job on a GitHub-hosted runner runs at most 6 hours."""
SELF_HOSTED_JOB_MINUTES = 5 * 24 * 60
"""GitHub Actions limits: a job on a self-hosted runner runs at most 5 days."""
GITHUB_TOKEN_MINUTES = 24 * 60
"""A job's GITHUB_TOKEN expires when the job ends or after 24 hours (GitHub Actions docs)."""
DEPLOY_ROLE_MAX_SESSION_SECONDS = 4 * 3600
"""MaxSessionDuration of the aws-layer deploy role (ci/aws/README.md creates it with this): the
longest session `role-duration-seconds` may ask for (IAM AssumeRoleWithWebIdentity)."""


def job_minutes(chain_seconds: int) -> int:
    """`timeout-minutes` of the deploy job whose `pulumi up` waits at most `chain_seconds`."""
    return -(-chain_seconds // 60) + SETUP_MINUTES


def session_seconds(job: int) -> int:
    """`role-duration-seconds` for a job of `job` minutes: the credentials outlive the job, so
    its `pulumi up` never loses them half-way (an expired session cannot even release the lock)."""
    return job * 60
