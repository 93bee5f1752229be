"""The contracts between the layers: what a layer's stack exports, and how the layer above reads it.

    aws      --awsLayer, kubeconfig-->  cluster  --platform, kubeconfig-->  runs

`ClusterInputs` is what the cluster layer builds on (the Kubernetes API, the node groups,
the file system, the registry, the IAM roles of add-on service accounts); `Platform` (infra/platform.py) is what the
runs layer builds on. Each is written (`*_output`) and read (`parse_*`) here and nowhere
else. An all-in-one stack hands the same values from layer to layer in memory, so both
shapes of a stack run the same builders.

A layer reads the stack below through a `pulumi.StackReference` (`read_lower_stack`). The
values decide what the layer declares (which device plugins, which queues, whether a run
fits its node group), so they are read as plain values before anything is declared. The
kubeconfig stays a secret Output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import pulumi
from pulumi.runtime.sync_await import _sync_await
from pydantic import BaseModel, ValidationError

from config import ConfigError
from config.problems import problem
from config.storage import StorageConfig
from config.teams import TeamConfig
from facts import instances
from facts.names import LOWER_LAYER, SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup
from infra.addons.catalog import FSX_CSI_ROLE, NEURON_HEALTH_ROLE
from infra.platform import InternalLoadBalancing, Platform
from infra.storage import FileSystemRef

AWS_LAYER_OUTPUT = "awsLayer"
PLATFORM_OUTPUT = "platform"
NO_BALANCER = (
    "needs the AWS Load Balancer Controller in a VPC the stack creates; the cluster layer has none"
    " (addons.loadBalancerController in the aws stack)"
)
"""Why a runs layer refuses an internal load balancer its platform does not offer."""
RUN_OUTPUT_EXPIRY = "runOutputExpiry"
"""The aws layer's `awsLayer` key saying which run outputs its data bucket expires, and when."""
KUBECONFIG_OUTPUT = "kubeconfig"
"""The secret kubeconfig: exported by the aws layer, passed on by the cluster layer."""


def with_declared_numbers(model: type[BaseModel], value: Any) -> Any:
    """`value` (an output read through a stack reference) with each whole double turned into an
    int where `model` declares an int field: the engine carries every number as a protobuf
    double (`2` arrives as `2.0`), and the config models are strict. A fraction stays a float
    and the model refuses it."""
    if not isinstance(value, Mapping):
        return value
    out = dict(value)
    for name, info in model.model_fields.items():
        key = info.alias or name
        v = out.get(key)
        declared = {info.annotation, *get_args(info.annotation)}
        if isinstance(v, float) and v.is_integer() and int in declared:
            out[key] = int(v)
    return out


class ContractError(ConfigError):
    """The lower stack's outputs are not what this layer reads (exit 2, one line per problem)."""


@dataclass
class ClusterInputs:
    """What the cluster layer builds on: the aws layer's outputs."""

    region: str
    cluster_name: pulumi.Input[str]
    kubeconfig: pulumi.Input[str]
    node_groups: Mapping[str, NodeGroup]
    file_system: FileSystemRef
    storage: StorageConfig
    """The shared file system's size, throughput and kind (for the volume and checkpoint plans)."""
    registry_urls: Mapping[str, pulumi.Input[str]]
    role_arns: Mapping[str, pulumi.Input[str]]
    """Add-on service account -> the IAM role the aws layer made for it (infra.addons)."""
    system_group: NodeGroup | None = None
    """The system node group (MPI launchers and CPU runs); None only in hand-made test inputs."""
    # Only when one stack holds both layers: the live resources the cluster layer waits for.
    provider: Any = None
    """The Cluster's Kubernetes provider; a cluster-layer stack makes its own from `kubeconfig`."""
    nodes_ready: list[pulumi.Resource] = field(default_factory=list)
    role_ready: list[pulumi.Resource] = field(default_factory=list)
    volume_ready: list[pulumi.Resource] = field(default_factory=list)
    kubernetes_version: str | None = None
    """The control plane's Kubernetes minor (None only in hand-made test inputs)."""
    vpc_id: pulumi.Input[str] = ""
    load_balancing: InternalLoadBalancing | None = None
    """Where internal load balancers go (infra.network.internal_load_balancing)."""
    serving_metrics: bool = False
    """Whether the CloudWatch add-on (aws layer) runs the serving scraper (config scrapes_serving)."""
    expires_after: int | None = None
    """Days after which the data bucket expires exported run outputs (None: never)."""
    expiring_teams: list[str] | None = field(default_factory=list)
    """The teams whose `teams/<team>/runs/` the bucket expires; None: an aws stack from before
    this contract says nothing (the cluster layer then refuses teams while it cannot tell)."""

    @property
    def run_groups(self) -> dict[str, NodeGroup]:
        """The node groups runs and team quotas may name: the accelerated ones and the system group."""
        system = {SYSTEM_NODE_GROUP: self.system_group} if self.system_group is not None else {}
        return {**self.node_groups, **system}


# --------------------------------------------------------------------------- node groups


def storage_output(st: StorageConfig) -> dict[str, Any]:
    return {
        "capacityGib": st.storage_capacity_gib,
        "throughputPerTib": st.throughput_per_tib,
        "deploymentType": st.deployment_type,
    }


def node_group_output(g: NodeGroup) -> dict[str, Any]:
    return {
        "instanceType": g.instance.name,
        "nodes": g.nodes,
        "maxNodes": g.max_nodes,
        "availabilityZone": g.availability_zone,
        "labels": dict(g.labels),
        "releaseVersion": g.release_version,
    }


class _Reader:
    """Reads one output of the lower stack, collecting every problem with its key path."""

    def __init__(self, stack: str, output: str, value: Any):
        self.stack = stack
        self.output = output
        self.value = value
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(problem("lowerStack", "invalid", f"{self.stack} output {self.output}.{path}: {message}"))

    def get(self, path: str, kind: type | tuple[type, ...], where: Any = None) -> Any:
        """The value at `path` (dot-separated) of `where` (default: the output), or None after a problem."""
        node = self.value if where is None else where
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                self.problem(path, "missing; deploy that stack with this version of the project")
                return None
            node = node[part]
        if kind is int and isinstance(node, float) and node.is_integer():
            node = int(node)  # the engine carries every number as a double
        if not isinstance(node, kind) or (isinstance(node, bool) and kind is int):
            self.problem(path, f"expected {getattr(kind, '__name__', kind)}, got {node!r}")
            return None
        return node

    def strings(self, path: str) -> dict[str, str]:
        found = self.get(path, dict) or {}
        bad = [k for k, v in found.items() if not isinstance(v, str)]
        for k in bad:
            self.problem(f"{path}.{k}", f"expected a string, got {found[k]!r}")
        return {k: v for k, v in found.items() if isinstance(v, str)}

    def node_groups(self, path: str = "nodeGroups") -> dict[str, NodeGroup]:
        out = {}
        for name in self.get(path, dict) or {}:
            group = self.node_group(f"{path}.{name}", name)
            if group is not None:
                out[name] = group
        return out

    def node_group(self, key: str, name: str) -> NodeGroup | None:
        """One node group at `key`; the system group's instance type is a general-purpose one."""
        itype = self.get(f"{key}.instanceType", str)
        nodes, max_nodes = self.get(f"{key}.nodes", int), self.get(f"{key}.maxNodes", int)
        az, labels = self.get(f"{key}.availabilityZone", str), self.strings(f"{key}.labels")
        release = self.get(f"{key}.releaseVersion", str)
        catalog = instances.GENERAL_PURPOSE if name == SYSTEM_NODE_GROUP else instances.ACCELERATED
        if itype is not None and itype not in catalog:
            self.problem(f"{key}.instanceType", f"{itype!r} is not in this project's instance catalog")
            return None
        if itype is None or nodes is None or max_nodes is None or az is None or release is None:
            return None
        size = "systemNodeGroup.maxSize" if name == SYSTEM_NODE_GROUP else "nodeGroups[].maxSize"
        where = f"{size} of the aws stack, as read through {self.stack}"
        return NodeGroup(name, catalog[itype], nodes, max_nodes, az, labels, release, max_key=where)

    def storage(self, path: str) -> StorageConfig:
        """The file system's settings at `path` (capacityGib, throughputPerTib, deploymentType)."""
        values = {
            "storageCapacityGib": self.get(f"{path}.capacityGib", int),
            "throughputPerTib": self.get(f"{path}.throughputPerTib", int),
            "deploymentType": self.get(f"{path}.deploymentType", str),
        }
        try:
            return StorageConfig.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as e:
            self.problem(path, str(e.errors()[0]["msg"]))
            return StorageConfig()

    def done(self) -> None:
        if self.problems:
            raise ContractError(self.problems)


def _output(outputs: Mapping[str, Any], stack: str, name: str) -> Any:
    if name not in outputs:
        raise ContractError(
            [
                problem(
                    "lowerStack",
                    "required",
                    f"{stack} has no output {name!r} (it has: {', '.join(sorted(outputs)) or 'none'});"
                    " is it the right layer, deployed with this version of the project?",
                )
            ]
        )
    return outputs[name]


# --------------------------------------------------------------------------- aws -> cluster


def aws_layer_output(ci: ClusterInputs) -> dict[str, Any]:
    """The aws layer's `awsLayer` output (the kubeconfig goes out on its own, as a secret)."""
    fs = ci.file_system
    return {
        "region": ci.region,
        "clusterName": ci.cluster_name,
        "kubernetesVersion": ci.kubernetes_version,
        "nodeGroups": {name: node_group_output(g) for name, g in ci.node_groups.items()},
        **({"systemNodeGroup": node_group_output(ci.system_group)} if ci.system_group is not None else {}),
        "fileSystem": {
            "id": fs.id,
            "dnsName": fs.dns_name,
            "mountName": fs.mount_name,
            **storage_output(ci.storage),
        },
        "registryUrls": dict(ci.registry_urls),
        "serviceAccountRoleArns": dict(ci.role_arns),
        "vpcId": ci.vpc_id,
        "servingMetrics": ci.serving_metrics,
        RUN_OUTPUT_EXPIRY: run_output_expiry_output(ci.expires_after, ci.expiring_teams),
        **load_balancing_output(ci.load_balancing),
    }


def run_output_expiry_output(days: int | None, teams: list[str] | None) -> dict[str, Any]:
    """`runOutputExpiry`: whether run outputs expire, after how many days, and which teams'
    (a null crosses a stack reference as no key at all, so `expires` says it)."""
    return {"expires": days is not None, **({"days": days} if days is not None else {}), "teams": list(teams or [])}


def _run_output_expiry(r: _Reader) -> tuple[int | None, list[str] | None]:
    """The aws layer's run-output expiry: its days (None: never) and the teams it covers; (None,
    None) from an aws stack deployed before it exported them."""
    if not isinstance(r.value, Mapping) or RUN_OUTPUT_EXPIRY not in r.value:
        return None, None
    teams = r.get(f"{RUN_OUTPUT_EXPIRY}.teams", list) or []
    if not all(isinstance(t, str) for t in teams):
        r.problem(f"{RUN_OUTPUT_EXPIRY}.teams", f"expected a list of team names, got {teams!r}")
    days = r.get(f"{RUN_OUTPUT_EXPIRY}.days", int) if r.get(f"{RUN_OUTPUT_EXPIRY}.expires", bool) else None
    return days, [t for t in teams if isinstance(t, str)]


def load_balancing_output(lb: InternalLoadBalancing | None) -> dict[str, Any]:
    """`internalLoadBalancing` of a layer's output, where there is any."""
    return {"internalLoadBalancing": {"subnets": list(lb.subnets), "cidrs": list(lb.cidrs)}} if lb else {}


def _load_balancing(r: _Reader) -> InternalLoadBalancing | None:
    value = r.value.get("internalLoadBalancing") if isinstance(r.value, Mapping) else None
    if value is None:
        return None
    subnets = r.get("internalLoadBalancing.subnets", list) or []
    cidrs = r.get("internalLoadBalancing.cidrs", list) or []
    if not all(isinstance(x, str) for x in [*subnets, *cidrs]):
        r.problem("internalLoadBalancing", f"expected lists of strings, got {value!r}")
        return None
    return InternalLoadBalancing(tuple(subnets), tuple(cidrs))


def parse_aws_layer(outputs: Mapping[str, Any], kubeconfig: pulumi.Input[str], stack: str) -> ClusterInputs:
    """The aws layer's outputs as the cluster layer uses them. Raises ContractError."""
    _output(outputs, stack, KUBECONFIG_OUTPUT)
    r = _Reader(stack, AWS_LAYER_OUTPUT, _output(outputs, stack, AWS_LAYER_OUTPUT))
    inputs = ClusterInputs(
        region=r.get("region", str),
        cluster_name=r.get("clusterName", str),
        kubeconfig=kubeconfig,
        node_groups=r.node_groups(),
        system_group=r.node_group("systemNodeGroup", SYSTEM_NODE_GROUP),
        file_system=FileSystemRef(
            id=r.get("fileSystem.id", str),
            dns_name=r.get("fileSystem.dnsName", str),
            mount_name=r.get("fileSystem.mountName", str),
        ),
        storage=r.storage("fileSystem"),
        registry_urls=r.strings("registryUrls"),
        role_arns=r.strings("serviceAccountRoleArns"),
        kubernetes_version=r.get("kubernetesVersion", str),
        load_balancing=_load_balancing(r),
        vpc_id=r.get("vpcId", str) or "",
        serving_metrics=bool(r.get("servingMetrics", bool)),
    )
    inputs.expires_after, inputs.expiring_teams = _run_output_expiry(r)
    needed = [
        FSX_CSI_ROLE.name,
        *([NEURON_HEALTH_ROLE.name] if any(g.accelerator == "neuron" for g in inputs.node_groups.values()) else []),
    ]
    for role in needed:
        if role not in inputs.role_arns:
            r.problem(f"serviceAccountRoleArns.{role}", "missing; deploy that stack with this version of the project")
    r.done()
    return inputs


# --------------------------------------------------------------------------- cluster -> runs


def platform_output(p: Platform) -> dict[str, Any]:
    """The cluster layer's `platform` output: every field of `Platform` but the live provider
    and dependencies (the runs layer makes its provider from the kubeconfig)."""
    return {
        "namespaces": dict(p.namespaces),
        "storageClaim": p.storage_claim,
        "sharedMount": p.shared_mount,
        "sharedSubPaths": dict(p.shared_sub_paths),
        "nodeGroups": {name: node_group_output(g) for name, g in p.node_groups.items()},
        "registryUrls": dict(p.registry_urls),
        "queues": dict(p.queues),
        "priorityClasses": dict(p.priority_classes),
        "teams": {name: t.model_dump(by_alias=True) for name, t in p.teams.items()},
        "storage": storage_output(p.storage),
        "leaderWorkerSet": p.leader_worker_set,
        "neuronScheduler": p.neuron_scheduler,
        "podsReadyTimeoutMinutes": p.pods_ready_timeout_minutes,
        "recoveryTimeoutMinutes": p.recovery_timeout_minutes,
        "servingMetrics": p.serving_metrics,
        **load_balancing_output(p.load_balancing),
    }


def parse_platform(outputs: Mapping[str, Any], provider: Any, stack: str) -> Platform:
    """The cluster layer's outputs as the runs layer uses them. Raises ContractError."""
    _output(outputs, stack, KUBECONFIG_OUTPUT)
    r = _Reader(stack, PLATFORM_OUTPUT, _output(outputs, stack, PLATFORM_OUTPUT))
    teams = {}
    for name, value in (r.get("teams", dict) or {}).items():
        try:
            teams[name] = TeamConfig.model_validate(with_declared_numbers(TeamConfig, value))
        except ValidationError as e:
            r.problem(f"teams.{name}", str(e.errors()[0]["msg"]))
    platform = Platform(
        provider=provider,
        namespaces=r.strings("namespaces"),
        storage_claim=r.get("storageClaim", str),
        shared_mount=r.get("sharedMount", str),
        shared_sub_paths=r.strings("sharedSubPaths"),
        node_groups=r.node_groups(),
        registry_urls=r.strings("registryUrls"),
        queues=r.strings("queues"),
        priority_classes=r.strings("priorityClasses"),
        teams=teams,
        storage=r.storage("storage"),
        leader_worker_set=bool(r.get("leaderWorkerSet", bool)),
        neuron_scheduler=bool(r.get("neuronScheduler", bool)),
        pods_ready_timeout_minutes=r.get("podsReadyTimeoutMinutes", int) or 0,
        recovery_timeout_minutes=r.get("recoveryTimeoutMinutes", int) or 0,
        load_balancing=_load_balancing(r),
        serving_metrics=bool(r.get("servingMetrics", bool)),
    )
    if SYSTEM_NODE_GROUP not in platform.node_groups and isinstance(r.get("nodeGroups", dict), dict):
        # Launchers, CPU runs and start-up plans are placed on it: without it the layer cannot plan.
        r.problem(f"nodeGroups.{SYSTEM_NODE_GROUP}", "missing; deploy that stack with this version of the project")
    for queue in sorted(set(platform.queues) - set(platform.namespaces)):
        r.problem(f"namespaces.{queue}", "missing (the queue's team has no namespace); deploy that stack again")
    r.done()
    return platform


# --------------------------------------------------------------------------- reading the lower stack


def read_lower_stack(layer: str, stack_name: str) -> tuple[pulumi.StackReference, dict[str, Any]]:
    """The lower layer's StackReference and its outputs as plain values.

    The read is awaited here, before this layer declares anything, because what it declares
    depends on the values (the SDK pumps its event loop the same way for a synchronous invoke).
    Pulumi reads stack references in previews too, so `pulumi preview` sees the real values.
    """
    ref = pulumi.StackReference(f"{LOWER_LAYER[layer]}-layer", stack_name=stack_name)
    values = _sync_await(ref.outputs.future())
    return ref, dict(values or {})
