"""One small component per add-on, each built by its constructor from its catalog entry, and the
two per-layer components that hold them.

- aws layer: `EksAddons` holds an `EksAddon` per EKS managed add-on and an `AddonRole` per IAM
  role of an add-on's service account; it hands the roles on (`role_arns`, `role_policies`) in
  `ClusterInputs`. `ContainerInsightsLogs` (the CloudWatch add-on's log groups) comes before the
  cluster, which depends on it.
- cluster layer: `ClusterAddons` holds a `HelmAddon` per chart and a `ManifestAddon` per release
  manifest, built from `ClusterInputs`; an all-in-one stack passes the aws layer's live roles
  and nodes in the same value.

Every resource keeps the name it had under the one `ClusterAddons` component that held them all
before the catalog, and an alias to that old parent, so no live resource is replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config.addons import AddonsConfig, ObservabilityConfig
from facts.names import SYSTEM_NAMESPACE, app_labels, component_type
from infra.addons.catalog import (
    PREFIX,
    Addon,
    EksInputs,
    EksManaged,
    HelmChart,
    IrsaRole,
    Manifest,
    PodIdentityRole,
    ReleaseInputs,
    RoleInputs,
)
from infra.cluster import Cluster
from infra.context import StackContext
from infra.iam import irsa_trust_policy, pod_identity_trust_policy

if TYPE_CHECKING:  # infra.layers reads the catalog's role names; no import cycle at run time
    from infra.layers import ClusterInputs

CLUSTER_ADDONS_TYPE = component_type("infra", "ClusterAddons")


def old_parent_urn() -> str:
    """The URN the engine gave the `ClusterAddons` component `addons` that held every add-on
    resource before the catalog: directly under the stack, so no parent type in it (the engine
    leaves out the root stack's type; the mocks' URNs keep it, tools.offline.mocks)."""
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{CLUSTER_ADDONS_TYPE}::{PREFIX}"


def old_parent() -> pulumi.Alias:
    """An alias to that old parent: the engine (and the SDK's `create_urn`) builds the old URN
    from the parent URN's type, the resource's own type and name, which stay the same
    (tests/plan/test_addon_aliases.py)."""
    return pulumi.Alias(parent=old_parent_urn())


def replaced_component() -> pulumi.Alias:
    """An alias to the `ClusterAddons` component `addons` itself, for the component that takes
    its place in a stack that no longer has one (an aws-layer stack)."""
    return pulumi.Alias(name=PREFIX, type_=CLUSTER_ADDONS_TYPE)


def _named(suffix: str) -> str:
    return f"{PREFIX}-{suffix}"


def container_insights_log_group(cluster: str, kind: str) -> str:
    """The log group the CloudWatch add-on writes `kind` to: Fluent Bit's application, dataplane
    and host (chart 6.4.0 values), the agent's performance events (CloudWatch user guide)."""
    return f"/aws/containerinsights/{cluster}/{kind}"


class ContainerInsightsLogs(pulumi.ComponentResource):
    """The log groups the CloudWatch add-on writes to (/aws/containerinsights/<cluster>/...), owned
    by the stack with the configured retention. Left to the add-on, its Fluent Bit and agent create
    them without retention and they outlive `pulumi destroy`. Declared before the cluster, which
    depends on them: a destroy deletes them only after the cluster and every node are gone, when
    nothing can write to (and re-create) them."""

    log_groups: list[aws.cloudwatch.LogGroup]

    def __init__(
        self,
        name: str,
        observability: ObservabilityConfig,
        ctx: StackContext,
        scrapes: bool,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "ContainerInsightsLogs"), name, None, opts)
        self.log_groups = [
            aws.cloudwatch.LogGroup(
                _named(f"containerinsights-{kind}"),
                name=container_insights_log_group(ctx.cluster_name, kind),
                retention_in_days=observability.log_retention_days,
                tags=ctx.owned_tags,
                opts=pulumi.ResourceOptions(parent=self, aliases=[old_parent()]),
            )
            for kind in observability.log_groups(scrapes=scrapes)
        ]
        self.register_outputs({"logGroups": [g.name for g in self.log_groups]})


# --------------------------------------------------------------------------- aws layer


class AddonRole(pulumi.ComponentResource):
    """The IAM role one add-on's service account assumes through the cluster's OIDC provider
    (IRSA), with its inline policy."""

    role: aws.iam.Role
    policy: aws.iam.RolePolicy

    def __init__(self, spec: IrsaRole, cluster: Cluster, inputs: RoleInputs, opts: pulumi.ResourceOptions):
        super().__init__(component_type("infra", "AddonRole"), spec.name, None, opts)
        child = pulumi.ResourceOptions(parent=self, aliases=[old_parent()])
        self.role = aws.iam.Role(
            _named(spec.name),
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_provider_url).apply(
                lambda o: irsa_trust_policy(o[0], o[1], spec.namespace, spec.service_account)
            ),
            description=f"{spec.what} of {inputs.cluster_name}",
            opts=child,
        )
        self.policy = aws.iam.RolePolicy(_named(spec.name), role=self.role.id, policy=spec.policy(inputs), opts=child)
        self.register_outputs({"arn": self.role.arn})


class EksAddon(pulumi.ComponentResource):
    """One EKS managed add-on at the version the stack names, or the one facts/eks_addons.py pins
    for the cluster's Kubernetes minor (config.checks refuses a minor with neither), never EKS's
    moving default; with the Pod Identity role of its service account if its entry has one.
    OVERWRITE on create adopts what EKS bootstrapped."""

    addon: aws.eks.Addon

    def __init__(
        self,
        entry: Addon,
        cluster: Cluster,
        ctx: StackContext,
        inputs: EksInputs,
        waits_for: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions,
    ):
        super().__init__(component_type("infra", "EksAddon"), entry.name, None, opts)
        assert isinstance(entry.source, EksManaged)
        version = inputs.config.eks_addon_versions.resolved(cluster.kubernetes_version)[entry.source.addon_name]
        assert version is not None, f"config.checks lets no {entry.name} version through unresolved"
        child = pulumi.ResourceOptions(parent=self, aliases=[old_parent()])
        waits, extra = list(waits_for), dict[str, Any]()
        if isinstance(entry.role, PodIdentityRole):
            role, attachments = self._pod_identity_role(entry.role, cluster, ctx, child)
            waits += attachments
            account = entry.role.service_account
            extra["pod_identity_associations"] = [
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=account)
            ]
        if entry.configuration is not None:
            extra["configuration_values"] = entry.configuration(inputs)
        self.addon = aws.eks.Addon(
            _named(entry.source.addon_name),
            cluster_name=cluster.name,
            addon_name=entry.source.addon_name,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=dict(ctx.owned_tags),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=waits)),
            **extra,
        )
        self.register_outputs({"version": version})

    @staticmethod
    def _pod_identity_role(
        spec: PodIdentityRole, cluster: Cluster, ctx: StackContext, child: pulumi.ResourceOptions
    ) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
        role = aws.iam.Role(
            _named(spec.name),
            # Only the add-on's agent of this cluster (the session tags EKS Pod Identity sets).
            assume_role_policy=cluster.arn.apply(
                lambda arn: pod_identity_trust_policy(arn, spec.namespace, spec.service_account)
            ),
            description=f"{spec.what} of {ctx.cluster_name}",
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(_named(short), role=role.name, policy_arn=arn, opts=child)
            for short, arn in spec.managed_policies.items()
        ]
        return role, attachments


class EksAddons(pulumi.ComponentResource):
    """The aws layer's add-ons: an `EksAddon` per EKS managed add-on among `entries`, an
    `AddonRole` per IRSA role of the others (their charts are the cluster layer's)."""

    addons: dict[str, EksAddon]
    roles: dict[str, AddonRole]
    role_arns: dict[str, pulumi.Output[str]]
    """Role name (catalog `IrsaRole.name`) -> ARN: what the cluster layer's charts are told."""
    role_policies: list[aws.iam.RolePolicy]
    """What a chart whose role these are waits for (one stack holding both layers)."""

    def __init__(
        self,
        name: str,
        entries: Sequence[Addon],
        cluster: Cluster,
        ctx: StackContext,
        inputs: EksInputs,
        roles: RoleInputs,
        log_groups: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
        replaces_addons: bool = False,
    ):
        """`log_groups`: what the add-ons that write logs are created after (ContainerInsightsLogs).
        `replaces_addons`: a stack with no `addons` component any more (an aws-layer stack); this
        one takes its URN."""
        aliases = pulumi.ResourceOptions(aliases=[replaced_component()] if replaces_addons else None)
        opts = pulumi.ResourceOptions.merge(opts, aliases)
        super().__init__(component_type("infra", "EksAddons"), name, None, opts)
        self.addons, self.roles = {}, {}
        child = pulumi.ResourceOptions(parent=self)
        for entry in entries:
            if not isinstance(entry.source, EksManaged):
                continue
            waits = [cluster.system_node_group] if entry.after_nodes else []
            waits += [self.addons[a].addon for a in entry.after]
            if isinstance(entry.role, PodIdentityRole):  # the CloudWatch agent: the logs are its own
                waits += list(log_groups)
            self.addons[entry.name] = EksAddon(entry, cluster, ctx, inputs, waits, child)
        for entry in entries:
            if isinstance(entry.role, IrsaRole):
                self.roles[entry.role.name] = AddonRole(entry.role, cluster, roles, child)
        self.role_arns = {k: r.role.arn for k, r in self.roles.items()}
        self.role_policies = [r.policy for r in self.roles.values()]
        self.register_outputs({"roleArns": self.role_arns})


# --------------------------------------------------------------------------- cluster layer


class HelmAddon(pulumi.ComponentResource):
    """One Helm release of an add-on: its chart at the pinned version, in its namespace, with the
    values its entry renders; atomic, so a failed install rolls back."""

    release: k8s.helm.v3.Release

    def __init__(
        self,
        entry: Addon,
        inputs: ReleaseInputs,
        provider: Any,
        waits_for: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions,
    ):
        super().__init__(component_type("infra", "HelmAddon"), entry.name, None, opts)
        chart, values = entry.source, entry.values
        assert isinstance(chart, HelmChart) and values is not None
        child = pulumi.ResourceOptions(parent=self, provider=provider, aliases=[old_parent()])
        waits = list(waits_for)
        if entry.namespace_first:
            suffix, namespace = entry.namespace_first
            waits.append(
                k8s.core.v1.Namespace(
                    _named(suffix),
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels=app_labels()),
                    opts=child,
                )
            )
        self.release = k8s.helm.v3.Release(
            _named(chart.release),
            name=chart.release,
            chart=chart.chart,
            version=inputs.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
            namespace=entry.namespace,
            create_namespace=True if entry.namespace != SYSTEM_NAMESPACE else None,
            values=values(inputs),
            atomic=True,
            cleanup_on_fail=True,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=waits)),
        )
        self.register_outputs({"status": self.release.status})


class ManifestAddon(pulumi.ComponentResource):
    """One add-on applied from its release manifest (yaml/v2: CRDs first, every object awaited)."""

    manifest: pulumi.Resource

    def __init__(
        self,
        entry: Addon,
        version: str,
        config: AddonsConfig,
        provider: Any,
        waits_for: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions,
    ):
        super().__init__(component_type("infra", "ManifestAddon"), entry.name, None, opts)
        assert isinstance(entry.source, Manifest)
        transforms = entry.source.transforms(config)
        self.manifest = k8s.yaml.v2.ConfigFile(
            _named(entry.name),
            file=entry.source.url(version),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=provider,
                aliases=[old_parent()],
                depends_on=list(waits_for),
                transforms=transforms or None,
            ),
        )
        self.register_outputs({})


class ClusterAddons(pulumi.ComponentResource):
    """The cluster layer's add-ons: a `HelmAddon` or `ManifestAddon` per entry, built on the aws
    layer's hand-over (`ClusterInputs`: node groups, role ARNs, what to wait for)."""

    releases: dict[str, k8s.helm.v3.Release]
    """Helm release name -> release."""
    components: dict[str, HelmAddon | ManifestAddon]
    """Catalog name -> its component."""

    def __init__(
        self,
        name: str,
        entries: Sequence[Addon],
        inputs: ClusterInputs,
        config: AddonsConfig,
        kueue_config: str,
        kubernetes_version: str,
        provider: Any,
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`kueue_config`: Kueue's manager configuration (infra.queues); `kubernetes_version`: the
        control plane's minor (the Neuron scheduler extension runs its kube-scheduler)."""
        super().__init__(CLUSTER_ADDONS_TYPE, name, None, opts)
        self.releases, self.components = {}, {}
        groups = list(inputs.node_groups.values())
        # Pods need somewhere to run before their add-on or release can become ready.
        child = pulumi.ResourceOptions(parent=self)
        for entry in entries:
            version = str(getattr(config, entry.version_key))
            waits = [*inputs.nodes_ready, *(inputs.role_ready if entry.role else [])]
            if isinstance(entry.source, Manifest):
                self.components[entry.name] = ManifestAddon(entry, version, config, provider, waits, child)
                continue
            if not isinstance(entry.source, HelmChart):
                continue
            release_inputs = ReleaseInputs(
                config=config,
                groups=entry.serves(groups),
                version=version,
                region=inputs.region,
                kubernetes_version=kubernetes_version,
                kueue_config=kueue_config,
                cluster_name=inputs.cluster_name,
                vpc_id=inputs.vpc_id,
                role_arn=inputs.role_arns[entry.role.name] if entry.role else None,
            )
            helm = HelmAddon(entry, release_inputs, provider, waits, child)
            self.components[entry.name] = helm
            self.releases[entry.source.release] = helm.release
        self.register_outputs({"releases": {k: r.status for k, r in self.releases.items()}})

    def release(self, entry: str) -> k8s.helm.v3.Release:
        """The release of catalog entry `entry` (e.g. `kueue`, which the queues wait for)."""
        component = self.components[entry]
        assert isinstance(component, HelmAddon)
        return component.release

    def manifest(self, entry: str) -> pulumi.Resource:
        """The applied manifest of catalog entry `entry` (e.g. `mpi-operator`)."""
        component = self.components[entry]
        assert isinstance(component, ManifestAddon)
        return component.manifest
