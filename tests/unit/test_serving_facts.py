"""facts/serving.py held to its sources: the pinned images against the Neuron DLC repository and
vLLM's packages, the port and health path against vLLM's parser, the accelerators' memory against
the EC2 instance data moto ships, the Kueue integration names against Kueue 0.19.2."""

from __future__ import annotations

import shlex
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from config.teams import QueueingConfig
from facts import drivers, instances, needs, serving
from infra.queues import kueue_manager_config
from tests import upstream
from tests.conftest import resources, stack_plan
from workloads.manifests import hub as hub_manifests

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
            if devices is None:  # moto 5.2.5 lists trn2u without NeuronInfo: a trn2u is a trn2's devices
                assert it.family == "trn2u", it.name
                assert serving.device_memory_gib(it) == serving.device_memory_gib(instances.get("trn2.48xlarge"))
                continue
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
    assert names["mpijob"] in manager["integrations"]["frameworks"]
    assert names["deployment"] in manager["integrations"]["frameworks"]
    assert KUEUE["implicitly_enabled"]["deployment"] == [names["pod"]]
    # Unlabelled pods (data Jobs, TensorBoard) stay out of Kueue even with the pod integration on.
    assert manager["manageJobsWithoutQueueName"] is False


HUB_CLI = upstream.facts("huggingface-hub-cli")


@pytest.mark.parametrize("pinned", serving.IMAGES, ids=lambda i: i.vllm + "-" + i.accelerator)
def test_each_images_hub_cli_is_the_one_its_vllm_pins(pinned: serving.ServingImage) -> None:
    """vLLM pins transformers, transformers the hub's major: the program and the form of
    `--include` of the staging Job are those of every hub the image can hold."""
    lowest = HUB_CLI["hub_of_vllm"][pinned.vllm]
    same_major = [v for v in HUB_CLI["hub"] if v.split(".")[0] == lowest.split(".")[0]]
    for version in same_major:
        hub = HUB_CLI["hub"][version]
        assert pinned.hub_cli.program in hub["console_scripts"], (version, hub["console_scripts"])
        if "include_each" in hub:
            assert pinned.hub_cli.include_each == hub["include_each"], version
    transformers = HUB_CLI["vllm_requires_transformers"][pinned.vllm]
    assert lowest in HUB_CLI["transformers_requires_hub"][transformers.split(",")[0].removeprefix(">=")]


def _download(script: str) -> list[str]:
    (line,) = [ln for ln in script.splitlines() if " download " in ln]
    return shlex.split(line)


def _held_to_hub(words: list[str], hub: dict[str, Any]) -> None:
    """A `download` line against one huggingface-hub's CLI: program, options, `--include` form."""
    assert words[0] in hub["console_scripts"], (words[0], hub["console_scripts"])
    assert {w for w in words if w.startswith("--")} <= set(hub["download_options"])
    first = words.index("--include")
    patterns = [w for w in words[first:] if not w.startswith("--")]
    if hub["include_each"]:
        assert all(words[i - 1] == "--include" for i in range(first, len(words)) if words[i] in patterns), words
    else:
        assert words.count("--include") == 1 and words[first + 1 :] == patterns, words


def test_the_staging_job_of_a_hub_model_calls_the_hub_cli_of_the_servers_image() -> None:
    """The Hub Job runs in the server's image: its program exists there, its options are that
    hub's `download` options, and each pattern reaches `--include` in the form that hub parses."""
    jobs = [r["inputs"] for r in resources(stack_plan("trn2-serve"), "kubernetes:batch/v1:Job") if "-hub-" in r["name"]]
    assert jobs
    for job in jobs:
        (c,) = job["spec"]["template"]["spec"]["containers"]
        pinned = serving.image_for_name(c["image"])
        assert pinned is not None
        words = _download(c["command"][2])
        _held_to_hub(words, HUB_CLI["hub"][HUB_CLI["hub_of_vllm"][pinned.vllm]])
        assert {"config.json", "*.safetensors"} <= set(words)


@pytest.mark.parametrize("pinned", serving.IMAGES, ids=lambda i: i.vllm + "-" + i.accelerator)
def test_each_images_download_line_parses_with_its_hub(pinned: serving.ServingImage) -> None:
    repo = needs.HubRepo("Qwen/Qwen3-8B", ("config.json",), ("*.json", "*.safetensors"))
    words = _download(hub_manifests._stage(repo, "/shared/hf-hub", pinned.hub_cli))
    _held_to_hub(words, HUB_CLI["hub"][HUB_CLI["hub_of_vllm"][pinned.vllm]])
