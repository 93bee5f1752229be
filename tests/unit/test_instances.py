"""The instance catalog, checked against the EC2 instance-type data moto ships (an
independent reference) and, for what that data leaves out of trn2u.48xlarge, the Neuron
architecture page (tests/upstream/neuron-trn2-architecture-2.32.0.yaml); and the facts derived
from it (AMI types held to botocore's eks model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import botocore.session
import pytest
from moto import mock_aws

from facts import instances as catalog
from facts import names, prices
from tests import upstream
from tests.conftest import MINIMAL, plan_exit

REQUIRED = {
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    "trn2u.48xlarge",
}
TRN2 = upstream.facts("neuron-trn2-architecture-2.32.0")


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
    # One EFA device on every card whose interface types take one, and as many as AWS allows.
    efa_cards = tuple(c["NetworkCardIndex"] for c in net["NetworkCards"] if "efa-only" in c["InterfaceTypes"])
    assert it.efa_cards == (efa_cards if it.efa else ())
    if it.efa:
        assert it.efa_interfaces == net["EfaInfo"]["MaximumEfaInterfaces"]
    if it.accelerator == "nvidia":
        gpus = ref["GpuInfo"]["Gpus"][0]
        assert (it.accelerator_name, it.accelerator_count) == (gpus["Name"], gpus["Count"])
        assert gpus["Manufacturer"] == "NVIDIA"
        assert it.gpu_memory_mib == gpus["MemoryInfo"]["SizeInMiB"]
    elif it.accelerator == "neuron" and ref.get("NeuronInfo") is None:
        # AWS's data lists no Neuron devices for trn2u; the Neuron docs say it has trn2's.
        assert name in TRN2["same_as_trn2"]
        assert (it.accelerator_name, it.accelerator_count) == ("Trainium2", TRN2["trainium2_per_instance"])
        assert it.neuron_cores == TRN2["trainium2_per_instance"] * TRN2["neuron_cores_per_trainium2"]
    elif it.accelerator == "neuron":
        devs = ref["NeuronInfo"]["NeuronDevices"][0]
        assert (it.accelerator_name, it.accelerator_count) == (devs["Name"], devs["Count"])
        assert it.neuron_cores == devs["Count"] * devs["CoreInfo"]["Count"]
    else:
        assert "GpuInfo" not in ref and "NeuronInfo" not in ref
    disks = ref.get("InstanceStorageInfo", {}).get("Disks", [{}])[0]
    assert it.nvme_disks == disks.get("Count", 0)
    assert it.nvme_total_gb == ref.get("InstanceStorageInfo", {}).get("TotalSizeInGB", 0)
    assert it.architecture in ref["ProcessorInfo"]["SupportedArchitectures"]  # the AMI type follows it
    # The VPC CNI gives pods these addresses: what a subnet must have free per node.
    assert it.ipv4_per_interface == net["Ipv4AddressesPerInterface"]


@pytest.mark.parametrize("name", sorted(catalog.ACCELERATED))
def test_derived_facts(name: str) -> None:
    it = catalog.ACCELERATED[name]
    if name.startswith("trn"):
        assert it.device_resource == "aws.amazon.com/neuron"
        assert it.neuron_family in ("trn1", "trn1n", "trn2")
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


def test_ami_types_are_eks_ami_types() -> None:
    """Every AMI type the catalog can derive is one EKS accepts (botocore eks model, AMITypes),
    per architecture: arm64 GPUs (GB200) take AL2023_ARM_64_NVIDIA; arm64 Neuron has none."""
    enum = botocore.session.get_session().get_service_model("eks").shape_for("AMITypes").enum
    assert set(catalog.AMI_TYPES.values()) <= set(enum)
    assert catalog.AMI_TYPES[("arm64", "nvidia")] == "AL2023_ARM_64_NVIDIA"
    assert "AL2023_ARM_64_NEURON" not in enum
    assert {it.ami_type for it in catalog.CATALOG.values()} <= set(enum)


def test_trn2u_is_a_trn2_ultraserver_member() -> None:
    """The Trn2 UltraServer of the Neuron docs: four trn2u.48xlarge joined by NeuronLink-v3;
    trn2u trains what trn2 trains, with trn2's logical NeuronCores (LNC=2)."""
    it, us = catalog.ACCELERATED["trn2u.48xlarge"], TRN2["ultraserver"]
    assert it.ultraserver is not None and it.name == us["member_instance_type"]
    assert (it.ultraserver.ultraserver_type, it.ultraserver.instances) == (us["type"], us["instances"])
    assert it.ultraserver.interconnect == us["interconnect"]
    assert it.ultraserver.instances * it.accelerator_count == us["trainium2"]
    assert it.neuron_family == "trn2"
    assert (
        it.ranks_per_node
        == catalog.ACCELERATED["trn2.48xlarge"].ranks_per_node
        == it.neuron_cores // TRN2["default_lnc"]
    )


def test_p6_b300_primary_card_takes_no_efa() -> None:
    """The one type whose card 0 is ENA only: 17 cards, 16 EFA devices on cards 1-16."""
    facts = upstream.facts("aws-ec2-efa-multi-card-2026-11")
    assert [n for n, it in catalog.ACCELERATED.items() if not it.efa_on_primary_card] == facts["card0_without_efa"]
    it = catalog.ACCELERATED["p6-b300.48xlarge"]
    assert (it.network_cards, it.efa_interfaces, it.efa_cards[0]) == (17, 16, 1)


GB200 = upstream.facts("aws-ec2-p6e-gb200-2026-11")


def test_p6e_gb200_is_refused_until_its_layout_gpus_and_price_are_sourceable(tmp_path: Path) -> None:
    """What is sourceable (the type and its AMI type in botocore; 17 network cards and 4 GPUs in the
    instance types guide) and what is not (moto's EC2 data has no entry to derive the EFA layout
    from, the price table no price): when moto gains the type, this fails, and the node group can
    be derived from it like p6-b200's."""
    name = GB200["instance_type"]
    session = botocore.session.get_session()
    assert name in session.get_service_model("ec2").shape_for("InstanceType").enum
    assert GB200["eks_ami_type"] in session.get_service_model("eks").shape_for("AMITypes").enum
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        with pytest.raises(botocore.exceptions.ClientError, match="InvalidInstanceType"):
            ec2.describe_instance_types(InstanceTypes=[name])
    assert GB200["in_moto_instance_data"] is False
    assert name in upstream.facts("aws-ec2-efa-multi-card-2026-11")["not_in_catalog"]
    assert name not in prices.EC2_ON_DEMAND_HOURLY and name not in catalog.CATALOG
    assert name in catalog.NOT_SUPPORTED
    ng = {"name": "gb", "instanceType": name, "desiredSize": 2, "availabilityZone": "us-west-2a"}
    code, err = plan_exit({**MINIMAL, "llm-training-eks:nodeGroups": [ng]}, tmp_path)
    assert code == 2 and "Traceback" not in err
    assert f"nodeGroups[0].instanceType: {name} is not supported yet: no EFA layout of its 17 network cards" in err, err
