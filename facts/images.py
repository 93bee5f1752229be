"""The container images this repository builds, one folder each under `images/`.

A folder is named after its ECR repository (`<cluster>/<name>`), holds one Dockerfile and
whatever it copies, and is built by the stack (infra/images.py, an AWS CodeBuild project per
image) or by hand (README, "Build the images"). The tag is derived from the folder's content,
so a changed Dockerfile is a new, immutable tag and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from facts.drivers import runtime_of_sdk

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
TAG_LENGTH = 16


@dataclass(frozen=True)
class OpenMpi:
    """Where an image's Open MPI lives, and whether its mpirun passes its own prefix to the
    daemons it starts on the other hosts (configure --enable-orterun-prefix-by-default)."""

    prefix: str
    prefix_by_default: bool

    @property
    def mpirun(self) -> str:
        """mpirun by absolute path: Open MPI's implicit `--prefix <prefix>`, so `orted` is started
        from <prefix>/bin on every host whatever sshd's PATH is there (orterun(1), "Remote
        Execution"). Right whether or not the build is prefix-by-default."""
        return f"{self.prefix}/bin/mpirun"


@dataclass(frozen=True)
class Runtime:
    """What an image brings that the node and the launch must fit: its Open MPI, its Neuron
    runtime library (against the node's Neuron driver), its CUDA major (against the NVIDIA
    driver). None: not known (an image this project does not describe)."""

    open_mpi: OpenMpi | None = None
    neuron_runtime: str | None = None
    cuda_major: str | None = None


NEURON_DLC_2_22 = Runtime(OpenMpi("/usr/local", prefix_by_default=True), neuron_runtime="2.24.53.0")
"""The pytorch-training-neuronx 2.5.1 DLC of SDK 2.22.0 (aws-neuron/deep-learning-containers
2.22.0, docker/pytorch/training/2.5.1/Dockerfile.neuronx): Open MPI 4.1.5 built with
--enable-orterun-prefix-by-default into /usr/local, first on the image's PATH (it also has apt's
openmpi-bin and the EFA installer's /opt/amazon/openmpi, not called); aws-neuronx-runtime-lib
2.24.53.0 (tests/upstream/neuron-dlc-pytorch-training.yaml)."""
NEMO_EFA = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), cuda_major="12")
"""images/nemo: the EFA installer's Open MPI in /opt/amazon/openmpi, which AWS's own images start
by absolute path (awsome-distributed-training: nccl-tests.yaml, the NeMo kubernetes Dockerfile's
mpirun.real wrapper); NGC nemo:24.07 is a CUDA 12 container."""


@dataclass(frozen=True)
class Image:
    """One image built from `images/<repository>/Dockerfile`."""

    repository: str
    """The ECR repository key (registry.repositories.<key>) and folder name."""
    neuron_sdk: str | None
    """The Neuron SDK the image carries (None: not a Neuron image)."""
    upstream: str
    """What the image packages, at which version (for the README and the plan)."""
    runtime: Runtime = Runtime()
    """Its Open MPI, Neuron runtime library or CUDA (from its base image)."""

    @property
    def folder(self) -> Path:
        return IMAGES_DIR / self.repository

    @property
    def relative_folder(self) -> str:
        """The folder relative to the project root (where Pulumi runs the program)."""
        return self.folder.relative_to(ROOT).as_posix()

    @property
    def dockerfile(self) -> Path:
        return self.folder / "Dockerfile"

    @property
    def tag(self) -> str:
        """The image tag: a digest of every file of the folder (paths and contents)."""
        return content_tag(self.folder)


@cache
def content_tag(folder: Path) -> str:
    """sha256 over the sorted relative paths and contents of every file under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:TAG_LENGTH]


IMAGES: dict[str, Image] = {
    i.repository: i
    for i in (
        Image(
            "neuronx-nemo-megatron", "2.22.0", "aws-neuron/neuronx-nemo-megatron 0.8.0 (2.21_release)", NEURON_DLC_2_22
        ),
        Image("nemo", None, "NVIDIA NeMo 2.0.0rc1 (NGC nemo:24.07) with EFA, aws-ofi-nccl and nccl-tests", NEMO_EFA),
        Image("bert-neuronx", "2.22.0", "aws-neuron/aws-neuron-samples v2.27.0 dp_bert_hf_pretrain", NEURON_DLC_2_22),
    )
}
"""Repository -> the image built for it."""


PUBLIC_CPU_IMAGE = "docker.io/horovod/horovod-cpu:0.28.1"
"""The image of CPU runs (recipe ddp-cpu), public so a new platform trains before it builds
anything: Horovod's CPU image of release v0.28.1 (horovod/horovod, docker/horovod-cpu/Dockerfile
at 1d217b59): Ubuntu 20.04, PyTorch 1.12.1 (torchrun, gloo) for Python 3.8 (`python`), Open MPI
4.1.4 under /usr/local (mpirun and orted on sshd's default PATH) and OpenSSH's sshd. Its CI
pushes `horovod/horovod-cpu:<version>` to Docker Hub on the release tag
(tests/upstream/horovod-cpu-0.28.1.yaml)."""
PUBLIC_CPU_RUNTIME = Runtime(OpenMpi("/usr/local", prefix_by_default=False))
"""Horovod's CPU image: Open MPI 4.1.4 under /usr/local (its configure flags are not recorded, so
not assumed prefix-by-default; mpirun by absolute path works either way)."""


def runtime_of(image: str | None, built: Image | None, sdk: str | None, *, sdk_stated: bool) -> Runtime:
    """What a run's image brings: the built image's or the public CPU image's facts; for an image
    named in full, only the Neuron runtime library of the SDK its tag names (or `sdk_stated`)."""
    if image == PUBLIC_CPU_IMAGE:
        return PUBLIC_CPU_RUNTIME
    runtime = built.runtime if built else Runtime()
    if sdk and (sdk_stated or built is None):
        runtime = dataclasses.replace(runtime, neuron_runtime=runtime_of_sdk(sdk))
    return runtime
