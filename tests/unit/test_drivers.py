"""The node drivers against the images' runtimes: the AMI release table, the
runtime/driver rules and the images' runtimes held to their upstream sources; the pin each node
group gets; the config refusals; the per-node gate, run as the shell runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import config
from config import amis as ami_rules
from facts import amis, drivers, images
from facts.names import SYSTEM_NODE_GROUP
from facts.nodegroups import NodeGroup
from tests import upstream
from tests.conftest import MINIMAL, plan_exit
from workloads.manifests.healthcheck import driver_check
from workloads.manifests.objects import Context

AMI = upstream.load("amazon-eks-ami-v20260714")
RULES = upstream.facts("aws-neuron-sdk-runtime-driver")
DLC = upstream.facts("neuron-dlc-pytorch-training")["sdk2.22.0_pytorch_2.5.1"]


def test_the_release_table_is_the_changelogs() -> None:
    """awslabs/amazon-eks-ami/CHANGELOG.md at 81fec2e8: release version, aws-neuronx-dkms and
    kmod-nvidia-latest-dkms of each release for the supported Kubernetes minors."""
    assert AMI["source"]["commit"].startswith("81fec2e8") and amis.SOURCE.startswith(AMI["source"]["repository"])
    rows = [
        (r["releaseVersion"], r["neuron"].removesuffix("-dkms"), r["nvidia"].split("-")[0])
        for r in AMI["facts"]["releases"]
    ]
    assert [(r.release_version, r.neuron_driver, r.nvidia_driver) for r in amis.RELEASES] == rows
    assert {r.kubernetes for r in amis.RELEASES} == set(config.cluster.SUPPORTED_KUBERNETES_VERSIONS)
    assert all(amis.newest(minor) for minor in config.cluster.SUPPORTED_KUBERNETES_VERSIONS)


def test_the_rules_are_the_runtime_release_notes() -> None:
    """aws-neuron-sdk release-notes/components/runtime.rst at its HEAD (81ce03ae, 2026-08-21)."""
    assert RULES["runtime_library_of_sdk"] == drivers.RUNTIME_OF_SDK
    recorded = [
        (
            r["release"],
            r.get("driver_at_least"),
            r.get("needs_runtime_at_least"),
            r.get("runtime_at_least"),
            r.get("needs_driver_at_least"),
            tuple(r.get("families", ())),
        )
        for r in RULES["rules"]
    ]
    ours = [
        (r.release, r.driver_at_least, r.runtime_needed, r.runtime_at_least, r.driver_needed, r.families)
        for r in drivers.NEURON_RULES
    ]
    assert ours == recorded
    assert RULES["driver_version_file"] == drivers.DRIVER_VERSION_FILE
    assert upstream.facts("nvidia-cuda-compatibility")["minimum_driver_of_cuda_major"] == drivers.CUDA_MINIMUM_DRIVER


def test_the_images_runtimes_are_their_bases() -> None:
    """The DLC's runtime library and Open MPI (deep-learning-containers 2.22.0), the EFA
    installer's Open MPI of the NeMo image (its Dockerfile's OPAL_PREFIX; AWS's images call it by
    absolute path), the public CPU image's Open MPI (horovod-cpu 0.28.1)."""
    runtime_lib = next(p for p in DLC["apt_neuron"] if p.startswith("aws-neuronx-runtime-lib "))
    assert images.NEURON_DLC_2_22.neuron_runtime == runtime_lib.split()[1].split("-")[0]
    assert drivers.runtime_of_sdk("2.22.0") == images.NEURON_DLC_2_22.neuron_runtime
    dlc_mpi = images.NEURON_DLC_2_22.open_mpi
    assert dlc_mpi and (dlc_mpi.prefix, dlc_mpi.prefix_by_default) == (DLC["open_mpi"]["prefix"], True)
    efa = upstream.facts("awsome-distributed-training-efa")["open_mpi"]
    nemo_mpi = images.NEMO_EFA.open_mpi
    assert nemo_mpi and nemo_mpi.mpirun == efa["launcher_command"] and not nemo_mpi.prefix_by_default
    assert f"ENV OPAL_PREFIX={nemo_mpi.prefix}" in images.IMAGES["nemo"].dockerfile.read_text()
    assert images.NEMO_EFA.cuda_major == upstream.facts("nvidia-cuda-compatibility")["ngc_24_containers_cuda_major"]
    cpu = images.PUBLIC_CPU_RUNTIME.open_mpi
    assert cpu and cpu.prefix == upstream.facts("horovod-cpu-0.28.1")["open_mpi"]["prefix"]
    for image in images.IMAGES.values():
        if image.neuron_sdk:  # the SDK's runtime line (a DLC may carry a later patch of it)
            runtime, of_sdk = image.runtime.neuron_runtime, drivers.runtime_of_sdk(image.neuron_sdk)
            assert runtime and of_sdk and runtime.split(".")[:2] == of_sdk.split(".")[:2], image.repository


def test_the_trainium_images_runtimes_are_their_sources() -> None:
    """The SDK 2.28.0 DLC's runtime library and Open MPI (deep-learning-containers 2.28.0, its
    2.9.0 Dockerfile.neuronx); images/torchtitan's runtime library the version its Dockerfile
    installs, of Neuron 2.33.0, and its Open MPI the EFA installer's, named by OPAL_PREFIX."""
    sdks = upstream.facts("neuron-sdk-2.28-2.33")
    dlc = sdks["dlc_2_28_0_training"]
    assert images.NEURON_DLC_2_28.neuron_runtime == dlc["runtime_lib"].split("-")[0]
    mpi = images.NEURON_DLC_2_28.open_mpi
    assert mpi and (mpi.prefix, mpi.prefix_by_default) == (
        dlc["open_mpi"]["prefix"],
        dlc["open_mpi"]["prefix_by_default"],
    )
    titan = images.IMAGES["torchtitan"].dockerfile.read_text()
    assert images.TORCHNEURON_2_33.neuron_runtime == sdks["releases"]["2.33.0"]["runtime"]
    assert f"ARG NEURON_RUNTIME_VERSION={images.TORCHNEURON_2_33.neuron_runtime}\n" in titan
    titan_mpi = images.TORCHNEURON_2_33.open_mpi
    efa = upstream.facts("awsome-distributed-training-efa")["open_mpi"]
    assert titan_mpi and titan_mpi.mpirun == efa["launcher_command"] and not titan_mpi.prefix_by_default
    assert f"ENV OPAL_PREFIX={titan_mpi.prefix}" in titan


@pytest.mark.parametrize(
    ("runtime", "family", "minimum", "below"),
    [
        ("2.24.53.0", "trn1", None, "2.29"),  # driver 2.29 needs runtime 2.33
        ("2.33", "trn1", "2.27", None),  # runtime 2.32 on needs a driver after 2.26
        ("2.34.10", "trn2", "2.27", None),
        ("2.26.42.0", "trn2", "2.22", "2.29"),
    ],
)
def test_driver_range(runtime: str, family: str, minimum: str | None, below: str | None) -> None:
    assert drivers.neuron_driver_range(runtime, family) == drivers.DriverRange(minimum, below)


def test_a_driver_at_the_bound_is_at_least_it() -> None:
    assert drivers.at_least("2.29.0.0", "2.29") and not drivers.at_least("2.28.9", "2.29")
    assert drivers.DriverRange(below="2.29").admits("2.28.0.0") and not drivers.DriverRange(below="2.29").admits(
        "2.29.0.0"
    )


def _cfg(values: dict[str, Any]) -> Any:
    return config.parse_stack_values(values)


BERT = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "r1"}


def test_a_neuron_group_gets_the_newest_release_its_images_fit() -> None:
    """The SDK 2.22 images (runtime 2.24) need a driver below 2.29: 1.35.6-20260625 (2.28), not
    the newest 1.35.6-20260714 (2.29)."""
    cfg = _cfg({**MINIMAL, "llm-training-eks:workloads": {"bert": BERT}})
    assert amis.newest("1.35").neuron_driver.startswith("2.29")  # type: ignore[union-attr]
    release = ami_rules.pinned_release(cfg, cfg.node_groups[0])
    assert release and release.release_version == "1.35.6-20260625"
    sdk = {**BERT, "image": "registry.example/bert:x-neuronx-py312-sdk2.27.1-ubuntu24.04", "runId": "r2"}
    both = _cfg({**MINIMAL, "llm-training-eks:workloads": {"bert": BERT, "new": sdk}})
    on = ami_rules.images_on_group(both, both.node_groups[0])
    assert [(i.key, i.runtime.neuron_runtime) for i in on] == [
        ("workloads.bert.image", "2.24.53.0"),
        ("workloads.new.image", "2.29.40.0"),  # SDK 2.27's runtime library, from the image's tag
    ]
    assert ami_rules.pinned_release(both, both.node_groups[0]) == release


@pytest.mark.parametrize(
    ("release", "message"),
    [
        ("1.35.6-20260714", "nodeGroups[0].releaseVersion: 1.35.6-20260714 carries Neuron driver 2.29.0.0, which"
         " workloads.bert.image (Neuron runtime 2.24.53.0) cannot use (it needs driver < 2.29); use 1.35.6-20260625"),
        ("1.34.9-20260625", "nodeGroups[0].releaseVersion: 1.34.9-20260625 is for Kubernetes 1.34, the cluster runs 1.35"),
        ("1.35.9-20990101", "nodeGroups[0].releaseVersion: 1.35.9-20990101 is not an AMI release this project knows"),
        ("latest", "nodeGroups[0].releaseVersion: 'latest' is not an EKS AMI release version like 1.35.6-20260625"),
    ],
)  # fmt: skip
def test_a_release_the_images_cannot_use_is_refused(release: str, message: str, tmp_path: Path) -> None:
    values = {**MINIMAL, "llm-training-eks:workloads": {"bert": BERT}}
    values["llm-training-eks:nodeGroups"] = [{**MINIMAL["llm-training-eks:nodeGroups"][0], "releaseVersion": release}]
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_no_fitting_release_names_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _cfg({**MINIMAL, "llm-training-eks:workloads": {"bert": BERT}})
    only_new = tuple(r for r in amis.RELEASES if r.neuron_driver.startswith("2.29"))
    monkeypatch.setattr(amis, "RELEASES", only_new)
    (problem,) = ami_rules.release_problems(cfg)
    assert problem.startswith("workloads.bert.image: no EKS AMI release for Kubernetes 1.35"), problem
    assert "workloads.bert.image (Neuron runtime 2.24.53.0) needs driver < 2.29" in problem


def test_a_runs_layer_image_is_held_to_the_aws_layers_release() -> None:
    """A runs layer reads each node group's releaseVersion from the lower stack."""
    instance = config.nodegroups.instances.ACCELERATED["trn1.32xlarge"]
    runs = {"bert": config.workloads.RECIPES["bert-neuron"].model_validate(BERT)}
    assert ami_rules.layered_run_problems(runs, {"trn1": (instance, "1.35.6-20260625")}) == []
    (problem,) = ami_rules.layered_run_problems(runs, {"trn1": (instance, "1.35.6-20260714")})
    assert problem.startswith(
        "workloads.bert.image: the image's Neuron runtime 2.24.53.0 needs Neuron driver < 2.29, but node group 'trn1'"
        " runs AMI release 1.35.6-20260714 (driver 2.29.0.0)"
    )


def _gate(runtime: images.Runtime, instance: str, driver: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The per-node driver check as bash runs it, on a node that shows `driver`."""
    group = NodeGroup("g", config.nodegroups.instances.ACCELERATED[instance], 1, 1, "az", {})
    script = driver_check(Context("ns", "claim", "/shared", group, "image", runtime=runtime))
    version = tmp_path / "version"
    version.write_text(f"{driver}\n")
    script = script.replace(drivers.DRIVER_VERSION_FILE, str(version))
    shim = tmp_path / "nvidia-smi"
    shim.write_text(f"#!/bin/sh\necho {driver}\n")
    shim.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    return subprocess.run(["bash", "-c", f"h=node\n{script}\necho drv=$drv"], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(("driver", "ok"), [("2.28.0.0", True), ("2.29.0.0", False), ("2.30.2", False)])
def test_the_node_check_prints_and_gates_the_neuron_driver(driver: str, ok: bool, tmp_path: Path) -> None:
    done = _gate(images.NEURON_DLC_2_22, "trn1.32xlarge", driver, tmp_path)
    assert (done.returncode == 0) == ok, done.stdout
    expected = (
        f"drv={driver}"
        if ok
        else f"FAIL node: Neuron driver {driver}, but the image's Neuron runtime 2.24.53.0 needs driver < 2.29"
    )
    assert expected in done.stdout


@pytest.mark.parametrize(("driver", "ok"), [("580.159.03", True), ("470.256.02", False)])
def test_the_node_check_gates_the_nvidia_driver(driver: str, ok: bool, tmp_path: Path) -> None:
    done = _gate(images.NEMO_EFA, "p4de.24xlarge", driver, tmp_path)
    assert (done.returncode == 0) == ok, done.stdout


def test_an_unknown_runtime_is_printed_not_gated(tmp_path: Path) -> None:
    done = _gate(images.Runtime(), "trn1.32xlarge", "2.29.0.0", tmp_path)
    assert done.returncode == 0 and "drv=2.29.0.0" in done.stdout


def test_the_system_group_has_no_release() -> None:
    assert config.cluster.SystemNodeGroupConfig().node_group(["a"]).release_version == ""
    assert SYSTEM_NODE_GROUP == "system"


@pytest.mark.parametrize("release", ["1.34.4-20260318", "1.35.2-20260318", "1.34.2-20260129", "1.35.0-20260129"])
def test_every_build_of_a_release_can_be_pinned(release: str) -> None:
    """awslabs/amazon-eks-ami's changelog at 81fec2e8: AMI releases v20260318 and v20260129 each
    list two builds per Kubernetes minor (-20260318 and -20260311; -20260129 and -20260128); a node
    group may pin either, so the table holds both, with the drivers of each build."""
    found = amis.find(release)
    assert found is not None, f"{release} is missing from facts/amis.py"
    listed = {r["releaseVersion"]: r for r in AMI["facts"]["releases"]}
    assert found.neuron_driver == listed[release]["neuron"].removesuffix("-dkms")
