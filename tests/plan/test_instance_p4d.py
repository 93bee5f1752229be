"""p4d.24xlarge, added by following docs/contributing.md's "Add an instance type" checklist: a stack
file may name it, and a Capacity Block node group of it plans with one EFA device on each of its four
network cards and a fabric acceptance run gated on a floor that says where it comes from.

Sources: the EC2 instance-type data moto 5.x ships (4 network cards, 4 EFA interfaces, 8 A100 of
40960 MiB: tests/unit/test_instances.py holds the entry to it); the EC2 user guide's Capacity Block
types (tests/upstream/aws-ec2-capacity-blocks-2026-11.yaml lists p4d, not p4de); awsome-distributed-ai
micro-benchmarks/nccl-tests/README.md for the p4de figure p4d's floor borrows
(tests/upstream/awsome-distributed-ai-allreduce-figures.yaml, `borrowed`)."""

from __future__ import annotations

from typing import Any

from facts import fabric
from facts import instances as catalog
from tests.conftest import MINIMAL, resources, run_plan

P4D = {
    "name": "a100",
    "instanceType": "p4d.24xlarge",
    "desiredSize": 2,
    "minSize": 0,
    "availabilityZone": "us-west-2d",
    "capacity": {"type": "capacity-block", "reservationId": "cr-0a100a100a100a100", "endsAt": "2027-03-01T11:30:00Z"},
}
STACK = {
    **MINIMAL,
    "llm-training-eks:nodeGroups": [P4D],
    "llm-training-eks:workloads": {
        "fabric": {"recipe": "fabric-gpu", "nodeGroup": "a100", "nodes": 2, "runId": "accept-001"}
    },
}


def _plan() -> dict[str, Any]:
    return run_plan(STACK, "p4d-test")


def test_a_p4d_capacity_block_group_plans_with_four_efa_devices_and_its_floor() -> None:
    plan = _plan()
    (ng,) = [
        r
        for r in resources(plan, "aws:eks/nodeGroup:NodeGroup")
        if r["inputs"]["instanceTypes"] == [P4D["instanceType"]]
    ]
    assert (ng["inputs"]["capacityType"], ng["inputs"]["amiType"]) == ("CAPACITY_BLOCK", "AL2023_x86_64_NVIDIA")
    (lt,) = [r["inputs"] for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r["name"] == "ng-a100-lt"]
    efa = [n for n in lt["networkInterfaces"] if n["interfaceType"] in ("efa", "efa-only")]
    assert sorted(n["networkCardIndex"] for n in efa) == [0, 1, 2, 3]
    assert lt["instanceMarketOptions"]["marketType"] == "capacity-block"
    (job,) = [
        r["inputs"] for r in resources(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob") if r["name"].endswith("-accept")
    ]
    script = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
    floor = fabric.FLOORS["p4d.24xlarge"]
    assert f"-v min={floor.min_bus_bandwidth_gb_per_second:g} " in script and floor.basis in script
    # 8 GPUs and 4 EFA devices per worker, from the catalog's entry
    (worker,) = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    limits = worker["resources"]["limits"]
    assert (limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == ("8", "4")
    it = catalog.ACCELERATED["p4d.24xlarge"]
    assert (it.gpu_memory_mib, it.cuda_arch) == (40960, 80)
