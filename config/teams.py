"""Sharing the cluster (`teams`, `queueing`): Kueue quotas and admission."""

from __future__ import annotations

from pydantic import Field

from config.base import Model


class TeamConfig(Model):
    """One team sharing the cluster: a Kueue ClusterQueue with a quota in whole nodes of one node group."""

    node_group: str = Field(description="The `nodeGroups[].name` the team's quota is on, or `system` (CPU runs).")
    nodes: int = Field(
        ge=0,
        description=(
            "Nodes guaranteed to the team (nominal quota); the teams of a node group share at most its `desiredSize`."
        ),
    )
    borrowing_limit_nodes: int | None = Field(
        0,
        ge=0,
        description="Nodes the team may borrow from other teams' unused quota; null: no limit.",
    )
    priority: int = Field(
        0, ge=-1_000_000, le=1_000_000, description="The team's WorkloadPriorityClass value: its runs' priority."
    )


class QueueingConfig(Model):
    """Kueue admission: all-or-nothing (waitForPodsReady), how often an evicted run is requeued,
    and whether the queue of a stack without teams stays once teams exist."""

    default_queue: bool | None = Field(
        None,
        description="With teams: keep the `default` queue, the `training` namespace and its claim of the whole file"
        " system for runs that name no team (true: the runs of a stack from before its first team keep running"
        " where they are), or have none (false).",
        json_schema_extra={"x-default": "required once teams are defined"},
    )
    pods_ready_timeout_minutes: int = Field(
        30,
        ge=1,
        le=1440,
        description="Minutes an admitted run has to get every pod ready (image pulls included) before it is"
        " evicted and requeued, so no run holds half a placement.",
    )
    recovery_timeout_minutes: int = Field(
        15,
        ge=1,
        le=1440,
        description="Minutes a running run may miss a pod (a lost node being replaced) before it is requeued.",
    )
    requeue_limit: int = Field(
        5, ge=0, le=100, description="Requeues after a readiness timeout before Kueue deactivates the run."
    )
