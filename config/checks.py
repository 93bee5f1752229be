"""Rules that span config sections, one function each.

Each returns the problems it finds as `key.path: message` lines. The raw-dict rules read the
stack values defensively, so they still run (and are reported with the rest) when another
key is invalid; the others run on a validated `StackConfig`.

Runs and team quotas are checked against node groups as a `GroupView`: from `nodeGroups` in
an all-in-one stack, and from the lower layer's outputs in a layered one (`stack.py` calls
`runs_problems` and `team_problems` once it has read them).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pydantic.alias_generators import to_camel

from config.amis import release_problems
from config.aws import tag_problems
from config.base import did_you_mean
from config.checkpoints import GIB, STORAGE_SHARE
from config.layers import layer_problems
from config.names import (
    node_group_azs_in_vpc,
    node_group_names_unique,
    plain_secrets,
    run_name,
    run_objects,
    team_name,
    vpc_azs_in_region,
)
from config.serving import serving_problems
from config.stack import StackConfig
from config.stackfile import SECRET
from config.storage import StorageConfig
from config.teams import TeamConfig
from config.workloads import RECIPES, RunConfig, WorkloadConfig
from facts import eks_addons, instances, versions
from facts.names import CLUSTER_TAG, SYSTEM_NODE_GROUP


@dataclass(frozen=True)
class GroupView:
    """What the rules know of a node group, wherever it is declared."""

    name: str
    instance: instances.InstanceType
    nodes: int
    """desiredSize: the nodes running now (Kueue's quota)."""
    max_nodes: int
    """maxSize: the most nodes the group can be scaled to."""
    max_key: str
    """The key that sets `max_nodes`, for messages: `nodeGroups[0].maxSize`, or where the lower layer has it."""


Groups = Mapping[str, GroupView]
"""Node group name -> its view."""


def groups_of(cfg: StackConfig) -> dict[str, GroupView]:
    """The node groups a stack declares itself: the accelerated ones and the system node group
    (where CPU runs and the MPI launchers run)."""
    s = cfg.system_node_group
    return {
        **{
            ng.name: GroupView(ng.name, ng.instance, ng.desired_size, ng.max, f"nodeGroups[{i}].maxSize")
            for i, ng in enumerate(cfg.node_groups)
        },
        SYSTEM_NODE_GROUP: GroupView(SYSTEM_NODE_GROUP, s.instance, s.desired_size, s.max, "systemNodeGroup.maxSize"),
    }


RAW_RULES = (vpc_azs_in_region, node_group_names_unique, node_group_azs_in_vpc, layer_problems)


# --------------------------------------------------------------------------- training runs


def hugging_face_token(name: str, run: RunConfig, cfg: StackConfig) -> list[str]:
    """Recipes that download gated files need the token."""
    if not name or run.HUGGING_FACE_TOKEN_FOR is None or cfg.hugging_face_token is not None:
        return []
    return [
        f"huggingFaceToken: required by workloads.{name} ({run.RECIPE} {run.HUGGING_FACE_TOKEN_FOR});"
        " set it with `pulumi config set --secret huggingFaceToken hf_...`"
    ]


def known_node_group(key: str, wanted: str, groups: Groups) -> list[str]:
    if wanted in groups:
        return []
    known = ", ".join(groups) or "none are defined"
    return [f"{key}.nodeGroup: unknown node group {wanted!r}{did_you_mean(wanted, groups)}; node groups: {known}"]


CPU_RECIPES = [name for name, model in RECIPES.items() if model.RUNS_ON_CPU]


def accelerator_matches(key: str, run: RunConfig, ng: GroupView) -> list[str]:
    """A CPU recipe runs on the system node group (an accelerated node's taints keep its pods
    off); every other recipe needs an accelerated group, of its accelerator where it names one."""
    it = ng.instance
    cpu_group = it.accelerator is None
    if run.RUNS_ON_CPU or cpu_group:
        if cpu_group == run.RUNS_ON_CPU:
            return []
        if run.RUNS_ON_CPU:
            return [
                f"{key}.nodeGroup: recipe {run.RECIPE} trains on CPUs, on the system node group; {ng.name!r} runs"
                f" {it.name} ({it.accelerator_name}), whose taint keeps CPU pods off; use nodeGroup: system"
            ]
        return [
            f"{key}.nodeGroup: recipe {run.RECIPE} needs an accelerated node group; {ng.name!r} is the system node"
            f" group ({it.name}, no accelerator), where only CPU recipes ({', '.join(CPU_RECIPES)}) run"
        ]
    if run.ACCELERATOR is None or it.accelerator == run.ACCELERATOR:
        return []
    kind = {"neuron": "a Neuron (Trainium)", "nvidia": "an NVIDIA GPU"}[run.ACCELERATOR]
    return [
        f"{key}.nodeGroup: recipe {run.RECIPE} needs {kind} node group; {ng.name!r} runs {it.name}"
        f" ({it.accelerator_name})"
    ]


def nodes_fit(key: str, run: RunConfig, ng: GroupView) -> list[str]:
    """A run fits the node group's ceiling. Fewer nodes running now (a group scaled to 0) is no
    problem: Kueue's quota follows desiredSize, so the run waits in its queue until they are."""
    if run.nodes <= ng.max_nodes:
        return []
    return [
        f"{key}.nodes: {run.nodes} nodes, but node group {ng.name!r} can have at most {ng.max_nodes}"
        f" ({ng.max_key}); use at most {ng.max_nodes} or raise maxSize"
    ]


def image_repository_exists(key: str, run: RunConfig, repositories: Collection[str]) -> list[str]:
    """A run that takes its image from the recipe's repository needs that repository."""
    repo = run.REPOSITORY
    if run.image is not None or repo is None or repo in repositories:
        return []
    return [
        f"{key}.image: required: the stack has no ECR repository {repo!r} for recipe {run.RECIPE}"
        f" (registry.repositories: {', '.join(repositories) or 'none'})"
    ]


def versions_fit(key: str, run: RunConfig, ng: GroupView) -> list[str]:
    """A Neuron run's SDK (from neuronSdk, the image tag, or the repository's Dockerfile) trains
    on the node group's instance family, and the recipe's framework is still supported by it."""
    if ng.instance.accelerator != "neuron" or run.PUBLIC_IMAGES:
        return []  # a pinned public image is chosen per instance family (facts.serving); the SDK rules are training's
    sdk, source = run.sdk
    if sdk is None:
        return [
            f"{key}.neuronSdk: required: the image {run.image} does not name its Neuron SDK (no -sdk<version> in"
            " its tag); state it, e.g. 2.22.0, so the version can be checked against the instance family"
        ]
    family = ng.instance.family
    return [
        f"{key}.{source}: {p}" for p in versions.problems(sdk, family, nemo_megatron=run.NEMO_MEGATRON, image=run.image)
    ]


def runs_problems(workloads: Mapping[str, WorkloadConfig], groups: Groups) -> list[str]:
    """Each run against the node groups: a rule whose precondition failed hides the rules after it."""
    problems: list[str] = []
    for name, run in workloads.items():
        key = f"workloads.{name}"
        unknown = known_node_group(key, run.node_group, groups)
        if unknown:
            problems += unknown
            continue
        ng = groups[run.node_group]
        mismatch = accelerator_matches(key, run, ng)
        if mismatch:
            problems += mismatch
            continue
        problems += versions_fit(key, run, ng) + nodes_fit(key, run, ng) + run.problems_on(key, ng.instance)
    return problems


def run_names(cfg: StackConfig) -> list[str]:
    """What a run needs of its own stack: a valid name, and the token where its recipe downloads."""
    named = [p for name, run in cfg.workloads.items() for p in run_name(name) + hugging_face_token(name, run, cfg)]
    return named + run_objects(cfg.workloads) + plain_secrets(cfg.workloads)


def images_exist(workloads: Mapping[str, WorkloadConfig], repositories: Collection[str]) -> list[str]:
    """Every run's image comes from a repository the stack has, or is named in full."""
    return [
        p for name, run in workloads.items() for p in image_repository_exists(f"workloads.{name}", run, repositories)
    ]


def checkpoints_fit(workloads: Mapping[str, WorkloadConfig], storage: StorageConfig) -> list[str]:
    """The checkpoints every run keeps fit in the shared file system, with room to spare."""
    kept = {name: p for name, run in sorted(workloads.items()) if (p := run.checkpoint_plan(storage))}
    total = sum(p.kept_bytes for p in kept.values())
    room = storage.storage_capacity_gib * GIB * STORAGE_SHARE
    if total <= room:
        return []
    listed = ", ".join(f"{n}: {p.kept} x {p.size_bytes / 1e9:,.0f} GB" for n, p in kept.items())
    return [
        f"storage.storageCapacityGib: the checkpoints the runs keep ({listed}) need {total / 1e12:,.2f} TB, more than"
        f" {STORAGE_SHARE:.0%} of {storage.storage_capacity_gib} GiB; grow the file system (a multiple"
        " of 2400 GiB) or keep fewer (workloads.<name>.training.checkpointsToKeep)"
    ]


# --------------------------------------------------------------------------- teams


def quotas_fit(name: str, team: TeamConfig, ng: GroupView, shares: list[tuple[str, int]]) -> list[str]:
    """The teams of one node group never ask for more nodes than it can have (reported once, at
    the team that tips it over); a team borrows at most the nodes outside its own quota. While
    the group runs fewer nodes (scaled down or to 0), Kueue gets the quotas scaled down to the
    nodes present (`infra.queues.teams_of`), so queued runs wait instead of failing."""
    problems = []
    total = sum(n for _, n in shares)
    if total > ng.max_nodes and total - team.nodes <= ng.max_nodes:
        listed = ", ".join(f"{t}: {n}" for t, n in shares)
        problems.append(
            f"teams.{name}.nodes: the teams on node group {ng.name!r} ask for {total} nodes ({listed}), but it can"
            f" have at most {ng.max_nodes} ({ng.max_key}); quotas must not exceed the nodes that can exist"
        )
    room = max(ng.max_nodes - team.nodes, 0)
    if team.borrowing_limit_nodes is not None and team.borrowing_limit_nodes > room:
        problems.append(
            f"teams.{name}.borrowingLimitNodes: {team.borrowing_limit_nodes} is more than the {room} nodes of"
            f" {ng.name!r} outside the team's own quota"
        )
    return problems


def team_problems(teams: Mapping[str, TeamConfig], groups: Groups) -> list[str]:
    """Each team's node group exists and the quotas on it fit."""
    problems: list[str] = []
    shares: dict[str, list[tuple[str, int]]] = {}
    for name, team in teams.items():
        unknown = known_node_group(f"teams.{name}", team.node_group, groups)
        if unknown:
            problems += unknown
            continue
        ng = groups[team.node_group]
        shares.setdefault(ng.name, []).append((name, team.nodes))
        problems += quotas_fit(name, team, ng, shares[ng.name])
    return problems


def run_team(name: str, run: RunConfig, teams: Mapping[str, TeamConfig]) -> list[str]:
    """A run names a team exactly when teams exist, on the team's node group, within its reach."""
    key = f"workloads.{name}.team"
    if not teams:
        if run.team is None:
            return []
        return [f"{key}: {run.team!r} is not a team (no teams are defined; runs without teams use the default queue)"]
    if run.team is None:
        return [f"{key}: required when teams are defined; teams: {', '.join(teams)}"]
    team = teams.get(run.team)
    if team is None:
        return [f"{key}: unknown team {run.team!r}{did_you_mean(run.team, teams)}; teams: {', '.join(teams)}"]
    if team.node_group != run.node_group:
        return [
            f"{key}: team {run.team!r} has its quota on node group {team.node_group!r}, not {run.node_group!r}"
            f" (workloads.{name}.nodeGroup)"
        ]
    if team.borrowing_limit_nodes is not None and run.nodes > team.nodes + team.borrowing_limit_nodes:
        return [
            f"workloads.{name}.nodes: {run.nodes} nodes can never be admitted: team {run.team!r} has {team.nodes}"
            f" nodes and may borrow {team.borrowing_limit_nodes} (teams.{run.team})"
        ]
    return []


def run_teams(workloads: Mapping[str, WorkloadConfig], teams: Mapping[str, TeamConfig]) -> list[str]:
    return [p for name, run in workloads.items() for p in run_team(name, run, teams)]


def system_name_reserved(cfg: StackConfig) -> list[str]:
    return [
        f"nodeGroups[{i}].name: {SYSTEM_NODE_GROUP!r} is the system node group's name; choose another"
        for i, ng in enumerate(cfg.node_groups)
        if ng.name == SYSTEM_NODE_GROUP
    ]


# --------------------------------------------------------------------------- API access


def api_path(cfg: StackConfig) -> list[str]:
    """The program deploys Kubernetes objects (add-ons, queues, runs) through the cluster's API,
    so the deployer needs a way in. The endpoint is private unless publicAccessCidrs is set,
    and only the EKS-managed cluster security group guards it: without public CIDRs or an
    ingress rule on TCP 443 for a network routed into the VPC, the first Kubernetes object
    times out (EKS user guide, "Cluster API server endpoint")."""
    c = cfg.cluster
    if cfg.layer in ("cluster", "runs"):
        return []  # the cluster's settings, and its path, belong to the aws layer
    if c.public_access_cidrs or c.private_access_cidrs or c.private_access_security_group_ids:
        return []
    if cfg.layer == "aws" and cfg.ci_runner.enabled:
        return []  # the in-VPC CI runner reaches the API for the layers above (its group is allowed in)
    return [
        "cluster.publicAccessCidrs: nothing can reach the Kubernetes API (the endpoint is private and no network is"
        " allowed in), so every Kubernetes resource would time out; list your egress CIDR here (e.g."
        " [203.0.113.10/32]), or set cluster.privateAccessCidrs / cluster.privateAccessSecurityGroupIds for networks"
        " routed into the VPC (VPN, Direct Connect, peering)"
        + ("; or enable ciRunner, which deploys the layers above from inside the VPC" if cfg.layer == "aws" else "")
    ]


def tag_rules(cfg: StackConfig) -> list[str]:
    """`tags` reach every taggable resource (provider default tags): each key and value must pass
    the tag rules of every service involved, and with `Name` and the cluster tag the stack adds,
    stay within the per-resource limit (botocore's TagKey/TagValue/Tags shapes)."""
    # A value stored encrypted is only a placeholder offline; the real value is checked at deploy.
    tags = {k: v for k, v in cfg.tags.items() if v != SECRET}
    return tag_problems(tags, reserved=("Name", CLUSTER_TAG))


def eks_addon_versions_known(cfg: StackConfig) -> list[str]:
    """Every EKS add-on has a version for the cluster's minor: pinned in facts/eks_addons.py, or
    named in the stack. Never EKS's moving default (looked up at each preview, it changed reviewed
    plans and upgraded add-ons unasked)."""
    if cfg.layer not in ("all", "aws"):
        return []
    minor = cfg.cluster.kubernetes_version
    fields = {addon: field for field, addon in eks_addons.ADDON_KEYS.items()}
    return [
        f"addons.eksAddonVersions.{to_camel(fields[addon])}: no version of {addon} is recorded for Kubernetes {minor}"
        f" (facts/eks_addons.py); name one: aws eks describe-addon-versions --addon-name {addon}"
        f" --kubernetes-version {minor} --query 'addons[0].addonVersions[0].addonVersion'"
        for addon, version in cfg.addons.eks_addon_versions.resolved(minor).items()
        if version is None
    ]


def config_problems(cfg: StackConfig) -> list[str]:
    """Every cross-section rule the stack can check on its own.

    An all-in-one stack checks runs and teams against its own node groups; a layered stack
    checks what it holds alone here, and the rest against its lower layer's outputs.
    """
    local = [*api_path(cfg), *tag_rules(cfg), *run_names(cfg), *(p for name in cfg.teams for p in team_name(name))]
    local += eks_addon_versions_known(cfg)
    if cfg.layer == "all":
        groups = groups_of(cfg)
        return [
            *local,
            *images_exist(cfg.workloads, cfg.registry.repositories),
            *runs_problems(cfg.workloads, groups),
            *checkpoints_fit(cfg.workloads, cfg.storage),
            *serving_problems(cfg, groups),
            *team_problems(cfg.teams, groups),
            *run_teams(cfg.workloads, cfg.teams),
            *system_name_reserved(cfg),
            *release_problems(cfg),
        ]
    return [*local, *system_name_reserved(cfg), *(release_problems(cfg) if cfg.layer == "aws" else [])]
