"""facts/serving.py held to its sources: the pinned images against the Neuron DLC repository and
vLLM's packages, the port and health path against vLLM's parser, the accelerators' memory against
the EC2 instance data moto ships, the Kueue integration names against Kueue 0.19.2."""

from __future__ import annotations

import boto3
import pytest
import yaml
from moto import mock_aws

from config.teams import QueueingConfig
from facts import drivers, instances, serving
from infra.queues import kueue_manager_config
from tests import upstream

DLC = upstream.facts("neuron-dlc-vllm-inference")
KUEUE = upstream.facts("kueue-integrations-v0.19.2")


@pytest.mark.parametrize("pinned", [serving.TRN2, serving.TRN1], ids=lambda i: i.image.rsplit(":", 1)[1])
def test_each_neuron_image_is_the_dlc_that_the_repository_lists(pinned: serving.ServingImage) -> None:
    (listed,) = [i for i in DLC["images"] if i["image"] == pinned.image]
    assert listed["framework"] == f"VLLM {pinned.vllm}"
    assert listed["neuron_sdk"] == pinned.neuron_sdk
    assert pinned.runtime.neuron_runtime == listed["runtime_lib"]
    # Each family the project serves there is one the repository lists for the image.
    assert {f for f in pinned.families if f != "trn1n"} <= set(listed["instance_types"]) | {"trn2u"}
    # The runtime is the SDK release's (facts/drivers.py reads the release notes).
    release_notes = drivers.runtime_of_sdk(pinned.neuron_sdk or "") or ""
    assert listed["runtime_lib"].startswith(release_notes), (release_notes, listed["runtime_lib"])


def test_the_trn1_image_is_the_last_vllm_line_there_and_marked_maintenance() -> None:
    assert serving.TRN1.maintenance and not serving.TRN2.maintenance
    assert DLC["newest_trn1_image_framework"] == f"VLLM {serving.TRN1.vllm}"
    trn1 = [i for i in DLC["images"] if "trn1" in i["instance_types"]]
    assert {i["image"] for i in trn1} == {serving.TRN1.image}


@pytest.mark.parametrize("pinned", serving.IMAGES, ids=lambda i: i.vllm + "-" + i.accelerator)
def test_the_port_and_health_path_are_the_pinned_vllms(pinned: serving.ServingImage) -> None:
    facts = upstream.facts(pinned.facts)
    assert facts["default_port"] == serving.PORT
    assert facts["health_path"] == serving.HEALTH_PATH
    assert "--tensor-parallel-size" in facts["options"] and "model_tag" in facts["positional"]


def test_every_accelerated_family_has_one_image_of_its_accelerator() -> None:
    for it in instances.ACCELERATED.values():
        pinned = serving.image_for(it)
        assert pinned is not None and pinned.accelerator == it.accelerator, it.name


def test_device_memory_is_the_ec2_data_where_moto_has_it_right() -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        for it in instances.ACCELERATED.values():
            (t,) = ec2.describe_instance_types(InstanceTypes=[it.name])["InstanceTypes"]
            devices = t.get("GpuInfo", {}).get("Gpus") or t.get("NeuronInfo", {}).get("NeuronDevices")
            mib = devices[0]["MemoryInfo"]["SizeInMiB"]
            if it.accelerator_name == "Trainium2":
                # moto 5.2.5 says 512 GiB a device; the EC2 Trn2 page: 16 chips, 1.5 TB of HBM.
                assert mib == 524288 and serving.device_memory_gib(it) == 96
                continue
            assert serving.device_memory_gib(it) == mib // 1024, it.name


def test_a_replica_takes_whole_devices_for_its_tensor_parallel_ranks() -> None:
    trn1, trn2, p5 = (instances.get(n) for n in ("trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge"))
    assert (serving.devices_for(trn1, 8), serving.devices_for(trn2, 8), serving.devices_for(p5, 8)) == (4, 2, 8)
    assert serving.devices_for(trn2, 2) == 1


def test_kueue_manages_deployments_by_the_names_kueue_registers() -> None:
    manager = yaml.safe_load(kueue_manager_config(QueueingConfig()))
    names = KUEUE["framework_names"]
    assert manager["integrations"]["frameworks"] == [names["mpijob"], names["deployment"]]
    assert KUEUE["implicitly_enabled"]["deployment"] == [names["pod"]]
    # Unlabelled pods (data Jobs, TensorBoard) stay out of Kueue even with the pod integration on.
    assert manager["manageJobsWithoutQueueName"] is False
