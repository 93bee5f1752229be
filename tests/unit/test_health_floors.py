"""The fabric gate's floors against the published two-node figures.

Trainium: the Neuron docs' nccom-test "Multiple Instances Example" (aws-neuron-sdk v2.29.1,
tests/upstream/nccom-test-multi-instance-2.29.1.yaml): a floor at least 85% of the figure at the
size the gate tests, so a fabric at half its bandwidth fails; where no figure is published for
an instance type, the floor says so and uses one that a healthy fabric of that type passes.
"""

from __future__ import annotations

import pytest

from config.training import size_bytes
from facts import instances
from facts.instances import HEALTH_CHECK_FLOORS
from tests import upstream
from tests.conftest import stack_plan
from tools import plan as plan_mod

NCCOM = upstream.facts("nccom-test-multi-instance-2.29.1")
NEURON = [t for t in HEALTH_CHECK_FLOORS if instances.get(t).accelerator == "neuron"]


@pytest.mark.parametrize("instance_type", NEURON)
def test_neuron_floors_are_85_percent_of_the_published_two_node_figure(instance_type: str) -> None:
    floor = HEALTH_CHECK_FLOORS[instance_type]
    published = NCCOM["busbw_gb_per_second"][size_bytes(floor.message_size)]
    assert floor.min_bus_bandwidth_gb_per_second >= round(0.85 * published, 1), (instance_type, published)
    assert floor.min_bus_bandwidth_gb_per_second < published, "a healthy fabric must pass"
    cores = instances.get(instance_type).neuron_cores
    if cores * NCCOM["nodes"] == NCCOM["ranks"]:
        assert str(published) in floor.basis
    if instance_type != "trn1.32xlarge":
        # The page names no instance type; only trn1's is taken as published.
        assert floor.basis.startswith(f"no published two-node figure for {instance_type.split('.')[0]}")


def test_a_half_broken_trn1_fabric_fails_the_gate() -> None:
    published = NCCOM["busbw_gb_per_second"][1073741824]
    assert published / 2 < HEALTH_CHECK_FLOORS["trn1.32xlarge"].min_bus_bandwidth_gb_per_second


def test_the_gate_tests_the_published_size_and_prints_the_measured_bandwidth() -> None:
    (launcher,) = [
        o["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
        for o in plan_mod.kubernetes_objects(stack_plan("trn1-llama2"))
        if o["kind"] == "MPIJob"
    ]
    assert "-b 1073741824 -e 1073741824 -d fp32 allr" in launcher
    assert "floor 40 GB/s: 85% of 47.09 GB/s" in launcher
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
