"""The fabric facts: every accelerated type's all-reduce floor, held to the published figures it is
85% of (tests/upstream/awsome-distributed-ai-allreduce-figures.yaml), and the pinned GPU fabric
stack held to its sources (tests/upstream/gpu-fabric-stack-2026-11.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from facts import fabric, images
from facts import instances as catalog
from tests import upstream
from tests.conftest import MINIMAL, plan_exit

FIGURES = upstream.facts("awsome-distributed-ai-allreduce-figures")


def test_every_accelerated_type_has_a_floor() -> None:
    assert set(fabric.FLOORS) == set(catalog.ACCELERATED)


@pytest.mark.parametrize("name", sorted(catalog.ACCELERATED))
def test_floor_is_85_percent_of_the_published_figure(name: str) -> None:
    """A published figure is the one recorded for this type, or for the type it borrows from (p5e
    p5's, p4d p4de's: the same network cards and EFA), at the same message size; the floor is at least 85% of it and below it. Types with
    nothing published carry a presence floor and say why."""
    floor = fabric.FLOORS[name]
    if floor.published is None:
        assert name in FIGURES["not_published"]
        assert floor.presence_floor_gb_per_second and floor.why
        assert "no published figure" in floor.basis
        return
    fig = FIGURES.get(name) or FIGURES[FIGURES["borrowed"][name]]
    assert name in FIGURES or name in FIGURES["not_published"]
    p = floor.published
    assert (p.bus_bandwidth_gb_per_second, p.message_size, p.nodes) == (fig["busbw"], fig["size"], fig["nodes"])
    assert fig["path"] in p.source
    assert floor.message_size == p.message_size
    assert (
        fabric.FLOOR_SHARE * p.bus_bandwidth_gb_per_second - 0.1
        <= floor.min_bus_bandwidth_gb_per_second
        < p.bus_bandwidth_gb_per_second
    )
    assert f"{p.bus_bandwidth_gb_per_second:g} GB/s" in floor.basis


def test_brief_floors() -> None:
    """The figures the issue names: p5, p5en, p6-b200, p6-b300 published; trn2/trn2u honest about
    having none."""
    got = {
        n: fabric.FLOORS[n].min_bus_bandwidth_gb_per_second
        for n in ("p5.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge")
    }
    assert got == {"p5.48xlarge": 414.0, "p6-b200.48xlarge": 320.4, "p6-b300.48xlarge": 555.9}
    assert fabric.FLOORS["trn2u.48xlarge"].published is None


STACK = upstream.facts("gpu-fabric-stack-2026-11")


def test_cuda_architectures_of_the_gpus() -> None:
    """What each GPU needs its kernels built for (awsome-distributed-ai nccl-tests README)."""
    for it in catalog.ACCELERATED.values():
        if it.accelerator == "nvidia":
            assert it.cuda_arch == STACK["cuda_arch"][it.accelerator_name], it.name
        else:
            assert it.cuda_arch is None


def test_seed_nemo_image_on_blackwell_is_refused(tmp_path: Path) -> None:
    """The nemo-gpu seed image builds nccl-tests for sm_80 and sm_90 only: its health gate (and
    NeMo 24.07's CUDA 12.5) cannot run on B200 (sm_100); refused at config time, naming the key.
    On H100 it plans."""
    nemo = images.IMAGES["nemo"].cuda_architectures
    assert nemo == {80, 90}
    for itype, code in (("p6-b200.48xlarge", 2), ("p5.48xlarge", 0)):
        values = {
            **MINIMAL,
            "llm-training-eks:nodeGroups": [
                {"name": "gpu", "instanceType": itype, "desiredSize": 2, "availabilityZone": "us-west-2d"}
            ],
            "llm-training-eks:workloads": {
                "nemo": {"recipe": "nemo-gpu", "nodeGroup": "gpu", "nodes": 2, "runId": "r1"}
            },
        }
        got, err = plan_exit(values, tmp_path)
        assert got == code, err
        if code:
            assert "workloads.nemo.nodeGroup: the nemo-gpu image (images/nemo) is built for sm_80, sm_90" in err
            assert "need sm_100" in err


def _args(dockerfile: Path) -> dict[str, str]:
    """The ARG defaults a Dockerfile declares."""
    return dict(re.findall(r"^ARG ([A-Z_]+)=\"?([^\"\n]*)\"?$", dockerfile.read_text(), re.M))


def test_current_stack_is_the_one_the_sources_name() -> None:
    efa = STACK["efa_installer"]
    assert (
        efa["version"], efa["libfabric"], efa["aws_ofi_nccl"]
    ) == (fabric.EFA_INSTALLER, fabric.LIBFABRIC, fabric.AWS_OFI_NCCL)  # fmt: skip
    assert STACK["nccl"]["newest_2_30_tag"] == fabric.NCCL and fabric.NCCL.startswith("v2.30.")
    assert STACK["nccl_tests"]["newest_2_18_tag"] == fabric.NCCL_TESTS and fabric.NCCL_TESTS.startswith("v2.18.")
    ofi = upstream.facts("aws-ofi-nccl-v1.21.1")
    assert fabric.OFI_NCCL_LIB == f"{ofi['prefix']}/lib" == STACK["reference_image"]["plugin_dir"]


@pytest.mark.parametrize("dockerfile", sorted(images.IMAGES_DIR.glob("*/Dockerfile")), ids=lambda p: p.parent.name)
def test_gpu_images_pin_the_current_fabric_stack_or_say_why_not(dockerfile: Path) -> None:
    """An image that installs the EFA installer for NCCL pins the current stack's three build
    arguments, or is a seed image whose stack stays as its tutorial had it (facts.fabric.SEED_STACKS);
    a new GPU image on another stack fails here and says which."""
    args = _args(dockerfile)
    if "NCCL_TESTS_VERSION" not in args:
        return  # not a GPU fabric image (Neuron images install the EFA installer only for libfabric)
    name = dockerfile.parent.name
    if name in fabric.SEED_STACKS:
        assert args["EFA_INSTALLER_VERSION"] in fabric.SEED_STACKS[name]
        return
    assert {k: args.get(k) for k in fabric.CURRENT_STACK} == fabric.CURRENT_STACK, name


def test_gpu_fabric_image_builds_the_stack_as_its_sources_do() -> None:
    """images/gpu-fabric: the EFA installer in its full (not NGC) mode, so the plugin lands in
    /opt/amazon/ofi-nccl/lib, checked at build time; NCCL and nccl-tests built as their Makefiles
    take it, for every GPU of the catalog; the NCCL built here first on the library path."""
    text = (images.IMAGES_DIR / "gpu-fabric" / "Dockerfile").read_text()
    ref = STACK["reference_image"]
    assert f"./efa_installer.sh {ref['efa_installer_flags']}" in text
    assert f"FROM {ref['base']}" in text and f"ARG CUDA_VERSION={ref['cuda']}" in text
    for library in upstream.facts("aws-ofi-nccl-v1.21.1")["libraries"]:
        assert f"test -f {fabric.OFI_NCCL_LIB}/{library}" in text
    assert 'make -C /opt/nccl -j "$(nproc)" src.build CUDA_HOME=/usr/local/cuda' in text
    assert (
        "MPI=1 MPI_HOME=/opt/amazon/openmpi CUDA_HOME=/usr/local/cuda" in text and "NCCL_HOME=/opt/nccl/build" in text
    )
    gencodes = {
        int(m)
        for m in re.findall(r"code=sm_([0-9]+)", _args(images.IMAGES_DIR / "gpu-fabric" / "Dockerfile")["NVCC_GENCODE"])
    }
    assert {it.cuda_arch for it in catalog.ACCELERATED.values() if it.cuda_arch} <= gencodes
    assert re.search(rf"ENV LD_LIBRARY_PATH={fabric.NCCL_LIB}:{fabric.OFI_NCCL_LIB}:", text)
    for package in ref["removes"]:
        assert package in text


def test_neuron_fabric_image_installs_the_sdk_packages() -> None:
    """images/neuron-fabric: the runtime, collectives and tools (nccom-test) of Neuron SDK 2.32.0,
    from the Neuron apt repository, and the same EFA installer as the GPU stack."""
    pkgs = upstream.facts("neuron-sdk-2.32.0-packages")
    args = _args(images.IMAGES_DIR / "neuron-fabric" / "Dockerfile")
    assert args["NEURON_RUNTIME_VERSION"] == pkgs["packages"]["aws-neuronx-runtime-lib"]
    assert args["NEURON_COLLECTIVES_VERSION"] == pkgs["packages"]["aws-neuronx-collectives"]
    assert args["NEURON_TOOLS_VERSION"] == pkgs["packages"]["aws-neuronx-tools"]
    assert args["EFA_INSTALLER_VERSION"] == fabric.EFA_INSTALLER
    text = (images.IMAGES_DIR / "neuron-fabric" / "Dockerfile").read_text()
    assert pkgs["apt_key"] in text and pkgs["apt_repository"] in text and "ubuntu:24.04" in text


@pytest.mark.parametrize("repository", ["gpu-fabric", "neuron-fabric"])
def test_fabric_images_runtimes_are_their_dockerfiles(repository: str) -> None:
    """What the driver gate and the AMI pin read of a fabric image (facts.images.Runtime) is what
    its Dockerfile installs: the EFA installer's Open MPI (OPAL_PREFIX), the CUDA major of the
    base, the Neuron runtime library of the SDK's package list."""
    image = images.IMAGES[repository]
    args, text = _args(image.dockerfile), image.dockerfile.read_text()
    mpi = image.runtime.open_mpi
    assert mpi and f"ENV OPAL_PREFIX={mpi.prefix}" in text and f"test -x {mpi.mpirun}" in text
    if repository == "gpu-fabric":
        assert image.runtime.cuda_major == args["CUDA_VERSION"].split(".")[0]
        assert image.runtime.neuron_runtime is None
    else:
        lib = upstream.facts("neuron-sdk-2.32.0-packages")["packages"]["aws-neuronx-runtime-lib"]
        assert image.runtime.neuron_runtime and lib.startswith(f"{image.runtime.neuron_runtime}.")
        assert image.runtime.cuda_major is None
