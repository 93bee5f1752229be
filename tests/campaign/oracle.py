"""What the destination would say of a planned stack, read from the plan alone and from sources
other than the code under test: botocore's models and Kubernetes' name rules (tests/fuzz.py), EC2's
instance data as moto ships it, the EC2/EKS/FSx/Kueue limits in tests/upstream/, nccl-tests' buffer
rule; and whether the settings the stack file asked for reached the objects.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import boto3
import moto

from tests import fuzz, upstream
from tests.conftest import CONFIG_NOW

NS = "llm-training-eks:"
Plan = Mapping[str, Any]
QUANTITY = re.compile(r"(?:[0-9]+|[0-9]+\.[0-9]+)(?:Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?")
"""A Kubernetes quantity as the objects write them (apimachinery resource.Quantity, no exponent)."""
GIB = 1 << 30


def _group(inputs: Mapping[str, Any]) -> str:
    """A node group's config name: its EKS name is the prefix and a suffix made at create."""
    return inputs.get("nodeGroupName") or inputs["nodeGroupNamePrefix"].removesuffix("-")


@cache
def ec2_type(name: str) -> dict[str, Any]:
    """EC2's description of an instance type, as moto ships it."""
    with moto.mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        return dict(ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"][0])


def _of(plan: Plan, *types: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] in types]


def _numbers(node: Any) -> Iterator[float]:
    if isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)
    elif isinstance(node, float):
        yield node


def node_groups(plan: Plan) -> list[str]:
    """EKS's rules of a managed node group's sizes and Capacity Blocks (botocore eks
    NodegroupScalingConfig; "max-unavailable must be within the range 1 and max size";
    EC2 user guide, ec2-capacity-blocks)."""
    blocks = upstream.facts("aws-ec2-capacity-blocks-2026-11")
    out = []
    for r in _of(plan, "aws:eks/nodeGroup:NodeGroup"):
        i, name = r["inputs"], _group(r["inputs"])
        s = i["scalingConfig"]
        if not (0 <= s["minSize"] <= s["desiredSize"] <= s["maxSize"] and s["maxSize"] >= 1):
            out.append(f"node group {name}: sizes {s}")
        unavailable = (i.get("updateConfig") or {}).get("maxUnavailable")
        if unavailable is not None and unavailable > s["maxSize"]:
            out.append(f"node group {name}: maxUnavailable {unavailable} > maxSize {s['maxSize']}")
        if i.get("capacityType") == "CAPACITY_BLOCK":
            if i["instanceTypes"][0] not in blocks["instance_types"] + blocks["ultraserver_instance_types"]:
                out.append(f"node group {name}: no Capacity Blocks of {i['instanceTypes'][0]}")
            if s["maxSize"] > blocks["max_instances_per_block"]:
                out.append(f"node group {name}: {s['maxSize']} instances in one Capacity Block")
    for r in _of(plan, "aws:autoscaling/schedule:Schedule"):
        when = dt.datetime.fromisoformat(str(r["inputs"]["startTime"]).replace("Z", "+00:00"))
        if when <= CONFIG_NOW:
            out.append(f"scheduled action {r['name']} starts in the past ({when})")
    return out


def placement(plan: Plan) -> list[str]:
    """A cluster placement group lives in one AZ; a reservation is of one type in one AZ."""
    azs = {r["id"]: r["inputs"]["availabilityZone"] for r in _of(plan, "aws:ec2/subnet:Subnet")}
    templates = {r["id"]: r["inputs"] for r in _of(plan, "aws:ec2/launchTemplate:LaunchTemplate")}
    groups: dict[str, set[str]] = defaultdict(set)
    reserved: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for r in _of(plan, "aws:eks/nodeGroup:NodeGroup"):
        lt = templates.get(r["inputs"]["launchTemplate"]["id"], {})
        outputs = (plan["outputs"].get("nodeGroups") or {}).get(_group(r["inputs"]), {})
        az = outputs.get("availabilityZone") or azs.get(r["inputs"]["subnetIds"][0], "?")
        if (lt.get("placement") or {}).get("groupName"):
            groups[lt["placement"]["groupName"]].add(az)
        target = (lt.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
        if target.get("capacityReservationId"):
            reserved[target["capacityReservationId"]].add((r["inputs"]["instanceTypes"][0], az))
    out = [f"placement group {g} spans {sorted(a)}" for g, a in groups.items() if len(a) > 1]
    return out + [f"reservation {cr} for {sorted(w)}" for cr, w in reserved.items() if len(w) > 1]


def security_groups(plan: Plan) -> list[str]:
    """Rules per security group within EC2's default 60 each way (VPC user guide, amazon-vpc-limits),
    the EKS cluster group's own inbound rule counted (EKS user guide, sec-group-reqs)."""
    limit = upstream.facts("aws-vpc-limits-2026-11")["rules_per_security_group"]
    system = [r for r in _of(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r["name"] == "cluster-system"]
    cluster_sg = system[0]["inputs"]["vpcSecurityGroupIds"][0] if system else None
    out = []
    for kind in ("Ingress", "Egress"):
        count: dict[str, int] = defaultdict(int)
        for r in _of(plan, f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule"):
            count[r["inputs"]["securityGroupId"]] += 1
        if cluster_sg is not None and kind == "Ingress":
            count[cluster_sg] += upstream.facts("aws-vpc-limits-2026-11")["eks_cluster_sg_inbound_rules"]
        out += [f"{n} {kind.lower()} rules on {sg}" for sg, n in count.items() if n > limit]
    return out


def addresses(plan: Plan) -> list[str]:
    """A created subnet holds the VPC CNI's addresses of the nodes in its AZ at maxSize: two
    interfaces' worth per node (WARM_ENI_TARGET=1), per EC2's Ipv4AddressesPerInterface, less the
    5 AWS keeps (VPC user guide, subnet-sizing), 16 left for EKS (EKS user guide, network-reqs)."""
    private = {r["id"]: r["inputs"] for r in _of(plan, "aws:ec2/subnet:Subnet") if "-private-" in r["name"]}
    need: dict[str, int] = defaultdict(lambda: 16)
    for r in _of(plan, "aws:eks/nodeGroup:NodeGroup"):
        i = r["inputs"]
        per_node = 2 * ec2_type(i["instanceTypes"][0])["NetworkInfo"]["Ipv4AddressesPerInterface"]
        for subnet in i["subnetIds"] if _group(i) == "system" else i["subnetIds"][:1]:
            need[subnet] += i["scalingConfig"]["maxSize"] * per_node
    out = []
    for subnet, n in need.items():
        if subnet in private:
            size = ipaddress.IPv4Network(private[subnet]["cidrBlock"]).num_addresses - 5
            if n > size:
                out.append(f"subnet {private[subnet]['cidrBlock']} holds {size} addresses, its nodes need {n}")
    return out


def networks(plan: Plan) -> list[str]:
    """A VPC in RFC 1918 space (VPC user guide, vpc-cidr-blocks); no loopback, link-local or
    multicast peer in a rule or an access list (IANA special-purpose registry)."""
    rfc1918 = [ipaddress.IPv4Network(c) for c in upstream.facts("aws-vpc-limits-2026-11")["rfc1918"]]
    out = []
    for r in _of(plan, "aws:ec2/vpc:Vpc"):
        net = ipaddress.IPv4Network(r["inputs"]["cidrBlock"])
        if not any(net.subnet_of(b) for b in rfc1918):
            out.append(f"VPC {net} outside RFC 1918")
    peers = [
        r["inputs"].get("cidrIpv4") for r in _of(plan, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    ]
    for r in plan["resources"]:
        vpc_config = r["inputs"].get("vpcConfig") if isinstance(r["inputs"].get("vpcConfig"), dict) else {}
        peers += list(vpc_config.get("publicAccessCidrs") or [])
    for cidr in filter(None, peers):
        net = ipaddress.ip_network(cidr)
        if net.prefixlen and (net.is_loopback or net.is_link_local or net.is_multicast):
            out.append(f"peer {cidr} is never a source")
    return out


def _queue_of(plan: Plan) -> tuple[dict[str, Any], dict[tuple[str, str], str]]:
    cqs = {
        r["inputs"]["metadata"]["name"]: r["inputs"]
        for r in plan["resources"]
        if r["inputs"].get("kind") == "ClusterQueue"
    }
    locals_ = {
        (r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r["inputs"]["spec"]["clusterQueue"]
        for r in plan["resources"]
        if r["inputs"].get("kind") == "LocalQueue"
    }
    return cqs, locals_


def _nominal(cq: Mapping[str, Any], flavor: str, resource: str) -> tuple[int, int | None]:
    for group in cq["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            if f["name"] == flavor:
                for q in f["resources"]:
                    if q["name"] == resource:
                        limit = q.get("borrowingLimit")
                        return int(q["nominalQuota"]), None if limit is None else int(limit)
    return 0, 0


def kueue(plan: Plan) -> list[str]:
    """Kueue v0.19.2's API limits and quantities, and that every run at full node-group size can be
    admitted: its quota plus what it may borrow of the other queues' nominal quota of its flavor
    (concepts/cluster_queue.md)."""
    limits = upstream.facts("kueue-clusterqueue-v0.19.2")
    cqs, locals_ = _queue_of(plan)
    out = []
    for name, cq in cqs.items():
        for group in cq["spec"]["resourceGroups"]:
            if len(group["flavors"]) > limits["max_flavors_per_resource_group"]:
                out.append(f"ClusterQueue {name}: {len(group['flavors'])} flavors")
            quantities = [
                q[k]
                for f in group["flavors"]
                for q in f["resources"]
                for k in ("nominalQuota", "borrowingLimit")
                if k in q
            ]
            out += [f"ClusterQueue {name}: quantity {q!r}" for q in quantities if not QUANTITY.fullmatch(str(q))]
    full = {
        _group(r["inputs"])
        for r in _of(plan, "aws:eks/nodeGroup:NodeGroup")
        if r["inputs"]["scalingConfig"]["desiredSize"] == r["inputs"]["scalingConfig"]["maxSize"]
    }
    for job in _of(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob"):
        meta = job["inputs"]["metadata"]
        cq = cqs.get(locals_.get((meta["namespace"], meta["labels"].get("kueue.x-k8s.io/queue-name")), ""))
        worker = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]
        flavor = worker["template"]["spec"].get("nodeSelector", {}).get("llm-training-eks/node-group")
        limits_ = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
        device = next((k for k in limits_ if k in ("nvidia.com/gpu", "aws.amazon.com/neuron")), None)
        if cq is None or device is None or flavor not in full:
            continue
        want = int(limits_[device]) * int(worker["replicas"])
        mine, borrow = _nominal(cq, flavor, device)
        lend = sum(_nominal(other, flavor, device)[0] for n, other in cqs.items() if other is not cq and n)
        if want > mine + min(lend, math.inf if borrow is None else borrow):
            out.append(f"{job['name']}: {want} {device} never admitted ({mine} + borrow {borrow} of {lend})")
    return out


def _containers(job: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    specs = job["inputs"]["spec"]["mpiReplicaSpecs"]
    return {role: specs[role]["template"]["spec"]["containers"][0] for role in ("Launcher", "Worker")}


def jobs(plan: Plan) -> list[str]:
    """Each MPIJob's rendezvous and checkpoint variables are the platform's (a run's env must not have
    replaced them); nccl-tests' buffers fit the GPU (v2.13.10 src/common.cu: three buffers with -c 1
    and 1 GiB free, EC2's GPU memory); Megatron's tensor parallelism divides the key/value heads
    (megatron-core attention.py, neuronx-nemo-megatron transformer.py)."""
    gpus = {_group(r["inputs"]): r["inputs"]["instanceTypes"][0] for r in _of(plan, "aws:eks/nodeGroup:NodeGroup")}
    units = upstream.facts("nccl-tests-v2.13.10")["size_units"]
    out = []
    for job in _of(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob"):
        name, c = job["inputs"]["metadata"]["name"], _containers(job)
        env = {e["name"]: e.get("value") for e in c["Worker"].get("env", [])}
        replicas = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
        if env.get("NNODES") != str(replicas) or not str(env.get("MASTER_ADDR", "")).startswith(f"{name}-worker-0."):
            out.append(f"{name}: NNODES {env.get('NNODES')} / MASTER_ADDR {env.get('MASTER_ADDR')} are not the job's")
        run_id = job["inputs"]["metadata"]["labels"].get("llm-training-eks/run-id", "")
        if "CHECKPOINT_DIR" in env and run_id not in str(env["CHECKPOINT_DIR"]):
            out.append(f"{name}: CHECKPOINT_DIR {env['CHECKPOINT_DIR']} is not the run's")
        script = " ".join(map(str, c["Launcher"].get("command", [])))
        size = re.search(r"all_reduce_perf -b ([0-9]+)([KMG]?) ", script)
        flavor = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"].get("nodeSelector", {})
        itype = gpus.get(flavor.get("llm-training-eks/node-group", ""))
        if size and itype:
            mib = ec2_type(itype)["GpuInfo"]["Gpus"][0]["MemoryInfo"]["SizeInMiB"]
            if 3 * int(size.group(1)) * units.get(size.group(2), 1) + GIB > mib * (1 << 20):
                out.append(f"{name}: nccl-tests buffers of {size.group(1)}{size.group(2)} exceed a {itype} GPU")
        tp = re.search(r"model\.tensor_model_parallel_size=([0-9]+)", script)
        kv = re.search(r"model\.(?:num_query_groups|num_kv_heads)=([0-9]+)", script)
        if tp and kv and int(kv.group(1)) % int(tp.group(1)):
            out.append(f"{name}: {kv.group(0)} not divisible by {tp.group(0)}")
    return out


def asked_for(plan: Plan, config: Mapping[str, Any]) -> list[str]:
    """What the stack file set reached the objects: a run's env, its bandwidth floor, the file
    system's backups; and IAM's case-insensitive tag keys (IAM user guide, id_tags)."""
    out = []
    trains = {j["inputs"]["metadata"]["name"]: j for j in _of(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob")}
    for wname, run in (config.get(NS + "workloads") or {}).items():
        job = trains.get(f"{wname}-{run.get('runId')}-train")
        if job is None:
            continue
        c = _containers(job)
        env = {e["name"]: e.get("value") for e in c["Worker"].get("env", [])}
        out += [
            f"{wname}: env {k}={v!r} not applied ({env.get(k)!r})"
            for k, v in (run.get("env") or {}).items()
            if env.get(k) != v
        ]
        floor = (run.get("healthCheck") or {}).get("minBusBandwidthGBPerSecond")
        script = " ".join(map(str, c["Launcher"].get("command", [])))
        if floor is not None and f"-v min={floor:g} " not in script:
            out.append(f"{wname}: bandwidth floor {floor} not applied")
    fsx = _of(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")
    days = (config.get(NS + "storage") or {}).get("backupRetentionDays")
    if fsx and days is not None and fsx[0]["inputs"].get("automaticBackupRetentionDays") != days:
        out.append(f"storage.backupRetentionDays {days} not applied")
    for r in _of(plan, "pulumi:providers:aws"):
        keys = [*json.loads(r["inputs"].get("defaultTags") or "{}").get("tags", {}), "Name"]
        if len({k.lower() for k in keys}) < len(keys):
            out.append(f"tag keys {keys} collide in IAM")
    return out


def problems(plan: Plan, config: Mapping[str, Any]) -> list[str]:
    """Everything the destination would refuse or break in `plan`, made from the stack file `config`."""
    found = [*fuzz.refused_by_real_systems(plan)]
    for rule in (node_groups, placement, security_groups, addresses, networks, kueue, jobs):
        found += rule(plan)
    found += asked_for(plan, config)
    found += [f"number {n} is not finite" for n in _numbers(plan) if not math.isfinite(n)]
    return found
