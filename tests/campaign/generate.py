"""Stacks made of moves that are legal key by key and meet where the stack ends up.

`stacks(seed, n)` yields `Stack`s: an example stack with 1 to 4 moves applied, as the stack-file
values `tools.plan` reads, and (for a layer split) the three files of the layers. Each move
changes keys of one or more sections the way a person would: it adds a node group, a team or a
run, scales a group to 0, buys a Capacity Block, widens the API access list, switches storage
to scratch... The values come from what each key takes alone, edges included, so what a stack
gets refused for is the combination.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from config.stackfile import load_yaml
from facts.instances import ACCELERATED
from facts.names import PROJECT
from facts.regions import availability_zones
from tests.conftest import ALL_IN_ONE_STACKS, CONFIG_NOW, example_file

NS = f"{PROJECT}:"
Values = dict[str, Any]
CR_IDS = ("cr-0123456789abcdef1", "cr-0123456789abcdef2")
BLOCK_ENDS = (-dt.timedelta(days=2), dt.timedelta(minutes=40), dt.timedelta(hours=3), dt.timedelta(days=20))
LEADS = (30, 60, 600, 262080, 262081, 2**31 - 1)
SIZES = ("256M", "2G", "16G", "26G", "30G", "100G")
CIDRS = ("10.0.0.0/16", "10.20.0.0/20", "192.168.0.0/18", "172.20.0.0/16", "10.8.0.0/19", "127.0.0.0/16")
PEERS = ("203.0.113.10/32", "198.51.100.0/24", "192.0.2.0/24", "169.254.169.254/32", "224.0.0.0/8")
PLATFORM_VARS = ("CHECKPOINT_DIR", "MASTER_ADDR", "NNODES", "RUN_ID")
TUNING_VARS = ("NCCL_DEBUG", "NEURON_RT_EXEC_TIMEOUT", "FI_EFA_USE_HUGE_PAGE", "BUCKET_CAP_MB")


@dataclass
class Stack:
    """One generated stack: its name, the `config:` map of its stack file (secrets as `secure:`), its
    moves, and the layer files when it is split."""

    name: str
    values: Values
    moves: list[str] = field(default_factory=list)
    layers: dict[str, Values] = field(default_factory=dict)
    """Stack name -> values of each layer's file (the runs layer is `name`), when split."""


def _groups(v: Values) -> list[dict[str, Any]]:
    return v.setdefault(NS + "nodeGroups", [])


def _azs(v: Values) -> list[str]:
    region = str(v["aws:region"])
    subnets = (v.get(NS + "network") or {}).get("privateSubnetIds")
    return sorted(subnets) if subnets else list(availability_zones(region) or (f"{region}a",))


def _place(v: Values, az: str, rng: random.Random) -> None:
    """What a user adding a group in `az` writes besides (config/placement.py): the AZ at the end of
    the VPC's list and the file system's AZ when the stack has none yet; left out now and then, to
    hold the refusal."""
    if rng.random() < 0.1:
        return
    network = v.setdefault(NS + "network", {})
    if "vpcId" not in network:
        azs = network.setdefault("availabilityZones", [az])
        if az not in azs:
            azs.append(az)
        if len(azs) < 2:
            azs.append(next(a for a in [*_azs(v), f"{v['aws:region']}b", f"{v['aws:region']}c"] if a not in azs))
    v.setdefault(NS + "storage", {}).setdefault("availabilityZone", az)


def add_group(v: Values, rng: random.Random) -> str:
    """A node group of any accelerated type and capacity kind, sharing a reservation or a placement
    group with another now and then."""
    itype = rng.choice(sorted(ACCELERATED))
    desired = rng.choice([0, 1, 2, 2, 4, 8, 65])
    g: dict[str, Any] = {
        "name": f"g{len(_groups(v))}",
        "instanceType": itype,
        "desiredSize": desired,
        "availabilityZone": rng.choice(_azs(v)),
    }
    if rng.random() < 0.4:
        g["maxSize"] = desired + rng.choice([0, 2, 2, 60, 90])
    if rng.random() < 0.2:
        g["maxUnavailable"] = rng.choice([1, 2, 5])
    kind = rng.choice(["on-demand", "spot", "reservation", "capacity-block"])
    cap: dict[str, Any] = {"type": kind}
    if kind in ("reservation", "capacity-block"):
        cap["reservationId"] = rng.choice(CR_IDS)
    if kind == "capacity-block":
        cap["endsAt"] = (CONFIG_NOW + rng.choice(BLOCK_ENDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        if rng.random() < 0.5:
            cap["scaleDownMinutesBeforeEnd"] = rng.choice(LEADS)
    if rng.random() < 0.3:
        cap["placementGroupName"] = "shared-pg"
    g["capacity"] = cap
    _groups(v).append(g)
    _place(v, g["availabilityZone"], rng)
    return f"group {itype} {kind} x{desired}"


def many_groups(v: Values, rng: random.Random) -> str:
    """Dozens of small groups: Kueue's flavors, the security groups' rules, the subnets' addresses."""
    n = rng.choice([28, 29, 63, 64])
    az = rng.choice(_azs(v))
    base = len(_groups(v))
    _groups(v).extend(
        {"name": f"m{base + i}", "instanceType": "trn1.32xlarge", "desiredSize": 0, "availabilityZone": az}
        for i in range(n)
    )
    _place(v, az, rng)
    return f"{n} groups"


def scale_to_zero(v: Values, rng: random.Random) -> str:
    """What the docs say: desiredSize 0 and minSize 0; sometimes maxSize goes too."""
    if not _groups(v):
        return "scale: no group"
    g = rng.choice(_groups(v))
    g.update(desiredSize=0, minSize=0)
    if rng.random() < 0.5:
        g.pop("maxSize", None)
    if rng.random() < 0.2:
        g["maxUnavailable"] = rng.choice([1, 2, 4])
    return f"scale {g['name']} to 0"


def add_teams(v: Values, rng: random.Random) -> str:
    """Teams on the groups, borrowing or not; every run joins one (of its group, mostly)."""
    names = [g["name"] for g in _groups(v)] or ["system"]
    teams = {
        f"t{i}": {
            "nodeGroup": rng.choice(names),
            "nodes": rng.choice([0, 1, 2]),
            "borrowingLimitNodes": rng.choice([None, 0, 0, 1, 4]),
            "priority": rng.choice([0, 10, 100]),
        }
        for i in range(rng.choice([1, 2, 3]))
    }
    v[NS + "teams"] = teams
    if rng.random() < 0.9:  # required with teams: keep the training namespace's queue, or not
        v.setdefault(NS + "queueing", {})["defaultQueue"] = rng.random() < 0.5
    for run in (v.get(NS + "workloads") or {}).values():
        same = [t for t, spec in teams.items() if spec["nodeGroup"] == run.get("nodeGroup")]
        run["team"] = rng.choice(same) if same and rng.random() < 0.9 else rng.choice(sorted(teams))
    return f"{len(teams)} teams"


def _run_for(group: dict[str, Any] | None, rng: random.Random) -> dict[str, Any]:
    if group is None:
        return {"recipe": "ddp-cpu", "nodeGroup": "system", "nodes": rng.choice([1, 2, 3])}
    accel = ACCELERATED[group["instanceType"]].accelerator
    recipe = rng.choice(["bert-neuron", "custom"] if accel == "neuron" else ["nemo-gpu", "custom"])
    most = group.get("maxSize", max(1, group["desiredSize"]))
    run: dict[str, Any] = {"recipe": recipe, "nodeGroup": group["name"], "nodes": rng.choice([1, most, most, 4])}
    if recipe == "custom":
        run.update(image="public.ecr.aws/example/train:1.0", command=["torchrun", "train.py"])
        if accel == "neuron":
            run["neuronSdk"] = "2.27.0"
    if recipe == "nemo-gpu":
        heads = rng.choice([32, 64])
        run["model"] = {
            "numAttentionHeads": heads,
            "numKvHeads": rng.choice([h for h in (1, 2, 4, 8, 16, 32) if heads % h == 0]),
            "tensorParallel": rng.choice([1, 2, 4, 8]),
            "pipelineParallel": 1,
            "globalBatchSize": 256,
        }
    return run


def add_run(v: Values, rng: random.Random) -> str:
    """A run on a group (or the system group), with env, health check and step time of every kind."""
    groups = _groups(v)
    run = _run_for(rng.choice(groups) if groups and rng.random() < 0.8 else None, rng)
    run["runId"] = f"run-{rng.randrange(1000):03d}"
    if rng.random() < 0.4:
        run["env"] = {rng.choice(PLATFORM_VARS + TUNING_VARS * 3): "1"}
    if rng.random() < 0.4 and run["recipe"] != "ddp-cpu":
        check: dict[str, Any] = {"enabled": rng.random() < 0.8, "messageSize": rng.choice(SIZES)}
        key = "minBusBandwidthGbps" if rng.random() < 0.15 else "minBusBandwidthGBPerSecond"
        check[key] = rng.choice([20, 400, 3200])
        run["healthCheck"] = check
    if rng.random() < 0.4:
        run["stepSeconds"] = rng.choice([1e-7, 0.0004, 2.5, 1e6])
    if NS + "teams" in v:
        run["team"] = rng.choice(sorted(v[NS + "teams"]))
    name = f"w{len(v.get(NS + 'workloads') or {})}"
    v.setdefault(NS + "workloads", {})[name] = run
    return f"run {run['recipe']} on {run['nodeGroup']}"


def network(v: Values, rng: random.Random) -> str:
    """A VPC of another range or size (a created VPC only)."""
    net = v.setdefault(NS + "network", {})
    if net.get("vpcId"):
        return "network: existing VPC"
    net["cidr"] = rng.choice(CIDRS)
    return f"cidr {net['cidr']}"


def api_access(v: Values, rng: random.Random) -> str:
    """Private-access networks by the dozen, or an odd public one."""
    cluster = v.setdefault(NS + "cluster", {})
    if rng.random() < 0.6:
        n = rng.choice([1, 20, 57, 58, 70])
        cluster["privateAccessCidrs"] = [f"10.{200 + i // 250}.{i % 250}.0/24" for i in range(n)]
        return f"{n} private access CIDRs"
    cluster["publicAccessCidrs"] = [rng.choice(PEERS)]
    return f"public access {cluster['publicAccessCidrs'][0]}"


def storage(v: Values, rng: random.Random) -> str:
    """Scratch storage with or without settings only persistent storage has."""
    s = v.setdefault(NS + "storage", {})
    if rng.random() < 0.6:
        kept = {k: s[k] for k in ("availabilityZone",) if k in s}  # where it is stays (config/placement.py)
        s.clear()
        s.update(deploymentType="SCRATCH_2", storageCapacityGib=2400, **kept)
        extra = rng.choice([{}, {}, {"backupRetentionDays": 7}, {"throughputPerTib": 500}, {"syncDeletes": True}])
        s.update(extra)
        return f"scratch {sorted(extra)}"
    s["storageCapacityGib"] = rng.choice([1200, 2400, 4800])
    return f"persistent {s['storageCapacityGib']}"


def tags(v: Values, rng: random.Random) -> str:
    v[NS + "tags"] = rng.choice([{"team": "ml"}, {"Team": "ml", "team": "ml"}, {"name": "x"}, {"CostCenter": "42"}])
    return f"tags {sorted(v[NS + 'tags'])}"


def token(v: Values, rng: random.Random) -> str:
    v[NS + "huggingFaceToken"] = rng.choice(["", "   "])
    return "empty token"


MOVES: dict[Callable[[Values, random.Random], str], int] = {
    add_group: 6,
    many_groups: 1,
    scale_to_zero: 3,
    add_teams: 3,
    add_run: 6,
    network: 2,
    api_access: 2,
    storage: 2,
    tags: 1,
    token: 1,
}


def split(name: str, v: Values) -> dict[str, Values]:
    """The aws, cluster and runs stacks of an all-in-one stack (`<name>-aws`, `-cluster`, `name`)."""
    owner = {"workloads": "runs", "huggingFaceToken": "runs", "teams": "cluster", "queueing": "cluster"}
    org = f"organization/{PROJECT}"
    files: dict[str, Values] = {
        f"{name}-aws": {"aws:region": v["aws:region"], NS + "layer": "aws"},
        f"{name}-cluster": {
            "aws:region": v["aws:region"],
            NS + "layer": "cluster",
            NS + "lowerStack": f"{org}/{name}-aws",
        },
        name: {"aws:region": v["aws:region"], NS + "layer": "runs", NS + "lowerStack": f"{org}/{name}-cluster"},
    }
    for key, value in v.items():
        if key.startswith(NS):
            layer = owner.get(key.removeprefix(NS), "aws")
            files[{"aws": f"{name}-aws", "cluster": f"{name}-cluster", "runs": name}[layer]][key] = value
    return files


def stacks(seed: int, n: int) -> Iterator[Stack]:
    """`n` stacks, the same ones for the same seed."""
    rng = random.Random(seed)
    bases = {s: load_yaml(example_file(s).read_text())["config"] for s in ALL_IN_ONE_STACKS}
    moves, weights = list(MOVES), list(MOVES.values())
    for i in range(n):
        base = rng.choice(sorted(bases))
        values = copy.deepcopy(bases[base])
        done = [m(values, rng) for m in rng.choices(moves, weights, k=rng.choice([1, 2, 2, 3, 4]))]
        stack = Stack(f"c{seed}-{i}-{base}", values, done)
        if rng.random() < 0.1:
            stack.layers = split(stack.name, values)
            stack.moves.append("split into layers")
        yield stack
