"""The AWS Load Balancer Controller (kubernetes-sigs/aws-load-balancer-controller v3.5.0): its chart,
the IAM policy its install guide gives it, and the Service annotations a serving run sets.

Each value is held against the upstream repository at the tag v3.5.0 (11eb202c) in
tests/upstream/aws-load-balancer-controller-v3.5.0.yaml and chart-aws-load-balancer-controller-3.5.0.yaml:
docs/install/iam_policy.json statement by statement, helm/aws-load-balancer-controller (Chart.yaml,
values.yaml, templates/), docs/guide/service/annotations.md, docs/deploy/pod_readiness_gate.md,
pkg/config/controller_config.go; the TLS policy and the deregistration delay against the ELB guide
(tests/upstream/aws-elb-nlb-listeners-2026-12.yaml).
"""

from __future__ import annotations

from typing import Any

CHART_VERSION = "3.5.0"
"""The chart of controller v3.5.0 (Chart.yaml: version 3.5.0, appVersion v3.5.0), published in the
eks-charts repository."""
APP_VERSION = "v3.5.0"
CHART_REPOSITORY = "https://aws.github.io/eks-charts"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
"""The controller's service account (the chart's default name is the release's full name; we name it)."""
CLUSTER_TAG = "elbv2.k8s.aws/cluster"
"""The tag the controller puts on every AWS resource it creates, valued with its cluster's name
(pkg/deploy/tracking/provider.go); its IAM policy's conditions key on it."""

# --------------------------------------------------------------------------- Service annotations

_ANNOTATION = "service.beta.kubernetes.io/"
LB_TYPE = _ANNOTATION + "aws-load-balancer-type"
LB_TYPE_EXTERNAL = "external"
"""`external`: the controller (not the legacy cloud provider) reconciles the Service."""
NLB_TARGET_TYPE = _ANNOTATION + "aws-load-balancer-nlb-target-type"
NLB_TARGET_IP = "ip"
"""Targets are pod IPs (the VPC CNI gives each pod one): no NodePort hop through kube-proxy."""
LB_SCHEME = _ANNOTATION + "aws-load-balancer-scheme"
LB_SCHEME_INTERNAL = "internal"
LB_SUBNETS = _ANNOTATION + "aws-load-balancer-subnets"
"""Subnet ids or Name tags, one per AZ."""
SSL_CERT = _ANNOTATION + "aws-load-balancer-ssl-cert"
SSL_PORTS = _ANNOTATION + "aws-load-balancer-ssl-ports"
TLS_PORT = 443
SSL_NEGOTIATION_POLICY = _ANNOTATION + "aws-load-balancer-ssl-negotiation-policy"
CONTROLLER_DEFAULT_TLS_POLICY = "ELBSecurityPolicy-2016-08"
"""What the controller gives a TLS listener without the annotation (pkg/config/controller_config.go
defaultSSLPolicy): TLS 1.0 and 1.1 accepted."""
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
"""The listener's policy here: TLS 1.3 and 1.2 only (the ELB guide's "Security policies for your
Network Load Balancer"; the controller's own example of the annotation)."""
TLS_POLICY_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
TARGET_GROUP_ATTRIBUTES = _ANNOTATION + "aws-load-balancer-target-group-attributes"
DEREGISTRATION_DELAY = "deregistration_delay.timeout_seconds"
DEREGISTRATION_DELAY_DEFAULT = 300
"""ELB's default: a deregistered target keeps its open connections this long (seconds)."""
READINESS_GATE_INJECT = "elbv2.k8s.aws/pod-readiness-gate-inject"
"""The namespace label whose pods get the controller's target-health readiness gate
(docs/deploy/pod_readiness_gate.md; the chart's pod webhook selects it, failurePolicy Ignore): a
new pod is ready only once its target is healthy, so a rollout or a drain never leaves the target
group with no healthy target. ip targets only."""
READINESS_GATE_INJECT_ENABLED = "enabled"

# --------------------------------------------------------------------------- IAM policy

IAM_POLICY_VERSION = "2012-10-17"
_ELB_RESOURCES = [
    "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
    "arn:aws:elasticloadbalancing:*:*:loadbalancer/net/*/*",
    "arn:aws:elasticloadbalancing:*:*:loadbalancer/app/*/*",
]
_REQUEST_TAGGED = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "false"}}
_RESOURCE_TAGGED = {"Null": {f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}
_RETAG_OWN = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "true", f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}


def _allow(
    actions: list[str], resource: str | list[str] = "*", condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "Effect": "Allow",
        "Action": actions,
        "Resource": resource,
        **({"Condition": condition} if condition else {}),
    }


IAM_POLICY_STATEMENTS: list[dict[str, Any]] = [
    _allow(
        ["iam:CreateServiceLinkedRole"],
        condition={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
    ),
    _allow(
        [
            *(
                f"ec2:{a}"
                for a in (
                    "DescribeAccountAttributes",
                    "DescribeAddresses",
                    "DescribeAvailabilityZones",
                    "DescribeInternetGateways",
                    "DescribeVpcs",
                    "DescribeVpcPeeringConnections",
                    "DescribeSubnets",
                    "DescribeSecurityGroups",
                    "DescribeInstances",
                    "DescribeNetworkInterfaces",
                    "DescribeTags",
                    "GetCoipPoolUsage",
                    "DescribeCoipPools",
                    "GetSecurityGroupsForVpc",
                    "DescribeIpamPools",
                    "DescribeRouteTables",
                )
            ),
            *(
                f"elasticloadbalancing:{a}"
                for a in (
                    "DescribeLoadBalancers",
                    "DescribeLoadBalancerAttributes",
                    "DescribeListeners",
                    "DescribeListenerCertificates",
                    "DescribeSSLPolicies",
                    "DescribeRules",
                    "DescribeTargetGroups",
                    "DescribeTargetGroupAttributes",
                    "DescribeTargetHealth",
                    "DescribeTags",
                    "DescribeTrustStores",
                    "DescribeListenerAttributes",
                    "DescribeCapacityReservation",
                )
            ),
        ]
    ),
    _allow(
        [
            "cognito-idp:DescribeUserPoolClient",
            "acm:ListCertificates",
            "acm:DescribeCertificate",
            "iam:ListServerCertificates",
            "iam:GetServerCertificate",
            "waf-regional:GetWebACL",
            "waf-regional:GetWebACLForResource",
            "waf-regional:AssociateWebACL",
            "waf-regional:DisassociateWebACL",
            "wafv2:GetWebACL",
            "wafv2:GetWebACLForResource",
            "wafv2:AssociateWebACL",
            "wafv2:DisassociateWebACL",
            "shield:GetSubscriptionState",
            "shield:DescribeProtection",
            "shield:CreateProtection",
            "shield:DeleteProtection",
        ]
    ),
    _allow(["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]),
    _allow(["ec2:CreateSecurityGroup"]),
    _allow(
        ["ec2:CreateTags"],
        "arn:aws:ec2:*:*:security-group/*",
        {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **_REQUEST_TAGGED},
    ),
    _allow(["ec2:CreateTags", "ec2:DeleteTags"], "arn:aws:ec2:*:*:security-group/*", _RETAG_OWN),
    _allow(
        ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"],
        condition=_RESOURCE_TAGGED,
    ),
    _allow(
        ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
        condition=_REQUEST_TAGGED,
    ),
    _allow(
        [
            "elasticloadbalancing:CreateListener",
            "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:CreateRule",
            "elasticloadbalancing:DeleteRule",
        ]
    ),
    _allow(["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"], list(_ELB_RESOURCES), _RETAG_OWN),
    _allow(
        ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
        [
            "arn:aws:elasticloadbalancing:*:*:listener/net/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener-rule/net/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener-rule/app/*/*/*",
        ],
    ),
    _allow(
        [
            f"elasticloadbalancing:{a}"
            for a in (
                "ModifyLoadBalancerAttributes",
                "SetIpAddressType",
                "SetSecurityGroups",
                "SetSubnets",
                "DeleteLoadBalancer",
                "ModifyTargetGroup",
                "ModifyTargetGroupAttributes",
                "DeleteTargetGroup",
                "ModifyListenerAttributes",
                "ModifyCapacityReservation",
                "ModifyIpPools",
            )
        ],
        condition=_RESOURCE_TAGGED,
    ),
    _allow(
        ["elasticloadbalancing:AddTags"],
        list(_ELB_RESOURCES),
        {
            "StringEquals": {"elasticloadbalancing:CreateAction": ["CreateTargetGroup", "CreateLoadBalancer"]},
            **_REQUEST_TAGGED,
        },
    ),
    _allow(
        ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
        "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
    ),
    _allow(
        [
            "elasticloadbalancing:SetWebAcl",
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:AddListenerCertificates",
            "elasticloadbalancing:RemoveListenerCertificates",
            "elasticloadbalancing:ModifyRule",
            "elasticloadbalancing:SetRulePriorities",
        ]
    ),
]
"""docs/install/iam_policy.json at v3.5.0, statement by statement, in its order."""


def scoped_to_cluster(statement: dict[str, Any], cluster_name: str) -> dict[str, Any]:
    """`statement` with each "the cluster tag is present" condition (Null ...: "false") narrowed to
    "the cluster tag is this cluster's name" (StringEquals): upstream lets the controller change any
    load balancer or security group any controller in the account created; this one may change only
    its own cluster's. "Absent" conditions (Null ...: "true") stay."""
    condition = statement.get("Condition")
    if not condition:
        return dict(statement)
    null = {k: v for k, v in condition.get("Null", {}).items() if v != "false"}
    present = {k: cluster_name for k, v in condition.get("Null", {}).items() if v == "false"}
    equals = {**condition.get("StringEquals", {}), **present}
    narrowed = {**({"StringEquals": equals} if equals else {}), **({"Null": null} if null else {})}
    return {**statement, "Condition": narrowed}


def iam_policy(cluster_name: str) -> dict[str, Any]:
    """The controller's policy: upstream's statements, their cluster-tag conditions on this cluster."""
    return {
        "Version": IAM_POLICY_VERSION,
        "Statement": [scoped_to_cluster(s, cluster_name) for s in IAM_POLICY_STATEMENTS],
    }
