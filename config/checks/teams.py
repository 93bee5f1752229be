"""Rules of teams (Kueue queues): quotas against node groups, runs against their team."""

from __future__ import annotations

from collections.abc import Mapping

from config.base import did_you_mean
from config.checks.groups import Groups, GroupView
from config.checks.runs import known_node_group
from config.stack import StackConfig
from config.teams import TeamConfig
from config.workloads import RunConfig, WorkloadConfig
from facts.names import SYSTEM_NODE_GROUP


def quotas_fit(name: str, team: TeamConfig, ng: GroupView, shares: list[tuple[str, int]]) -> list[str]:
    """The teams of one node group never ask for more nodes than it can have (reported once, at
    the team that tips it over). While the group runs fewer nodes (scaled down or to 0), Kueue gets
    the quotas scaled down to the nodes present (`infra.queues.teams_of`), so queued runs wait."""
    total = sum(n for _, n in shares)
    if total > ng.max_nodes and total - team.nodes <= ng.max_nodes:
        listed = ", ".join(f"{t}: {n}" for t, n in shares)
        return [
            f"teams.{name}.nodes: the teams on node group {ng.name!r} ask for {total} nodes ({listed}), but it can"
            f" have at most {ng.max_nodes} ({ng.max_key}); quotas must not exceed the nodes that can exist"
        ]
    return []


def lendable(name: str, teams: Mapping[str, TeamConfig]) -> int:
    """Nodes the other teams of `name`'s node group can lend it: their nominal quotas. All teams
    share one cohort, and Kueue lends only other ClusterQueues' unused nominal quota of the same
    flavor, never nodes outside every quota (kueue v0.19.2 docs, concepts/cluster_queue.md,
    "Flavors and borrowing semantics")."""
    group = teams[name].node_group
    return sum(t.nodes for other, t in teams.items() if other != name and t.node_group == group)


def borrowing_reachable(name: str, teams: Mapping[str, TeamConfig]) -> list[str]:
    """A team borrows at most what the other teams of its node group lend."""
    team = teams[name]
    lend = lendable(name, teams)
    if team.borrowing_limit_nodes is None or team.borrowing_limit_nodes <= lend:
        return []
    nodes = "node" if lend == 1 else "nodes"
    return [
        f"teams.{name}.borrowingLimitNodes: {team.borrowing_limit_nodes}, but the other teams on node group"
        f" {team.node_group!r} lend only {lend} {nodes}: Kueue lends only their unused nominal quota, never nodes"
        f" outside every team's quota; use at most {lend}, or give those nodes to a team"
    ]


def team_problems(teams: Mapping[str, TeamConfig], groups: Groups) -> list[str]:
    """Each team's node group exists, the quotas on it fit, and what it borrows can be lent."""
    problems: list[str] = []
    shares: dict[str, list[tuple[str, int]]] = {}
    for name, team in teams.items():
        unknown = known_node_group(f"teams.{name}", team.node_group, groups)
        if unknown:
            problems += unknown
            continue
        ng = groups[team.node_group]
        shares.setdefault(ng.name, []).append((name, team.nodes))
        problems += quotas_fit(name, team, ng, shares[ng.name]) + borrowing_reachable(name, teams)
    return problems


def run_team(name: str, run: RunConfig, teams: Mapping[str, TeamConfig]) -> list[str]:
    """A run names a team exactly when teams exist, on the team's node group, within its reach:
    its quota and what it can borrow (the other teams' quota, up to its borrowing limit)."""
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
    lend = lendable(run.team, teams)
    borrow = lend if team.borrowing_limit_nodes is None else min(team.borrowing_limit_nodes, lend)
    if run.nodes > team.nodes + borrow:
        return [
            f"workloads.{name}.nodes: {run.nodes} nodes can never be admitted: team {run.team!r} has {team.nodes}"
            f" nodes and can borrow {borrow} (its borrowingLimitNodes, and the {lend} the other teams of"
            f" {team.node_group!r} lend) (teams.{run.team})"
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
