"""Rules of the way in and of what every AWS resource carries: the API path, the tags."""

from __future__ import annotations

from config.aws import tag_problems
from config.problems import problem
from config.stack import StackConfig
from config.stackfile import SECRET
from facts.names import CLUSTER_TAG


def api_path(cfg: StackConfig) -> list[str]:
    """The program deploys Kubernetes objects (add-ons, queues, runs) through the cluster's API,
    so the deployer needs a way in. The endpoint is private unless publicAccessCidrs is set,
    and only the EKS-managed cluster security group guards it: without public CIDRs or an
    ingress rule on TCP 443 for a network routed into the VPC, the first Kubernetes object
    times out (EKS user guide, "Cluster API server endpoint")."""
    c = cfg.cluster
    if cfg.layer in ("cluster", "runs"):
        return []  # the cluster's settings, and its path, belong to the aws layer
    if c.public_access_cidrs or c.private_access_cidrs or c.private_access_security_group_ids:
        return []
    if cfg.layer == "aws" and cfg.ci_runner.enabled:
        return []  # the in-VPC CI runner reaches the API for the layers above (its group is allowed in)
    return [
        problem(
            "cluster.publicAccessCidrs",
            "required",
            "nothing can reach the Kubernetes API (the endpoint is private and no network is"
            " allowed in), so every Kubernetes resource would time out; list your egress CIDR here (e.g."
            " [203.0.113.10/32]), or set cluster.privateAccessCidrs / cluster.privateAccessSecurityGroupIds for"
            " networks routed into the VPC (VPN, Direct Connect, peering)"
            + (
                "; or enable ciRunner, which deploys the layers above from inside the VPC" if cfg.layer == "aws" else ""
            ),
            allowed="your egress CIDR (e.g. 203.0.113.10/32)",
            hint="or cluster.privateAccessCidrs / cluster.privateAccessSecurityGroupIds",
        )
    ]


def tag_rules(cfg: StackConfig) -> list[str]:
    """`tags` reach every taggable resource (provider default tags): each key and value must pass
    the tag rules of every service involved, and with `Name` and the cluster tag the stack adds,
    stay within the per-resource limit (botocore's TagKey/TagValue/Tags shapes)."""
    # A value stored encrypted is only a placeholder offline; the real value is checked at deploy.
    tags = {k: v for k, v in cfg.tags.items() if v != SECRET}
    return tag_problems(tags, reserved=("Name", CLUSTER_TAG))


def tag_keys_distinct(cfg: StackConfig) -> list[str]:
    """`tags` reach the IAM roles too, and IAM treats tag keys case-insensitively: two keys that
    differ only in case (among themselves or with the `Name` and cluster tags the stack adds) make
    CreateRole fail ("InvalidInput: Duplicate tag keys found. Please note that Tag keys are case
    insensitive"; IAM user guide, id_tags, case sensitivity)."""
    seen: dict[str, str] = {k.lower(): k for k in ("Name", CLUSTER_TAG)}
    problems: list[str] = []
    for key in cfg.tags:
        other = seen.setdefault(key.lower(), key)
        if other != key:
            problems.append(
                problem(
                    f"tags.{key}",
                    "duplicate",
                    f"differs from {other!r} only in case, and IAM takes tag keys case-insensitively"
                    " (it refuses the role with both): keep one spelling",
                    value=repr(key),
                    hint="keep one spelling",
                )
            )
    return problems
