"""The node groups the rules check runs and quotas against, wherever they are declared."""

from __future__ import annotations

from config.nodegroups import NodeGroupConfig
from config.stack import StackConfig
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup, NodeGroups

Groups = NodeGroups
"""Node group name -> the group (`facts.nodegroups.NodeGroup`, the one shape of every layer)."""


def groups_of(cfg: StackConfig) -> dict[str, NodeGroup]:
    """The node groups a stack declares itself: the accelerated ones and the system node group
    (where CPU runs and the MPI launchers run). Their AMI releases are not pinned yet: the rules
    that read them (config.amis) run on their own."""
    azs = cfg.availability_zones
    # A stack with no AZ at all is reported by the network rules; these rules still run.
    first = azs[0] if azs else ""
    return {
        **{
            ng.name: ng.node_group(ng.availability_zone or first, max_key=f"nodeGroups[{i}].maxSize")
            for i, ng in enumerate(cfg.node_groups)
        },
        SYSTEM_NODE_GROUP: cfg.system_node_group.node_group(azs),
    }


def size_key(i: int, ng: NodeGroupConfig) -> str:
    """The key that sets node group i's maxSize: its own, or desiredSize, which it follows when not set."""
    return f"nodeGroups[{i}].{'maxSize' if ng.max_size is not None else 'desiredSize'}"
