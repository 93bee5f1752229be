"""The guardrail rules, as plain functions over plan-style resources.

A resource is a mapping shaped like an entry of the offline plan's `resources`
(`{"urn", "id", "type", "name", "protect", "dependencies", "inputs"}`, inputs camelCase as
the engine sees them). `check(resources, context)` runs every rule and returns the
violations. The same functions serve three callers: the offline plan (`tools.plan`), the
CrossGuard pack (`policy/__main__.py`, for `pulumi preview --policy-pack policy`) and the
tests, which give each rule one passing and one failing fixture (and one with unknowns).

A `ResourceRule` looks at one resource (a resource validation policy in CrossGuard); a
`StackRule` looks across resources (a stack validation policy). Every rule tolerates the
absence of the resource types it looks at, and values unknown during a preview.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policy.rules.aws import (
    check_ecr,
    check_eks_control_plane,
    check_fsx,
    check_internet_ingress,
    check_launch_template,
    check_rule_descriptions,
    check_stateful_protected,
)
from policy.rules.kubernetes import T_K8S_INGRESS, T_SERVICE, check_accelerator_taints, check_endpoints, check_pods
from policy.rules.model import Context, ResourceRule, Rule, StackRule, Violation
from policy.rules.props import (
    STATEFUL_TYPES,
    T_ECR,
    T_EGRESS,
    T_EKS_CLUSTER,
    T_EKS_COMPONENT,
    T_FSX,
    T_HELM_RELEASE,
    T_INGRESS,
    T_KUBERNETES,
    T_LAUNCH_TEMPLATE,
    T_LOG_GROUP,
    T_NODE_GROUP,
    T_SG,
    T_SG_RULE,
    Resource,
)
from policy.rules.stack import (
    check_buckets,
    check_combined_ingress,
    check_efa_node_groups,
    check_efa_security_groups,
    check_flow_log_groups,
    check_fsx_security_group,
)

PROTECT = ("protectStatefulResources",)
SG_RULES = (T_SG, T_SG_RULE, T_INGRESS, T_EGRESS)

RULES: tuple[Rule, ...] = (
    # One resource at a time: CrossGuard resource validation policies.
    ResourceRule("eks-control-plane", "EKS: private endpoint, not open to the internet, KMS secrets, all logs",
                 "mandatory", types=(T_EKS_CLUSTER, T_EKS_COMPONENT), check=check_eks_control_plane),
    ResourceRule("launch-template-hardening", "IMDSv2, hop limit 1, encrypted volumes, no public IPs", "mandatory",
                 types=(T_LAUNCH_TEMPLATE,), check=check_launch_template),
    ResourceRule("security-group-ingress", "No security-group ingress from the whole internet", "mandatory",
                 types=(T_SG, T_SG_RULE, T_INGRESS), check=check_internet_ingress),
    ResourceRule("security-group-rule-descriptions", "Every security-group rule has a description", "advisory",
                 types=SG_RULES, check=check_rule_descriptions),
    ResourceRule("accelerator-taints", "Accelerated nodes tainted; pods tolerate exactly those taints", "mandatory",
                 types=(T_NODE_GROUP, T_KUBERNETES), check=check_accelerator_taints),
    ResourceRule("ecr-repositories", "ECR: immutable tags, scan on push, KMS", "mandatory",
                 types=(T_ECR,), check=check_ecr),
    ResourceRule("fsx-durability", "FSx: persistent, backed up, final backup, own security group", "mandatory",
                 types=(T_FSX,), check=check_fsx),
    ResourceRule("stateful-protected", "FSx, S3, ECR, KMS and the EKS log group are protected from deletion",
                 "mandatory", types=(*STATEFUL_TYPES, T_LOG_GROUP), check=check_stateful_protected, config=PROTECT),
    ResourceRule("pod-security", "Pinned images; no privilege, capabilities or host access; limits; not in default",
                 "mandatory", types=(T_KUBERNETES, T_HELM_RELEASE), check=check_pods),
    ResourceRule("internal-endpoints", "Load balancers and Ingresses internal unless an explicit exception says why",
                 "mandatory", types=(T_SERVICE, T_K8S_INGRESS), check=check_endpoints),
    # Across resources: CrossGuard stack validation policies.
    StackRule("efa-security-groups", "EFA launch templates: a group allowing all traffic to and from itself",
              "mandatory", check=check_efa_security_groups),
    StackRule("efa-node-groups", "EFA node groups: one subnet, AZ, type; interfaces = EFA cards; capacity in the AZ",
              "mandatory", check=check_efa_node_groups, config=("reservationAzs", "lookUpReservations")),
    StackRule("security-group-ingress-combined", "The rules of one group do not together admit the internet",
              "mandatory", check=check_combined_ingress),
    StackRule("fsx-security-group", "The FSx security group admits the nodes' groups, no CIDRs", "mandatory",
              check=check_fsx_security_group),
    StackRule("s3-buckets", "S3 buckets: versioned, encrypted, public access blocked, old versions expire",
              "mandatory",
              check=check_buckets),
    StackRule("flow-log-groups-protected", "The log groups VPC flow logs write to are protected", "mandatory",
              check=check_flow_log_groups, config=PROTECT),
)  # fmt: skip


def check(resources: Sequence[Resource], context: Context | None = None) -> list[Violation]:
    """Every rule over the resources; violations sorted by rule, resource and message."""
    ctx = context or Context()
    return [v for rule in RULES for v in rule.run(resources, ctx)]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement == "mandatory"]


__all__ = ["RULES", "Context", "ResourceRule", "Rule", "StackRule", "Violation", "check", "mandatory"]
