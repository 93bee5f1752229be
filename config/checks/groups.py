"""What the rules know of a node group, wherever it is declared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from facts import instances
from facts.names import SYSTEM_NODE_GROUP


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


def size_key(i: int, ng: NodeGroupConfig) -> str:
    """The key that sets node group i's maxSize: its own, or desiredSize, which it follows when not set."""
    return f"nodeGroups[{i}].{'maxSize' if ng.max_size is not None else 'desiredSize'}"
