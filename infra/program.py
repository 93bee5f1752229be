"""The whole program: config in, resources declared, stack outputs out.

`__main__.py` calls `build` under the Pulumi engine; `infra.plan` and the tests call it
under mocks. Data flows one way: config -> network -> shared storage (beside, not after,
the cluster) -> cluster -> node groups -> registry and add-ons -> Kueue queues -> the `Platform` value.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra import cost
from infra.addons import ClusterAddons
from infra.cluster import Cluster
from infra.config import StackConfig
from infra.network import Network
from infra.nodegroups import AcceleratedNodeGroup
from infra.platform import STORAGE_CLAIM, WORKLOADS_NAMESPACE, NodeGroupFacts, Platform
from infra.queues import TeamQueues
from infra.registry import Registry
from infra.storage import SharedStorage, SharedVolume


@dataclass
class Infrastructure:
    """The components the program declared, for the layers built on top of them."""

    network: Network
    cluster: Cluster
    node_groups: dict[str, AcceleratedNodeGroup]
    storage: SharedStorage
    registry: Registry
    addons: ClusterAddons
    queues: TeamQueues
    volume: SharedVolume
    platform: Platform


def build_infrastructure(cfg: StackConfig) -> Infrastructure:
    """Declare the platform's resources; return the components and the `Platform` value."""
    network = Network("network", cfg)
    # Takes nothing from the cluster, so FSx and EKS are created in parallel.
    storage = SharedStorage("storage", cfg, network)
    cluster = Cluster("cluster", cfg, network)
    node_groups = {ng.name: AcceleratedNodeGroup(f"ng-{ng.name}", cfg, ng, network, cluster) for ng in cfg.node_groups}
    storage.allow_clients(
        {"cluster": cluster.security_group_id, **{name: ng.security_group_id for name, ng in node_groups.items()}}
    )
    registry = Registry("registry", cfg, cluster.node_role.arn)
    facts = {ng.name: NodeGroupFacts.from_config(cfg, ng) for ng in cfg.node_groups}
    addons = ClusterAddons("addons", cfg, cluster, list(facts.values()), storage.file_system.arn)
    # Flavors and queues once Kueue runs; the LocalQueues need the workloads namespace.
    queues = TeamQueues("queues", cfg, facts, cluster.provider, depends_on=[addons.kueue, addons.namespace])
    volume = SharedVolume(
        "shared-volume",
        cfg,
        storage,
        addons.namespace,
        STORAGE_CLAIM,
        cluster.provider,
        # The claim binds only once the file system's data repository is linked.
        depends_on=[storage.association] if storage.association else None,
    )
    platform = Platform(
        provider=cluster.provider,
        namespace=WORKLOADS_NAMESPACE,
        storage_claim=STORAGE_CLAIM,
        node_groups=facts,
        registry_urls=dict(registry.urls),
        depends_on=[addons.namespace, volume.claim, addons.mpi_operator, *addons.releases.values(), *queues.objects],
        queues=queues.queues,
        priority_classes=queues.priority_classes,
    )
    return Infrastructure(
        network=network,
        cluster=cluster,
        node_groups=node_groups,
        storage=storage,
        registry=registry,
        addons=addons,
        queues=queues,
        volume=volume,
        platform=platform,
    )


def build(cfg: StackConfig) -> dict[str, pulumi.Input[object]]:
    """Declare every resource of the stack; return the stack outputs."""
    infra = build_infrastructure(cfg)
    if cfg.workloads:
        from workloads import deploy

        deploy.deploy(cfg, infra.platform)

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
            for name, ng in infra.node_groups.items()
        },
        "fileSystemId": infra.storage.file_system.id,
        "fileSystemAvailabilityZone": infra.storage.availability_zone,
        "dataBucket": infra.storage.bucket.bucket,
        "registryUrls": infra.registry.urls,
        # USD from the dated price table (infra/prices.py); see `python -m infra.cost --live`.
        **cost.stack_outputs(cfg),
    }
