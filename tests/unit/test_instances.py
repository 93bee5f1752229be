"""The instance catalog, checked against the EC2 instance-type data moto ships (an
independent reference), and the facts derived from it."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from facts import instances as catalog
from facts import names

REQUIRED = {
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
}


@pytest.fixture(scope="module")
def ec2_types() -> dict[str, dict[str, Any]]:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        out = ec2.describe_instance_types(InstanceTypes=list(catalog.CATALOG))["InstanceTypes"]
    return {t["InstanceType"]: t for t in out}


def test_catalog_has_every_type_the_project_supports() -> None:
    assert set(catalog.ACCELERATED) == REQUIRED
    assert catalog.GENERAL_PURPOSE


@pytest.mark.parametrize("name", sorted(catalog.CATALOG))
def test_entry_matches_ec2_data(name: str, ec2_types: dict[str, dict[str, Any]]) -> None:
    it = catalog.CATALOG[name]
    ref = ec2_types[name]
    net = ref["NetworkInfo"]
    assert it.vcpus == ref["VCpuInfo"]["DefaultVCpus"]
    assert it.memory_gib * 1024 == ref["MemoryInfo"]["SizeInMiB"]
    assert it.efa == net.get("EfaSupported", False)
    assert it.network_cards == net["MaximumNetworkCards"]
    if it.efa:
        assert it.efa_interfaces == net["EfaInfo"]["MaximumEfaInterfaces"]
    if it.accelerator == "nvidia":
        gpus = ref["GpuInfo"]["Gpus"][0]
        assert (it.accelerator_name, it.accelerator_count) == (gpus["Name"], gpus["Count"])
        assert gpus["Manufacturer"] == "NVIDIA"
        assert it.gpu_memory_mib == gpus["MemoryInfo"]["SizeInMiB"]
    elif it.accelerator == "neuron":
        devs = ref["NeuronInfo"]["NeuronDevices"][0]
        assert (it.accelerator_name, it.accelerator_count) == (devs["Name"], devs["Count"])
        assert it.neuron_cores == devs["Count"] * devs["CoreInfo"]["Count"]
    else:
        assert "GpuInfo" not in ref and "NeuronInfo" not in ref
    disks = ref.get("InstanceStorageInfo", {}).get("Disks", [{}])[0]
    assert it.nvme_disks == disks.get("Count", 0)
    assert it.nvme_total_gb == ref.get("InstanceStorageInfo", {}).get("TotalSizeInGB", 0)
    assert "x86_64" in ref["ProcessorInfo"]["SupportedArchitectures"]  # the AL2023 x86_64 AMI types
    # The VPC CNI gives pods these addresses: what a subnet must have free per node.
    assert it.ipv4_per_interface == net["Ipv4AddressesPerInterface"]


@pytest.mark.parametrize("name", sorted(catalog.ACCELERATED))
def test_derived_facts(name: str) -> None:
    it = catalog.ACCELERATED[name]
    if name.startswith("trn"):
        assert it.device_resource == "aws.amazon.com/neuron"
        assert it.ami_type == "AL2023_x86_64_NEURON"
        assert it.labels["aws.amazon.com/neuron.present"] == "true"
    else:
        assert it.device_resource == "nvidia.com/gpu"
        assert it.ami_type == "AL2023_x86_64_NVIDIA"
        assert it.labels["nvidia.com/gpu.present"] == "true"
    assert [(t.key, t.effect, t.eks_effect) for t in it.taints] == [(it.device_resource, "NoSchedule", "NO_SCHEDULE")]
    assert it.labels[names.EFA_LABEL] == "true"
    assert it.taints[0].toleration() == {
        "key": it.device_resource,
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
    assert 0 < it.allocatable_memory_gib < it.memory_gib


def test_general_purpose_types_are_untainted_standard_nodes() -> None:
    for it in catalog.GENERAL_PURPOSE.values():
        assert it.taints == () and it.ami_type == "AL2023_x86_64_STANDARD" and not it.efa


def test_unknown_type_error_names_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"trn1\.32xlarge"):
        catalog.get("trn9.xlarge")
