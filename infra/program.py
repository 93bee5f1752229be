"""The whole program: config in, resources declared, stack outputs out.

`__main__.py` calls `build` under the Pulumi engine; `infra.plan` and the tests call it
under mocks. Data flows one way: config -> network -> cluster -> node groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra import cost
from infra.cluster import Cluster
from infra.config import StackConfig
from infra.network import Network
from infra.nodegroups import AcceleratedNodeGroup


@dataclass
class Infrastructure:
    """The components the program declared, for the layers built on top of them."""

    network: Network
    cluster: Cluster
    node_groups: dict[str, AcceleratedNodeGroup]


def build(cfg: StackConfig) -> dict[str, pulumi.Input[object]]:
    """Declare every resource of the stack; return the stack outputs."""
    network = Network("network", cfg)
    cluster = Cluster("cluster", cfg, network)
    node_groups = {ng.name: AcceleratedNodeGroup(f"ng-{ng.name}", cfg, ng, network, cluster) for ng in cfg.node_groups}
    infra = Infrastructure(network=network, cluster=cluster, node_groups=node_groups)

    return {
        "clusterName": infra.cluster.name,
        "kubeconfig": infra.cluster.kubeconfig,
        "vpcId": infra.network.vpc_id,
        "oidcProviderArn": infra.cluster.oidc_provider_arn,
        "nodeGroups": {
            name: {
                "instanceType": ng.config.instance_type,
                "desiredSize": ng.config.desired_size,
                "availabilityZone": ng.availability_zone,
                "capacity": ng.config.capacity.type,
            }
            for name, ng in node_groups.items()
        },
        # USD from the dated price table (infra/prices.py); see `python -m infra.cost --live`.
        **cost.stack_outputs(cfg),
    }
