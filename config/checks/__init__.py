"""Rules that span config sections, one function each.

Each returns the problems it finds as `key.path: message` lines, each a typed
`config.problems.Problem` (path, kind, value, allowed, hint) built with `problem(...)`. The
raw-dict rules read the stack values defensively, so they still run (and are reported with the
rest) when another key is invalid; the others run on a validated `StackConfig`.

Runs and team quotas are checked against node groups (`facts.nodegroups.NodeGroup`): from
`nodeGroups` in an all-in-one stack, and from the lower layer's outputs in a layered one (`stack.py` calls
`runs_problems` and `team_problems` once it has read them).
"""

from __future__ import annotations

from config.amis import release_problems
from config.checks.access import api_path, tag_keys_distinct, tag_rules
from config.checks.addons import efa_plugin_counts_devices, eks_addon_versions_known
from config.checks.capacity import capacity_problems
from config.checks.groups import Groups, groups_of
from config.checks.network import flavors_fit, network_problems
from config.checks.runs import checkpoint_share, checkpoints_fit, hub_tokens, images_exist, run_names, runs_problems
from config.checks.serving import WARNING_PREFIX, layered_serving, serving_problems, unscraped_servers
from config.checks.teams import (
    default_queue_decided,
    pods_ready_covers_launcher_pull,
    run_outputs_expire,
    run_teams,
    system_name_reserved,
    team_problems,
    unowned_nodes,
)
from config.layers import layer_problems
from config.names import node_group_azs_in_vpc, node_group_names_unique, team_name, vpc_azs_in_region
from config.placement import RULES as PLACEMENT_RULES
from config.stack import StackConfig

__all__ = [
    "RAW_RULES",
    "WARNING_PREFIX",
    "Groups",
    "checkpoint_share",
    "checkpoints_fit",
    "config_problems",
    "flavors_fit",
    "groups_of",
    "hub_tokens",
    "images_exist",
    "layered_serving",
    "run_outputs_expire",
    "run_teams",
    "runs_problems",
    "serving_problems",
    "team_problems",
    "unowned_nodes",
    "unscraped_servers",
]

RAW_RULES = (vpc_azs_in_region, node_group_names_unique, node_group_azs_in_vpc, layer_problems, *PLACEMENT_RULES)


def config_problems(cfg: StackConfig) -> list[str]:
    """Every cross-section rule the stack can check on its own.

    An all-in-one stack checks runs and teams against its own node groups; a layered stack
    checks what it holds alone here, and the rest against its lower layer's outputs.
    """
    local = [
        *api_path(cfg),
        *tag_rules(cfg),
        *tag_keys_distinct(cfg),
        *run_names(cfg),
        *(p for name in cfg.teams for p in team_name(name)),
        *capacity_problems(cfg),
        *network_problems(cfg),
        *eks_addon_versions_known(cfg),
        *default_queue_decided(cfg),
    ]
    if cfg.layer == "all":
        groups = groups_of(cfg)
        return [
            *local,
            *images_exist(cfg.workloads, cfg.registry.repositories),
            *runs_problems(cfg.workloads, groups),
            *serving_problems(cfg, groups),
            *checkpoints_fit(cfg.workloads, cfg.storage),
            *checkpoint_share(cfg.workloads, groups, cfg.storage),
            *team_problems(cfg.teams, groups, bool(cfg.queueing.default_queue)),
            *run_teams(cfg.workloads, cfg.teams, _default_queue_quota(cfg, groups)),
            *run_outputs_expire(cfg.teams, cfg.storage.exports_expire_after, cfg.expiring_teams, "this stack"),
            *system_name_reserved(cfg),
            *efa_plugin_counts_devices(cfg),
            *release_problems(cfg),
            *pods_ready_covers_launcher_pull(cfg),
        ]
    return [*local, *system_name_reserved(cfg), *(release_problems(cfg) if cfg.layer == "aws" else [])]


def _default_queue_quota(cfg: StackConfig, groups: Groups) -> dict[str, int] | None:
    """The default queue's nominal quota per node group when a stack with teams keeps it; None
    when runs must name a team."""
    if cfg.teams and not cfg.queueing.default_queue:
        return None
    return unowned_nodes(cfg.teams, groups, True)
