"""Rules of teams (Kueue queues): quotas against node groups, runs against their team."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from config.base import did_you_mean
from config.checks.groups import Groups
from config.checks.runs import known_node_group
from config.problems import problem
from config.stack import StackConfig
from config.teams import TeamConfig
from config.workloads import RunConfig, WorkloadConfig
from estimates.startup import PULL_GB, PULL_SECONDS, minimum_timeout_minutes
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup


def quotas_fit(name: str, team: TeamConfig, ng: NodeGroup, shares: list[tuple[str, int]]) -> list[str]:
    """The teams of one node group never ask for more nodes than it can have (reported once, at
    the team that tips it over). While the group runs fewer nodes (scaled down or to 0), Kueue gets
    the quotas scaled down to the nodes present (`infra.queues.teams_of`), so queued runs wait."""
    total = sum(n for _, n in shares)
    if total > ng.max_nodes and total - team.nodes <= ng.max_nodes:
        listed = ", ".join(f"{t}: {n}" for t, n in shares)
        return [
            problem(
                f"teams.{name}.nodes",
                "conflict",
                f"the teams on node group {ng.name!r} ask for {total} nodes ({listed}), but it can"
                f" have at most {ng.max_nodes} ({ng.max_key}); quotas must not exceed the nodes that can exist",
                value=str(team.nodes),
                allowed=f"at most {ng.max_nodes - (total - team.nodes)}",
            )
        ]
    return []


def lendable(name: str, teams: Mapping[str, TeamConfig], unowned: Mapping[str, int] | None = None) -> int:
    """Nodes the other teams of `name`'s node group can lend it: their nominal quotas, and with the
    default queue kept (queueing.defaultQueue) its nominal quota there, the nodes no team has
    (`unowned`, by node group). All queues share one cohort, and Kueue lends only other
    ClusterQueues' unused nominal quota of the same flavor, never nodes outside every quota
    (kueue v0.19.2 docs, concepts/cluster_queue.md, "Flavors and borrowing semantics")."""
    group = teams[name].node_group
    others = sum(t.nodes for other, t in teams.items() if other != name and t.node_group == group)
    return others + (unowned or {}).get(group, 0)


def unowned_nodes(teams: Mapping[str, TeamConfig], groups: Groups, default_queue: bool) -> dict[str, int]:
    """With the default queue kept, its nominal quota per node group: the nodes no team has."""
    if not default_queue:
        return {}
    owned: dict[str, int] = {}
    for team in teams.values():
        owned[team.node_group] = owned.get(team.node_group, 0) + team.nodes
    return {name: max(g.nodes - owned.get(name, 0), 0) for name, g in groups.items()}


def borrowing_reachable(name: str, teams: Mapping[str, TeamConfig], unowned: Mapping[str, int]) -> list[str]:
    """A team borrows at most what the other queues of its node group lend."""
    team = teams[name]
    lend = lendable(name, teams, unowned)
    if team.borrowing_limit_nodes is None or team.borrowing_limit_nodes <= lend:
        return []
    nodes = "node" if lend == 1 else "nodes"
    return [
        problem(
            f"teams.{name}.borrowingLimitNodes",
            "conflict",
            f"{team.borrowing_limit_nodes}, but the other teams on node group {team.node_group!r} lend only {lend}"
            f" {nodes}: Kueue lends only their unused nominal quota, never nodes outside every team's quota; use at"
            f" most {lend}, or give those nodes to a team",
            value=str(team.borrowing_limit_nodes),
            allowed=f"at most {lend}",
            hint="or give those nodes to a team",
        )
    ]


def team_problems(teams: Mapping[str, TeamConfig], groups: Groups, default_queue: bool = False) -> list[str]:
    """Each team's node group exists, the quotas on it fit, and what it borrows can be lent."""
    problems: list[str] = []
    unowned = unowned_nodes(teams, groups, default_queue)
    shares: dict[str, list[tuple[str, int]]] = {}
    for name, team in teams.items():
        unknown = known_node_group(f"teams.{name}", team.node_group, groups)
        if unknown:
            problems += unknown
            continue
        ng = groups[team.node_group]
        shares.setdefault(ng.name, []).append((name, team.nodes))
        problems += quotas_fit(name, team, ng, shares[ng.name]) + borrowing_reachable(name, teams, unowned)
    return problems


def _no_team(
    key: str, wanted: str | None, teams: Mapping[str, TeamConfig], unowned: Mapping[str, int] | None
) -> list[str]:
    """A run that names no team, or one that does not exist: fine without teams or beside a kept default queue."""
    if not teams:
        if wanted is None:
            return []
        return [
            problem(
                key,
                "not-supported",
                f"{wanted!r} is not a team (no teams are defined; runs without teams use the default queue)",
                value=repr(wanted),
                allowed="none (no teams are defined)",
            )
        ]
    if wanted is None:
        if unowned is not None:
            return []
        return [
            problem(
                key,
                "required",
                f"required when teams are defined and queueing.defaultQueue is not true; teams: {', '.join(teams)}."
                " A run that ran before the first team keeps running in `training` with queueing.defaultQueue: true;"
                " naming a team moves it to the team's namespace and directory, where it starts again from step 0",
                allowed=", ".join(teams),
                hint="or queueing.defaultQueue: true keeps the run in `training`",
            )
        ]
    if wanted not in teams:
        meant = did_you_mean(wanted, teams)
        return [
            problem(
                key,
                "not-supported",
                f"unknown team {wanted!r}{meant}; teams: {', '.join(teams)}",
                value=repr(wanted),
                allowed=", ".join(teams),
                hint=meant.strip(" ()") or None,
            )
        ]
    return []


def run_team(
    name: str, run: RunConfig, teams: Mapping[str, TeamConfig], unowned: Mapping[str, int] | None = None
) -> list[str]:
    """A run names a team when teams exist (unless the default queue is kept for runs without
    one: `unowned` is then its quota), on the team's node group, within its reach: its quota and
    what it can borrow (the other queues' quota, up to its borrowing limit)."""
    key = f"workloads.{name}.team"
    team = teams.get(run.team) if run.team is not None else None
    if team is None or run.team is None:
        return _no_team(key, run.team, teams, unowned)
    if team.node_group != run.node_group:
        return [
            problem(
                key,
                "conflict",
                f"team {run.team!r} has its quota on node group {team.node_group!r}, not {run.node_group!r}"
                f" (workloads.{name}.nodeGroup)",
                value=repr(run.team),
            )
        ]
    lend = lendable(run.team, teams, unowned)
    borrow = lend if team.borrowing_limit_nodes is None else min(team.borrowing_limit_nodes, lend)
    if run.nodes > team.nodes + borrow:
        return [
            problem(
                f"workloads.{name}.nodes",
                "conflict",
                f"{run.nodes} nodes can never be admitted: team {run.team!r} has {team.nodes} nodes and can borrow"
                f" {borrow} (its borrowingLimitNodes, and the {lend} the other teams of {team.node_group!r} lend)"
                f" (teams.{run.team})",
                value=str(run.nodes),
                allowed=f"at most {team.nodes + borrow}",
            )
        ]
    return []


def run_teams(
    workloads: Mapping[str, WorkloadConfig], teams: Mapping[str, TeamConfig], unowned: Mapping[str, int] | None = None
) -> list[str]:
    return [p for name, run in workloads.items() for p in run_team(name, run, teams, unowned)]


def default_queue_decided(cfg: StackConfig) -> list[str]:
    """Once teams are defined, the stack says whether the queue of a stack without teams stays:
    dropped, the `training` namespace goes with every run and claim in it."""
    decided = cfg.queueing.default_queue
    if cfg.teams and decided is None:
        return [
            problem(
                "queueing.defaultQueue",
                "required",
                "required once teams are defined: true keeps the `default` queue, the `training`"
                " namespace and its claim (the whole file system) for runs that name no team, so the runs of a stack"
                " that ran without teams keep running where they are; false has none (a stack with teams from the"
                " start; on a stack that ran without teams it deletes `training` with every run in it)",
                allowed="true or false",
            )
        ]
    if decided is not None and not cfg.teams and cfg.layer in ("all", "cluster"):
        return [
            problem(
                "queueing.defaultQueue",
                "conflict",
                "only with teams (without teams, the default queue is the only one)",
                value=str(decided).lower(),
                hint="leave it out",
            )
        ]
    return []


def system_name_reserved(cfg: StackConfig) -> list[str]:
    return [
        problem(
            f"nodeGroups[{i}].name",
            "forbidden",
            f"{SYSTEM_NODE_GROUP!r} is the system node group's name; choose another",
            value=repr(SYSTEM_NODE_GROUP),
        )
        for i, ng in enumerate(cfg.node_groups)
        if ng.name == SYSTEM_NODE_GROUP
    ]


def pods_ready_covers_launcher_pull(cfg: StackConfig) -> list[str]:
    """Kueue's pods-ready timeout covers what it counts once a run is admitted: the workers
    start from an image the image check already pulled onto every node of their group, and the
    launcher, created once they are ready, pulls the image onto a system node. The largest image
    a system node can hold is its root volume; a timeout shorter than that pull evicts and
    requeues the run before its launcher ever starts (estimates.startup: the measured pull rate)."""
    system = cfg.system_node_group
    need = minimum_timeout_minutes(system.root_volume_size_gib, system.instance)
    have = cfg.queueing.pods_ready_timeout_minutes
    if have >= need:
        return []
    return [
        problem(
            "queueing.podsReadyTimeoutMinutes",
            "conflict",
            f"{have} min does not cover the launcher's pull of an image as large as a"
            f" system node's {system.root_volume_size_gib} GiB root volume (~{need} min at the measured"
            f" {PULL_GB} GB per {PULL_SECONDS} s); use {need} or more, or a smaller"
            " systemNodeGroup.rootVolumeSizeGiB",
            value=str(have),
            allowed=f"{need} or more",
            hint="or a smaller systemNodeGroup.rootVolumeSizeGiB",
        )
    ]


def run_outputs_expire(teams: Iterable[str], days: int | None, expiring: Iterable[str] | None, aws: str) -> list[str]:
    """With run outputs expiring (`storage.exportRetentionDays`), every team's outputs expire too:
    a team's pods write `teams/<team>/runs/`, which only a rule of its own expires, and the aws
    layer (`aws`: the stack that declares the bucket) makes one per `storage.exportRetentionTeams`.
    `expiring` None: that stack does not say (deployed before the key existed)."""
    names = sorted(teams)
    if not names or (days is None and expiring is not None):
        return []
    listed = set(expiring or ())
    out: list[str] = []
    for team in [t for t in names if t not in listed]:
        said = (
            f"its run outputs (teams/{team}/runs/ in S3) would never expire: {aws} expires run outputs"
            + (f" after {days} days" if days is not None else "")
            + f" but storage.exportRetentionTeams there does not list {team!r}"
            + ("" if expiring is not None else " (that stack predates the key)")
            + "; add it there and deploy that stack first, then this one"
        )
        hint = f"add {team!r} to storage.exportRetentionTeams of {aws} and deploy it first, then this stack"
        out.append(problem(f"teams.{team}", "conflict", said, value=repr(team), hint=hint))
    return out
