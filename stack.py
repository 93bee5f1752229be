"""The composition root: config in, components wired in order, stack outputs out.

`__main__.py` calls `build` under the Pulumi engine; `tools.plan` and the tests call it
under mocks. The only reader of the whole `StackConfig`: each component gets its own
section and the shared `StackContext`. Data flows one way: network -> shared storage
(beside, not after, the cluster) -> cluster -> node groups -> registry and add-ons ->
Kueue queues -> the `Platform` value -> training runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from config.stack import StackConfig
from facts.names import STORAGE_CLAIM, WORKLOADS_NAMESPACE
from infra import cost
from infra.addons import ClusterAddons
from infra.cluster import Cluster
from infra.context import StackContext, aws_provider
from infra.network import Network
from infra.nodegroups import AcceleratedNodeGroup
from infra.platform import NodeGroupFacts, Platform
from infra.queues import TeamQueues, kueue_manager_config, teams_of
from infra.registry import Registry
from infra.storage import SharedStorage, SharedVolume
from workloads import deploy


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
    ctx = StackContext.from_config(cfg)
    # Every AWS resource goes through one provider that carries the stack's tags.
    on_aws = pulumi.ResourceOptions(providers=[aws_provider(ctx)])
    network = Network("network", cfg.network, ctx, cfg.availability_zones, opts=on_aws)
    # Takes nothing from the cluster, so FSx and EKS are created in parallel.
    storage = SharedStorage("storage", cfg.storage, ctx, network, cfg.file_system_az, opts=on_aws)
    cluster = Cluster("cluster", cfg.cluster, cfg.system_node_group, ctx, network, opts=on_aws)
    node_groups = {
        ng.name: AcceleratedNodeGroup(f"ng-{ng.name}", ng, ctx, cfg.node_group_az(ng), network, cluster, opts=on_aws)
        for ng in cfg.node_groups
    }
    lustre_client_rules = storage.allow_clients(
        {"cluster": cluster.security_group_id, **{name: ng.security_group_id for name, ng in node_groups.items()}}
    )
    registry = Registry("registry", cfg.registry, ctx, cluster.node_role.arn, opts=on_aws)
    facts = {ng.name: NodeGroupFacts.from_config(ng, cfg.node_group_az(ng)) for ng in cfg.node_groups}
    kueue_config = kueue_manager_config(cfg.queueing)
    groups = list(facts.values())
    addons = ClusterAddons(
        "addons", cfg.addons, ctx, cluster, groups, storage.file_system.arn, kueue_config, opts=on_aws
    )
    # Flavors and queues once Kueue runs; the LocalQueues need the workloads namespace.
    queues = TeamQueues(
        "queues", teams_of(cfg.teams, facts), facts, cluster.provider, depends_on=[addons.kueue, addons.namespace]
    )
    volume = SharedVolume(
        "shared-volume",
        cfg.storage.storage_capacity_gib,
        storage,
        addons.namespace,
        STORAGE_CLAIM,
        cluster.provider,
        # Binds once the S3 link exists; mounts once the nodes may reach the file system.
        depends_on=[*([storage.association] if storage.association else []), *lustre_client_rules],
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
    deploy.deploy(cfg.workloads, cfg.hugging_face_token, infra.platform)
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
        # USD from the dated price table (facts/prices.py); see `python -m tools.cost --live`.
        **cost.stack_outputs(cfg),
    }
