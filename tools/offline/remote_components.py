"""What remote (multi-language) components create for the arguments we give them, for the mocks.

`pulumi_eks.Cluster` runs in pulumi-eks's own Node.js plugin: under mocks it registers one
resource and nothing inside it, so the plan, the tests and the policy pack would not see the
EKS cluster, the add-ons or the access entries it creates. `eks_cluster_children` states what
pulumi-eks creates, transcribed from `createCore`/`createCluster` in `nodejs/eks/cluster/cluster.ts`
and `createAccessEntries` in `nodejs/eks/cluster/authenticationMode.ts` (pulumi/pulumi-eks; the
conditions and their source lines are in tests/upstream/pulumi-eks-4.4.0.yaml). Only the branches
our arguments reach are modelled; any other argument raises `NotModelled`, so a change to the
arguments cannot silently plan against a model that does not cover it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PULUMI_EKS_VERSION = "4.4.0"
COMPUTED = "<computed>"
"""A value only the real component knows (e.g. an add-on version pulumi-eks looks up)."""

# Arguments that would take pulumi-eks into branches this model does not cover, with the value
# (or predicate) under which the model is still right.
_COVERED: dict[str, Any] = {
    "skipDefaultNodeGroup": True,  # else: default node group, instance role, instance profile
    "skipDefaultSecurityGroups": True,  # else: cluster security group and its egress rule
    "authenticationMode": "API",  # else: the aws-auth ConfigMap
}
_NOT_COVERED = (
    "fargate",
    "autoMode",
    "storageClasses",
    "createInstanceRole",
    "instanceRole",
    "instanceRoles",
    "customInstanceRolePolicy",
    "nodeGroupOptions",
    "clusterSecurityGroup",
    "creationRoleProvider",
    "vpcCniOptions",
)


class NotModelled(Exception):
    """The arguments reach a branch of the remote component this model does not transcribe."""


@dataclass(frozen=True)
class Child:
    """One resource a remote component registers."""

    type: str
    name: str
    inputs: dict[str, Any]
    parent: tuple[str, str] | None = None
    """(type, name) of the child it is parented to; None: the component itself."""
    depends_on: tuple[tuple[str, str], ...] = ()
    custom: bool = True
    provider_package: str | None = "aws"
    """Which of the component's providers it uses (None: a provider or component resource)."""
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.name)


def _check_covered(args: Mapping[str, Any]) -> None:
    for key, wanted in _COVERED.items():
        if args.get(key) != wanted:
            raise NotModelled(f"pulumi-eks Cluster with {key}={args.get(key)!r} (the model covers {wanted!r})")
    for key in _NOT_COVERED:
        if args.get(key) not in (None, False, {}, []):
            raise NotModelled(f"pulumi-eks Cluster with {key} set")
    if not args.get("serviceRole"):
        raise NotModelled("pulumi-eks Cluster without serviceRole (it would create an eksRole ServiceRole)")
    if args.get("subnetIds"):
        raise NotModelled("pulumi-eks Cluster with subnetIds (the model covers public/privateSubnetIds)")


def _eks_cluster(name: str, args: Mapping[str, Any], role_arn: str) -> Child:
    public = args.get("endpointPublicAccess", True)
    vpc: dict[str, Any] = {
        "subnetIds": [*(args.get("publicSubnetIds") or []), *(args.get("privateSubnetIds") or [])],
        "endpointPrivateAccess": args.get("endpointPrivateAccess"),
        "endpointPublicAccess": args.get("endpointPublicAccess"),
    }
    if args.get("publicAccessCidrs") is not None:
        if not public:
            # cluster.ts: a ResourceError at deploy.
            raise ValueError("pulumi-eks: `publicAccessCidrs` can only be set when `endpointPublicAccess` is true")
        vpc["publicAccessCidrs"] = args["publicAccessCidrs"]
    inputs: dict[str, Any] = {
        "name": args.get("name"),
        "roleArn": role_arn,
        "bootstrapSelfManagedAddons": args.get("bootstrapSelfManagedAddons", True),
        "vpcConfig": vpc,
        "version": args.get("version"),
        "enabledClusterLogTypes": args.get("enabledClusterLogTypes"),
        "tags": {"Name": f"{name}-eksCluster", **(args.get("clusterTags") or {}), **(args.get("tags") or {})},
    }
    if args.get("encryptionConfigKeyArn"):
        inputs["encryptionConfig"] = {"provider": {"keyArn": args["encryptionConfigKeyArn"]}, "resources": ["secrets"]}
    if args.get("authenticationMode"):
        inputs["accessConfig"] = {
            "authenticationMode": args["authenticationMode"],
            "bootstrapClusterCreatorAdminPermissions": True,
        }
    for key in ("upgradePolicy", "deletionProtection"):
        if args.get(key) is not None:
            inputs[key] = args[key]
    return Child("aws:eks/cluster:Cluster", f"{name}-eksCluster", {k: v for k, v in inputs.items() if v is not None})


def _addon(name: str, addon: str, options: Mapping[str, Any], tags: Any, parent: tuple[str, str] | None) -> Child:
    inputs = {
        "clusterName": COMPUTED,
        "addonName": addon,
        "preserve": True,
        "tags": tags,
        "resolveConflictsOnCreate": options.get("resolveConflictsOnCreate", "OVERWRITE"),
        "resolveConflictsOnUpdate": options.get("resolveConflictsOnUpdate", "OVERWRITE"),
        # Without a version, pulumi-eks looks up the most recent one for the cluster version.
        "addonVersion": options.get("version") or options.get("addonVersion") or COMPUTED,
    }
    return Child("aws:eks/addon:Addon", f"{name}-{addon}", {k: v for k, v in inputs.items() if v is not None}, parent)


def _access_entries(name: str, entries: Mapping[str, Any], cluster: Child) -> list[Child]:
    out: list[Child] = []
    for key, entry in entries.items():
        inputs = {
            "clusterName": COMPUTED,
            "principalArn": entry.get("principalArn"),
            "kubernetesGroups": entry.get("kubernetesGroups"),
            "type": entry.get("type"),
            "tags": entry.get("tags"),
            "userName": entry.get("username"),
        }
        e = Child(
            "aws:eks/accessEntry:AccessEntry",
            f"{name}-{key}",
            {k: v for k, v in inputs.items() if v is not None},
            depends_on=(cluster.key,),
        )
        out.append(e)
        for assoc, policy in (entry.get("accessPolicies") or {}).items():
            out.append(
                Child(
                    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
                    f"{name}-{key}-{assoc}",
                    {
                        "accessScope": policy.get("accessScope"),
                        "principalArn": entry.get("principalArn"),
                        "policyArn": policy.get("policyArn"),
                        "clusterName": COMPUTED,
                    },
                    parent=e.key,
                    depends_on=(e.key,),
                )
            )
    return out


def eks_cluster_children(name: str, args: Mapping[str, Any], *, role_arn: str, oidc_issuer: str) -> list[Child]:
    """The resources pulumi-eks 4.4.0 registers under `eks:index:Cluster` `name` for `args`
    (camelCase, as the SDK sends them), in registration order."""
    _check_covered(args)
    tags = args.get("tags")
    cluster = _eks_cluster(name, args, role_arn)
    children = [cluster]
    kube_proxy = args.get("kubeProxyAddonOptions") or {}
    if kube_proxy.get("enabled", True):
        children.append(_addon(name, "kube-proxy", kube_proxy, tags, None))
    children.append(
        Child(
            "pulumi:providers:kubernetes",
            f"{name}-eks-k8s",
            {"kubeconfig": COMPUTED, "enableConfigMapMutable": args.get("enableConfigMapMutable")},
            custom=True,
            provider_package=None,
        )
    )
    children += _access_entries(name, args.get("accessEntries") or {}, cluster)
    if not args.get("useDefaultVpcCni", False):
        component = Child("eks:index:VpcCniAddon", f"{name}-vpc-cni", {}, custom=False, provider_package=None)
        children += [component, _addon(name, "vpc-cni", {}, tags, component.key)]
    coredns = args.get("corednsAddonOptions") or {}
    # Only when asked for explicitly: there is no default node group, Fargate or Auto Mode.
    if coredns.get("enabled") is True or coredns.get("configurationValues"):
        children.append(_addon(name, "coredns", coredns, tags, None))
    if args.get("createOidcProvider"):
        children.append(
            Child(
                "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
                f"{name}-oidcProvider",
                {
                    "clientIdLists": ["sts.amazonaws.com"],
                    "url": f"https://{oidc_issuer}",
                    "thumbprintLists": [COMPUTED],
                },
            )
        )
    return children


# Inside the plan, these stay opaque: what their providers render or run only exists at deploy.
OPAQUE_TYPES = {
    "kubernetes:helm.sh/v3:Release": "the chart's rendered objects (its values are checked against the chart)",
    "kubernetes:yaml/v2:ConfigFile": "the objects of the fetched manifest (facts of the pinned release are tests)",
    "aws:eks/addon:Addon": "the workloads EKS installs for the add-on (its configuration values are not validated)",
}
