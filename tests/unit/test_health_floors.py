"""The fabric gate's floors against the published two-node figures.

Trainium: the Neuron docs' nccom-test "Multiple Instances Example" (aws-neuron-sdk v2.29.1,
tests/upstream/nccom-test-multi-instance-2.29.1.yaml): a floor at least 85% of the figure at the
size the gate tests, so a fabric at half its bandwidth fails; where no figure is published for
an instance type, the floor says so and uses one that a healthy fabric of that type passes.
"""

from __future__ import annotations

from facts.fabric import FLOORS, size_bytes
from tests import upstream
from tests.conftest import stack_plan
from tools import plan as plan_mod

NCCOM = upstream.facts("nccom-test-multi-instance-2.29.1")


def test_trn1_floor_is_85_percent_of_the_published_two_node_figure() -> None:
    floor = FLOORS["trn1.32xlarge"]
    published = NCCOM["busbw_gb_per_second"][size_bytes(floor.message_size)]
    assert round(0.85 * published, 1) - 0.1 <= floor.min_bus_bandwidth_gb_per_second < published
    assert published / 2 < floor.min_bus_bandwidth_gb_per_second, "a fabric at half its bandwidth fails"
    for other in ("trn1n.32xlarge", "trn2.48xlarge"):
        assert FLOORS[other].published is None and FLOORS[other].basis.startswith("no published figure")


def test_the_gate_tests_the_published_size_and_prints_the_measured_bandwidth() -> None:
    (launcher,) = [
        o["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
        for o in plan_mod.kubernetes_objects(stack_plan("trn1-llama2"))
        if o["kind"] == "MPIJob"
    ]
    assert "-b 1073741824 -e 1073741824 -d fp32 allr" in launcher
    assert "floor 40 GB/s: 85% of 47.09 GB/s" in launcher, "the launcher log says the floor and its source"
    assert 'printf "OK: all-reduce bus bandwidth %s GB/s >= %s GB/s' in launcher
    assert 'printf "FAIL: all-reduce bus bandwidth %s GB/s is below %s GB/s' in launcher


def test_the_remote_nccom_test_may_start_mpirun_as_root() -> None:
    """nccom-test starts Open MPI's mpirun on the first worker, as root over ssh; mpirun refuses
    root unless both run-as-root variables are set (open-mpi orterun(1), tests/upstream/open-mpi-orterun.yaml)."""
    wanted = upstream.facts("open-mpi-orterun")["run_as_root_env"]
    (launcher,) = [
        o["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
        for o in plan_mod.kubernetes_objects(stack_plan("trn1-llama2"))
        if o["kind"] == "MPIJob"
    ]
    (remote,) = [line for line in launcher.splitlines() if "nccom-test" in line and line.startswith("ssh ")]
    assert all(v in remote for v in wanted), remote
