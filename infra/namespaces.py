"""The tenants' namespaces and their NetworkPolicies (cluster layer; what they hold is in
`infra.tenancy`). They were declared by the add-ons component before the add-on catalog; they
keep their names (`addons-workloads`, `addons-team-<key>`) and an alias to that parent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from facts import load_balancer_controller as lbc
from facts.names import DEFAULT_QUEUE, KUEUE_MANAGED_LABEL, app_labels, component_type
from infra import tenancy
from infra.addons.components import old_parent
from infra.tenancy import Tenant

PREFIX = "addons"
"""The prefix of the resource names, from the component that held them first."""


class TenantNamespaces(pulumi.ComponentResource):
    """A namespace per tenant (team, or `default`) and the NetworkPolicies of each."""

    namespaces: dict[str, k8s.core.v1.Namespace]
    """Tenant -> its namespace."""
    network_policies: dict[str, list[k8s.networking.v1.NetworkPolicy]]
    """Tenant -> the NetworkPolicies of its namespace."""

    def __init__(
        self,
        name: str,
        tenants: Mapping[str, Tenant],
        provider: Any,
        opts: pulumi.ResourceOptions | None = None,
        readiness_gates: bool = False,
    ):
        """`readiness_gates`: the AWS Load Balancer Controller runs; its pod webhook gives the pods
        of these namespaces that are load-balancer targets the target-health readiness gate."""
        super().__init__(component_type("infra", "TenantNamespaces"), name, None, opts)
        # Kueue's pod-based integrations (and their fail-closed webhooks) reach these namespaces only.
        labels = {**app_labels(), KUEUE_MANAGED_LABEL: "true"}
        if readiness_gates:
            labels[lbc.READINESS_GATE_INJECT] = lbc.READINESS_GATE_INJECT_ENABLED
        self.namespaces, self.network_policies = {}, {}
        child = pulumi.ResourceOptions(parent=self, provider=provider, aliases=[old_parent()])
        for tenant in tenants.values():
            # A stack without teams keeps the name it always had (`addons-workloads`).
            short = "workloads" if tenant.key == DEFAULT_QUEUE else f"team-{tenant.key}"
            namespace = k8s.core.v1.Namespace(
                f"{PREFIX}-{short}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=tenant.namespace, labels=dict(labels)),
                opts=child,
            )
            self.namespaces[tenant.key] = namespace
            in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace]))
            self.network_policies[tenant.key] = [
                k8s.networking.v1.NetworkPolicy(
                    f"{PREFIX}-{short}-{policy['metadata']['name']}",
                    metadata=policy["metadata"],
                    spec=policy["spec"],
                    opts=in_namespace,
                )
                for policy in tenancy.namespace_policies(tenant.namespace)
            ]
        self.register_outputs({"namespaces": {k: n.metadata.name for k, n in self.namespaces.items()}})
