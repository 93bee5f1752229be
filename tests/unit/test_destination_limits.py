"""The limits config holds stacks to (facts/limits.py, facts/networks.py, the Capacity Block types)
against the sources they were read from (tests/upstream/)."""

from __future__ import annotations

import inspect
import ipaddress

from config.checks import network
from facts import limits, networks
from facts.fabric import SIZE_UNITS
from facts.instances import ACCELERATED
from infra.storage import LUSTRE_PORTS
from tests import upstream
from workloads.manifests import healthcheck


def test_capacity_blocks_as_ec2_sells_them() -> None:
    """EC2 user guide, ec2-capacity-blocks and capacity-blocks-how; AWS PCS user guide, capacity-blocks."""
    facts = upstream.facts("aws-ec2-capacity-blocks-2026-11")
    assert limits.CAPACITY_BLOCK_MAX_INSTANCES == facts["max_instances_per_block"] == 64
    assert limits.CAPACITY_BLOCK_MAX_DAYS == facts["max_days"] == 182
    assert set(facts["instance_types"]) | set(facts["ultraserver_instance_types"]) == limits.CAPACITY_BLOCK_TYPES
    assert not limits.CAPACITY_BLOCK_TYPES & set(facts["not_sold_as_blocks"])
    assert all(ACCELERATED[t].ultraserver for t in facts["ultraserver_instance_types"])
    assert {"p4de.24xlarge", "trn1n.32xlarge"} == set(ACCELERATED) - limits.CAPACITY_BLOCK_TYPES


def test_kueue_flavor_limit() -> None:
    """kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go."""
    assert upstream.facts("kueue-clusterqueue-v0.19.2")["max_flavors_per_resource_group"] == limits.KUEUE_MAX_FLAVORS


def test_vpc_limits() -> None:
    """VPC user guide: amazon-vpc-limits, subnet-sizing, vpc-cidr-blocks; EKS user guide, sec-group-reqs."""
    facts = upstream.facts("aws-vpc-limits-2026-11")
    assert facts["rules_per_security_group"] == limits.SECURITY_GROUP_RULES
    assert facts["reserved_addresses_per_subnet"] == limits.SUBNET_RESERVED_ADDRESSES
    assert facts["eks_cluster_sg_inbound_rules"] == limits.EKS_CLUSTER_SG_INBOUND
    assert list(networks.PRIVATE_USE_V4) == facts["rfc1918"]
    assert list(networks.NEVER_A_PEER_V4) == facts["never_a_peer"]


def test_never_a_peer_agrees_with_python_ipaddress() -> None:
    """Python's ipaddress implements the IANA registries: each range is loopback, link-local,
    multicast, reserved or unspecified space there, and all but multicast (never a source) is not global."""
    for block in networks.NEVER_A_PEER_V4:
        net = ipaddress.IPv4Network(block)
        assert net.is_multicast or not net.is_global
        assert net.is_loopback or net.is_link_local or net.is_multicast or net.is_reserved or block == "0.0.0.0/8"
    assert networks.never_a_peer("127.0.0.1/32") == "loopback"
    assert networks.never_a_peer("10.0.0.0/16") is None
    assert networks.private_use("172.31.0.0/16") and not networks.private_use("169.254.0.0/16")


def test_nccl_tests_buffers_units_and_the_gate() -> None:
    """nccl-tests v2.13.10 src/common.cu: AllocateBuffs, the memory limit in run(), parsesize and the
    unit of busbw; the gate runs all_reduce_perf with its data check on (-c 1: three buffers) and
    compares GB/s with GB/s."""
    facts = upstream.facts("nccl-tests-v2.13.10")
    assert facts["buffers_with_datacheck"] == limits.NCCL_TESTS_BUFFERS
    assert facts["reserved_bytes"] == limits.NCCL_TESTS_RESERVED_BYTES
    assert {k: v for k, v in SIZE_UNITS.items() if k} == facts["size_units"]
    source = inspect.getsource(healthcheck)
    assert " -c 1 " in source and facts["bus_bandwidth_unit"] == "GB/s" and "GB/s is below" in source


def test_lustre_port_ranges_are_the_storage_components() -> None:
    assert len(LUSTRE_PORTS) == network.LUSTRE_PORT_RANGES
