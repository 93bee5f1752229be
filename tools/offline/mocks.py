"""Pulumi mocks shared by the offline plan and the tests, so the two never disagree.

`PlanMocks` plays the AWS/Kubernetes providers: it echoes inputs and adds the outputs the
program reads (ids, ARNs, launch-template versions). `RecordingMonitor` sees each
registration as the engine would, including dependencies and resource options such as
`protect`, which `Mocks.new_resource` alone never sees.
"""

# size: the providers' mocks and the engine's recording of each registration, one model a reader follows

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _sync_await

from config.stackfile import SECRET
from tools.offline import remote_components
from tools.offline.versions import launch_template_version

ACCOUNT_ID = "123456789012"

# Prefixes of physical ids, so plan output reads like the real thing.
_ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/placementGroup:PlacementGroup": "pg",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "sgr",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "sgr",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs",
}


def _fake_hex(text: str, n: int = 17) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _fake_digits(text: str, n: int = 26) -> str:
    return str(int(hashlib.sha256(text.encode()).hexdigest(), 16))[:n]


def _service(type_token: str) -> str:
    module = type_token.split(":")[1].split("/")[0]
    return {"index": "aws"}.get(module, module)


STACK_REFERENCE = "pulumi:pulumi:StackReference"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


class PlanMocks(pulumi_mocks.Mocks):
    """Deterministic provider mocks: the same program always yields the same ids.

    `stack_outputs` answers stack references: referenced stack name -> its outputs, as
    `pulumi stack output --json` prints them (secrets as `[secret]`, reported secret again).
    """

    def __init__(self, region: str = "us-west-2", stack_outputs: Mapping[str, Mapping[str, Any]] | None = None):
        self.region = region
        self.stack_outputs = dict(stack_outputs or {})

    def _stack_reference(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        # pulumi.StackReference reads a `pulumi:pulumi:StackReference` with id and input `name`
        # = the referenced stack; its state holds `outputs` and `secretOutputNames`.
        name = args.inputs.get("name") or args.resource_id
        if name not in self.stack_outputs:
            known = ", ".join(sorted(self.stack_outputs)) or "none"
            raise KeyError(f"no outputs for stack reference {name!r} (known: {known})")
        outputs = dict(self.stack_outputs[name])
        secret = sorted(k for k, v in outputs.items() if v == SECRET)
        return name, {"name": name, "outputs": outputs, "secretOutputNames": secret}

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        t = args.typ
        if t == STACK_REFERENCE:
            return self._stack_reference(args)
        state: dict[str, Any] = dict(args.inputs)
        prefix = _ID_PREFIX.get(t)
        rid = f"{prefix}-{_fake_hex(t + args.name)}" if prefix else f"{args.name}-id"
        if t.startswith("aws:"):
            state.setdefault("name", args.name)
            state.setdefault(
                "arn", f"arn:aws:{_service(t)}:{self.region}:{ACCOUNT_ID}:{t.split(':')[-1].lower()}/{state['name']}"
            )
        if t == "aws:s3/bucket:Bucket":
            bucket = (
                args.inputs.get("bucket") or f"{args.inputs.get('bucketPrefix', args.name)}{_fake_hex(args.name, 12)}"
            )
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
            rid = bucket
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state["dnsName"] = f"{rid}.fsx.{self.region}.amazonaws.com"
            state["mountName"] = _fake_hex(rid, 8)
            state["arn"] = f"arn:aws:fsx:{self.region}:{ACCOUNT_ID}:file-system/{rid}"
        elif t == "aws:ecr/repository:Repository":
            state["repositoryUrl"] = f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{state['name']}"
            state["arn"] = f"arn:aws:ecr:{self.region}:{ACCOUNT_ID}:repository/{state['name']}"
        if t == "aws:cloudwatch/logGroup:LogGroup":
            state["arn"] = f"arn:aws:logs:{self.region}:{ACCOUNT_ID}:log-group:{state['name']}"
        elif t == "aws:eks/nodeGroup:NodeGroup":
            # The provider names a group from its prefix and a 26-character unique suffix
            # (terraform-plugin-sdk id.PrefixedUniqueId); EKS makes one Auto Scaling group per group.
            name = (
                args.inputs.get("nodeGroupName")
                or f"{args.inputs.get('nodeGroupNamePrefix', '')}{_fake_digits(args.name)}"
            )
            state["nodeGroupName"] = name
            asg = f"eks-{name}-{_fake_hex(args.name, 8)}"
            state["resources"] = [{"autoscalingGroups": [{"name": asg}], "remoteAccessSecurityGroupId": ""}]
        if t == "aws:kms/key:Key":
            state["keyId"] = rid
        elif t == LAUNCH_TEMPLATE:
            state["latestVersion"] = 1  # a new template; RecordingMonitor versions it over a deployed plan
        elif t == "aws:ec2/placementGroup:PlacementGroup":
            state["name"] = args.inputs.get("name", args.name)
        elif t == "eks:index:Cluster":
            name = args.inputs.get("name", args.name)
            state["kubeconfigJson"] = '{"apiVersion": "v1", "kind": "Config", "clusters": []}'
            issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{_fake_hex(name, 32).upper()}"
            state["oidcProviderUrl"] = issuer
            state["oidcIssuer"] = issuer
            state["oidcProviderArn"] = f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}"
        return rid, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        tok = args.token
        if tok == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/plan", "userId": "plan"}, []
        if tok == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if tok == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        return {}, []


@dataclass
class Registration:
    """One resource as the engine saw it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    dependencies: list[str]
    protect: bool
    retain_on_delete: bool
    provider: str
    inputs: dict[str, Any] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    """URNs this resource was known by (`aliases`, its own and those it inherits from its parent's):
    the engine takes a state entry under one of them as this resource's, not as a resource to delete."""
    delete_before_replace: bool | None = None
    """The resource's own `deleteBeforeReplace` option; None when it leaves the order to the provider."""
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)


class DuplicateUrnError(Exception):
    """Two resources of one stack with the same URN: the engine refuses the second one."""


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A MockMonitor that records every registration, with dependencies and options.

    Like the engine, it refuses a second resource with a URN already registered ("Duplicate
    resource URN '<urn>'; try giving it a unique name", pulumi/pulumi v3.259.0
    pkg/engine/lifecycletest TestDuplicateURN); Pulumi's own MockMonitor silently replaces the first.

    Remote components (pulumi-eks `Cluster`) register one resource and no children under
    mocks. This monitor registers the children pulumi-eks really creates for the arguments
    given (tools.offline.remote_components), so the plan, the tests and the policy pack see them, and
    hands the `aws.eks.Cluster` child back as the `eksCluster` output, a resource reference,
    so the program reads it as it does for real.
    """

    def __init__(self, mocks: PlanMocks, deployed: Mapping[str, Mapping[str, Any]] | None = None):
        super().__init__(mocks)
        self.deployed = dict(deployed or {})
        """The deployed plan's launch templates by URN (their `inputs` and `latestVersion`)."""
        self.registrations: dict[str, Registration] = {}
        self.region = mocks.region
        self.stack_urn = ""

    def RegisterResource(self, request: Any) -> Any:
        request = _without_resource_references(request)
        urn = self.make_urn(request.parent, request.type, request.name)
        self._refuse_duplicate(urn)
        if request.type == "pulumi:pulumi:Stack":
            self.stack_urn = urn
        else:
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            self.registrations[urn] = Registration(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                parent=request.parent,
                dependencies=sorted(set(request.dependencies)),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                provider=request.provider,
                inputs=inputs,
                aliases=self._alias_urns(request),
                delete_before_replace=(
                    bool(request.deleteBeforeReplace) if request.deleteBeforeReplaceDefined else None
                ),
                ignore_changes=list(request.ignoreChanges),
                replace_on_changes=list(request.replaceOnChanges),
            )
        response = super().RegisterResource(request)
        if request.type == LAUNCH_TEMPLATE:
            return self._versioned(urn)
        if request.type == "eks:index:Cluster":
            reg = self.resources[urn]
            state = {**reg.state, "eksCluster": self._stand_up_eks_cluster_children(urn, request)}
            self.resources[urn] = reg._replace(state=state)
            obj = _sync_await(rpc.serialize_properties(state, {}))
            return resource_pb2.RegisterResourceResponse(urn=urn, id=reg.id, object=obj)
        return response

    def _versioned(self, urn: str) -> Any:
        """A launch template's registration answered with the version EC2 would hold after this
        `pulumi up` over the deployed plan (matched by URN or alias, as the engine matches state)."""
        reg, registered = self.registrations[urn], self.resources[urn]
        old = next((self.deployed[u] for u in (urn, *reg.aliases) if u in self.deployed), None)
        state = {**registered.state, "latestVersion": launch_template_version(old, reg.inputs)}
        self.resources[urn] = registered._replace(state=state)
        obj = _sync_await(rpc.serialize_properties(state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=registered.id, object=obj)

    def ReadResource(self, request: Any) -> Any:
        """Record a read (a stack reference) like a registration: the plan shows what a layer reads."""
        urn = self.make_urn(request.parent, request.type, request.name)
        self._refuse_duplicate(urn)
        self.registrations[urn] = Registration(
            urn=urn,
            type=request.type,
            name=request.name,
            custom=True,
            parent=request.parent,
            dependencies=sorted(set(request.dependencies)),
            protect=False,
            retain_on_delete=False,
            provider=request.provider,
            inputs={k: v for k, v in rpc.deserialize_properties(request.properties).items() if v is not None},
        )
        return super().ReadResource(request)

    def _alias_urns(self, request: Any) -> list[str]:
        """The URNs of a registration's aliases, as the engine computes them (pulumi/pulumi
        pkg/resource/deploy/step_generator.go, generateAliases): each spec collapsed to a URN (a spec
        leaves out what stays the same: name, type, parent, stack, project), then multiplied by
        every alias of the parent. The SDK sends only the resource's own specs when the monitor
        supports them (as the engine and Pulumi's MockMonitor do); a child's aliases inherited
        from its parent's are the engine's work, so done here. Where the engine takes the one
        alias its state matched (of the parent, or of an alias's `parent`), this takes them all."""
        own = list(request.aliasURNs)
        for alias in request.aliases:
            if alias.urn:
                own.append(alias.urn)
                continue
            spec = alias.spec
            old = (spec.type or request.type, spec.name or request.name, spec.stack, spec.project)
            if spec.noParent or spec.parentUrn == self.stack_urn:
                parents = [self.stack_urn]  # top-level; in the mocks' URNs the stack is every top-level parent
            elif spec.parentUrn:
                parents = [spec.parentUrn, *self._aliases_of(spec.parentUrn)]
            else:
                parents = [request.parent]
            own += [self._urn(parent, *old) for parent in parents]
        return sorted(set(own) | set(self._inherited(request.parent, request.type, request.name, own)))

    def _aliases_of(self, urn: str) -> list[str]:
        reg = self.registrations.get(urn)
        return reg.aliases if reg else []

    def _inherited(self, parent: str, type_: str, name: str, own: list[str]) -> list[str]:
        """The aliases a child inherits from its parent's (step_generator.go, inheritedChildAlias):
        each alias of the parent as the parent of the child and of each of its own aliases; a
        child named `<parent name>-x` is `<alias name>-x` under a renamed parent."""
        parent_name = parent.split("::")[-1]
        known_as = [(type_, name), *((u.split("::")[2].split("$")[-1], u.split("::")[-1]) for u in own)]
        out = []
        for parent_alias in self._aliases_of(parent):
            for child_type, child_name in known_as:
                if child_name.startswith(parent_name):
                    child_name = parent_alias.split("::")[-1] + child_name[len(parent_name) :]
                out.append(self._urn(parent_alias, child_type, child_name))
        return out

    def _urn(self, parent: str, type_: str, name: str, stack: str = "", project: str = "") -> str:
        """A URN as this monitor makes them (`make_urn`), in another stack or project if given."""
        here, home, rest = self.make_urn(parent, type_, name).removeprefix("urn:pulumi:").split("::", 2)
        return "urn:pulumi:" + "::".join([stack or here, project or home, rest])

    def _refuse_duplicate(self, urn: str) -> None:
        if urn in self.registrations or urn in self.resources:
            raise DuplicateUrnError(f"Duplicate resource URN '{urn}'; try giving it a unique name")

    def _stand_up_eks_cluster_children(self, component_urn: str, request: Any) -> dict[str, str]:
        """Register what pulumi-eks creates for these arguments (tools.offline.remote_components), as the
        engine would see it; return a reference to the `aws.eks.Cluster` child (`eksCluster`)."""
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        name = inputs.get("name") or request.name
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{_fake_hex(name, 32).upper()}"
        role = self.resources.get(str(inputs.get("serviceRole")))
        role_arn = str(role.state.get("arn")) if role else remote_components.COMPUTED
        children = remote_components.eks_cluster_children(request.name, inputs, role_arn=role_arn, oidc_issuer=issuer)
        urns: dict[tuple[str, str], str] = {}
        for child in children:
            parent = urns[child.parent] if child.parent else component_urn
            urn = self.make_urn(parent, child.type, child.name)
            self._refuse_duplicate(urn)
            urns[child.key] = urn
            provider = dict(request.providers).get(child.provider_package, "") if child.provider_package else ""
            self.registrations[urn] = Registration(
                urn=urn,
                type=child.type,
                name=child.name,
                custom=child.custom,
                parent=parent,
                dependencies=sorted(urns[d] for d in child.depends_on),
                protect=False,
                retain_on_delete=False,
                provider=provider,
                inputs=child.inputs,
            )
            self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, child.name, dict(child.inputs))
        cluster_urn = urns[("aws:eks/cluster:Cluster", f"{request.name}-eksCluster")]
        state = {
            "name": name,
            "arn": f"arn:aws:eks:{self.region}:{ACCOUNT_ID}:cluster/{name}",
            "endpoint": f"https://{_fake_hex(name, 32).upper()}.gr7.{self.region}.eks.amazonaws.com",
            "version": inputs.get("version"),
            "vpcConfig": {"clusterSecurityGroupId": f"sg-{_fake_hex(name + 'cluster-sg')}"},
            "identities": [{"oidcs": [{"issuer": f"https://{issuer}"}]}],
        }
        self.resources[cluster_urn] = pulumi_mocks.MockMonitor.ResourceRegistration(cluster_urn, name, state)
        return {rpc._special_sig_key: rpc._special_resource_sig, "urn": cluster_urn, "id": name}


def _without_resource_references(request: Any) -> Any:
    """A copy of a registration whose resource-reference inputs (a Role handed to the pulumi-eks
    component, say) are replaced by the referenced URN. The engine resolves such references
    itself; the mock monitor would rebuild the resource on its own event loop and fail."""

    def has_ref(value: struct_pb2.Value) -> bool:
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            fields = value.struct_value.fields
            if fields.get(rpc._special_sig_key, struct_pb2.Value()).string_value == rpc._special_resource_sig:
                return True
            return any(has_ref(v) for v in fields.values())
        if kind == "list_value":
            return any(has_ref(v) for v in value.list_value.values)
        return False

    def strip(value: struct_pb2.Value) -> None:
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            fields = value.struct_value.fields
            if fields.get(rpc._special_sig_key, struct_pb2.Value()).string_value == rpc._special_resource_sig:
                value.string_value = fields["urn"].string_value
                return
            for v in fields.values():
                strip(v)
        elif kind == "list_value":
            for v in value.list_value.values:
                strip(v)

    if not any(has_ref(v) for v in request.object.fields.values()):
        return request
    copy = type(request)()
    copy.CopyFrom(request)
    for v in copy.object.fields.values():
        strip(v)
    return copy


def install(
    region: str,
    project: str,
    stack: str,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
    deployed: Mapping[str, Any] | None = None,
    logger: logging.Logger | None = None,
) -> RecordingMonitor:
    """Point the Pulumi runtime at fresh mocks (and a fresh root stack); return the monitor.
    `deployed`: the plan of what is deployed (plan JSON), whose launch-template versions this
    run continues from."""

    settings.ROOT.set(None)
    mocks = PlanMocks(region, stack_outputs)
    templates = {r["urn"]: r for r in (deployed or {}).get("resources", []) if r["type"] == LAUNCH_TEMPLATE}
    monitor = RecordingMonitor(mocks, templates)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, logger=logger, monitor=monitor)
    return monitor
