"""The guardrail rules, as plain functions over plan-style resources.

A resource is a mapping shaped like an entry of the offline plan's `resources`
(`{"urn", "id", "type", "name", "protect", "dependencies", "inputs"}`, inputs camelCase as
the engine sees them). `check(resources, context)` runs every rule and returns the
violations. The same functions serve three callers: the offline plan (`tools.plan`), the
CrossGuard pack (`policy/__main__.py`, for `pulumi preview --policy-pack policy`) and the
tests, which give each rule one passing and one failing fixture.

Every rule tolerates the absence of the resource types it looks at, so it keeps passing as
storage, registry and workloads land.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policy.rules.aws import (
    check_ecr,
    check_efa_node_groups,
    check_eks_control_plane,
    check_launch_templates,
    check_rule_descriptions,
    check_security_groups,
    check_stateful_protected,
    check_storage,
)
from policy.rules.kubernetes import check_accelerator_taints, check_pods
from policy.rules.model import Context, Rule, Violation
from policy.rules.props import Resource

RULES: tuple[Rule, ...] = (
    Rule("eks-control-plane", "EKS: private endpoint, no 0.0.0.0/0, KMS secrets, all logs", "mandatory",
         check_eks_control_plane),
    Rule("launch-template-hardening", "IMDSv2, hop limit 1, encrypted volumes, no public IPs", "mandatory",
         check_launch_templates),
    Rule("security-groups", "No ingress from 0.0.0.0/0; EFA groups self-referencing all traffic", "mandatory",
         check_security_groups),
    Rule("security-group-rule-descriptions", "Every security-group rule has a description", "advisory",
         check_rule_descriptions),
    Rule("efa-node-groups", "EFA node groups: one subnet, AZ, type; interfaces = EFA cards", "mandatory",
         check_efa_node_groups),
    Rule("accelerator-taints", "Accelerated nodes tainted; workloads tolerate exactly those", "mandatory",
         check_accelerator_taints),
    Rule("ecr-repositories", "ECR: immutable tags, scan on push, KMS", "mandatory", check_ecr),
    Rule("storage-durability", "FSx persistent with backups, SG to nodes; S3 versioned, encrypted, private",
         "mandatory", check_storage),
    Rule("stateful-protected", "FSx, S3, ECR and KMS are protected from deletion", "mandatory",
         check_stateful_protected),
    Rule("pod-security", "Pinned images, no privileged pods, requests/limits, not in default", "mandatory",
         check_pods),
)  # fmt: skip


def check(resources: Sequence[Resource], context: Context | None = None) -> list[Violation]:
    """Every rule over the resources; violations sorted by rule, resource and message."""
    ctx = context or Context()
    return [v for rule in RULES for v in rule.run(resources, ctx)]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement == "mandatory"]
