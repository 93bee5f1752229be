"""The container images this repository builds, one folder each under `images/`.

A folder is named after its ECR repository (`<cluster>/<name>`), holds one Dockerfile and
whatever it copies, and is built by the stack (infra/images.py, an AWS CodeBuild project per
image) or by hand (docs/training.md, "Build the images"). The tag is derived from the folder's content,
so a changed Dockerfile is a new, immutable tag and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from facts.drivers import runtime_of_sdk

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
TAG_LENGTH = 16

# How long an image can take to appear in its repository, from its upload (infra/images.py):
# a build waits for CodeBuild capacity up to QUEUED_TIMEOUT_MINUTES, runs up to the image's
# build timeout, and a failed build is retried AUTO_RETRY_LIMIT times by CodeBuild itself
# (each retry a new build with the same limits); then the node pulls it.
QUEUED_TIMEOUT_MINUTES = 30
AUTO_RETRY_LIMIT = 1
PULL_SECONDS = 30 * 60
"""A node's pull of the largest image (tens of GB from ECR in the region) and its unpacking."""


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
NEMO_26_08_EFA = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), cuda_major="13")
"""images/nemo-megatron-bridge: the EFA installer's Open MPI in /opt/amazon/openmpi, called by absolute
path (as images/nemo's); NGC nemo:26.08 is a CUDA 13 container (13.3.33, AWS's lock of the image:
tests/upstream/nemo-framework-26.08.yaml)."""
NEMO_EFA = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), cuda_major="12")
"""images/nemo: the EFA installer's Open MPI in /opt/amazon/openmpi, which AWS's own images start
by absolute path (awsome-distributed-training: nccl-tests.yaml, the NeMo kubernetes Dockerfile's
mpirun.real wrapper); NGC nemo:24.07 is a CUDA 12 container."""

NEURON_DLC_2_28 = Runtime(OpenMpi("/usr/local", prefix_by_default=True), neuron_runtime="2.30.51.0")
"""The pytorch-training-neuronx 2.9.0 DLC of SDK 2.28.0 (aws-neuron/deep-learning-containers 2.28.0,
pytorch/training/2.9.0/Dockerfile.neuronx): Open MPI 4.1.5 built --enable-orterun-prefix-by-default
into /usr/local; aws-neuronx-runtime-lib 2.30.51.0 (tests/upstream/neuron-sdk-2.28-2.33.yaml)."""
TORCHNEURON_2_33 = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), neuron_runtime="2.35.30.0")
"""images/torchtitan: the EFA installer's Open MPI in /opt/amazon/openmpi (started by absolute path,
as for the NeMo image) and aws-neuronx-runtime-lib 2.35.30.0 of Neuron 2.33.0."""
GPU_FABRIC = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), cuda_major="13")
"""images/gpu-fabric: the EFA installer's Open MPI in /opt/amazon/openmpi (its OPAL_PREFIX, as in
images/nemo) on NVIDIA's CUDA 13.0.2 devel image."""
NEURON_FABRIC = Runtime(OpenMpi("/opt/amazon/openmpi", prefix_by_default=False), neuron_runtime="2.34.10")
"""images/neuron-fabric: the EFA installer's Open MPI in /opt/amazon/openmpi; Neuron SDK 2.32.0's
runtime library (aws-neuronx-runtime-lib 2.34.10.0, tests/upstream/neuron-sdk-2.32.0-packages.yaml),
named as its release notes name it (facts.drivers.RUNTIME_OF_SDK)."""
PUBLIC_CPU_RUNTIME = Runtime(OpenMpi("/usr/local", prefix_by_default=False))
"""Horovod's CPU image (recipe ddp-cpu, and images/fio built on it): Open MPI 4.1.4 under
/usr/local (its configure flags are not recorded, so not assumed prefix-by-default; mpirun by
absolute path works either way)."""


@dataclass(frozen=True)
class Image:
    """One image built from `images/<repository>/Dockerfile`."""

    repository: str
    """The ECR repository key (registry.repositories.<key>) and folder name."""
    neuron_sdk: str | None
    """The Neuron SDK the image carries (None: not a Neuron image)."""
    upstream: str
    """What the image packages, at which version (for the README and the plan)."""
    compute_type: str
    """The CodeBuild compute type that builds it (see `sizing`)."""
    build_timeout_minutes: int
    sizing: str
    """Why that compute type: what the build pulls, unpacks and compiles. The on-demand Linux
    sizes (CodeBuild user guide, build-env-ref-compute-types; botocore's ComputeType
    documentation): MEDIUM 4 vCPU, 8 GiB, 128 GB disk; LARGE 8 vCPU, 16 GiB, 128 GB; XLARGE 36
    vCPU, 72 GiB, 256 GB; 2XLARGE 72 vCPU, 144 GiB, 824 GB SSD."""
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

    @property
    def cuda_architectures(self) -> frozenset[int]:
        """The CUDA architectures its Dockerfile builds kernels for (`code=sm_XX` in NVCC_GENCODE),
        empty for an image that compiles none: a GPU outside them cannot run its programs."""
        return frozenset(int(m) for m in re.findall(r"code=sm_([0-9]+)", self.dockerfile.read_text()))

    @property
    def ready_within_seconds(self) -> int:
        """The longest from its source's upload until a node has pulled it: every build attempt
        queued and run to its timeout, then the pull."""
        attempt = (QUEUED_TIMEOUT_MINUTES + self.build_timeout_minutes) * 60
        return (1 + AUTO_RETRY_LIMIT) * attempt + PULL_SECONDS


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
            "neuronx-nemo-megatron",
            "2.22.0",
            "aws-neuron/neuronx-nemo-megatron 0.8.0 (2.21_release)",
            "BUILD_GENERAL1_LARGE",
            90,
            "two stages on the Neuron training DLC: builds the NeMo and Apex wheels (8 vCPUs), then reinstalls"
            " them over the DLC's torch stack; the DLC twice on disk fits 128 GB",
            NEURON_DLC_2_22,
        ),
        Image(
            "nemo",
            None,
            "NVIDIA NeMo 2.0.0rc1 (NGC nemo:24.07) with EFA, aws-ofi-nccl and nccl-tests",
            "BUILD_GENERAL1_XLARGE",
            120,
            "the NGC NeMo image (tens of GB unpacked) plus layers needs more than 128 GB of disk; the EFA"
            " installer, aws-ofi-nccl and nccl-tests compile with make -j$(nproc) (36 vCPUs)",
            NEMO_EFA,
        ),
        Image(
            "nemo-megatron-bridge",
            None,
            "NVIDIA Megatron Bridge 0.6.0 (NGC nemo:26.08) with the EFA installer 1.51.0, NCCL 2.30.7 and nccl-tests"
            " 2.18.5",
            "BUILD_GENERAL1_XLARGE",
            180,
            "the NGC NeMo 26.08 image (tens of GB unpacked) needs more than 128 GB of disk; NCCL and nccl-tests compile"
            " for sm_90, sm_100 and sm_103 with make -j$(nproc) (36 vCPUs)",
            NEMO_26_08_EFA,
        ),
        Image(
            "bert-neuronx",
            "2.22.0",
            "aws-neuron/aws-neuron-samples v2.27.0 dp_bert_hf_pretrain",
            "BUILD_GENERAL1_MEDIUM",
            60,
            "the Neuron training DLC plus apt packages and a git clone: nothing compiles; 128 GB of disk",
            NEURON_DLC_2_22,
        ),
        Image(
            "neuronx-distributed",
            "2.28.0",
            "aws-neuron/neuronx-distributed v2.28.0 examples/training/llama (Llama 3 8B, TP + ZeRO-1)",
            "BUILD_GENERAL1_MEDIUM",
            60,
            "the Neuron training DLC plus a git clone and pure-Python wheels (transformers, datasets): nothing"
            " compiles; 128 GB of disk",
            NEURON_DLC_2_28,
        ),
        Image(
            "torchtitan",
            "2.33.0",
            "aws-neuron/torchtitan-neuron (TorchTitan Neuron 0.2.2+neuron.1) on TorchNeuron 2.14.3.0",
            "BUILD_GENERAL1_LARGE",
            90,
            "Ubuntu 26.04 plus the Neuron runtime packages, the EFA installer, PyTorch 2.14 and TorchNeuron wheels"
            " (several GB) and the fork's requirements, some built from source (8 vCPUs)",
            TORCHNEURON_2_33,
        ),
        Image(
            "gpu-fabric",
            None,
            "the current GPU fabric stack: EFA installer 1.51.0, NCCL v2.30.7-1, nccl-tests v2.18.5 (CUDA 13.0.2)",
            "BUILD_GENERAL1_XLARGE",
            120,
            "NCCL and nccl-tests compile for four GPU architectures with make -j$(nproc) (36 vCPUs: NCCL's kernels"
            " are most of the build); the CUDA devel image and the build tree fit 256 GB",
            GPU_FABRIC,
        ),
        Image(
            "neuron-fabric",
            "2.32.0",
            "Neuron SDK 2.32.0 runtime, collectives and nccom-test with EFA installer 1.51.0",
            "BUILD_GENERAL1_MEDIUM",
            60,
            "Ubuntu plus apt packages and the EFA installer: nothing compiles; 128 GB of disk",
            NEURON_FABRIC,
        ),
        Image(
            "fio",
            None,
            "fio 3.42 (axboe/fio tag fio-3.42) on Horovod's CPU image 0.28.1 (its Open MPI 4.1.4 and sshd)",
            "BUILD_GENERAL1_MEDIUM",
            30,
            "the public CPU image plus fio compiled from source (a few minutes on 4 vCPUs); 128 GB of disk",
            PUBLIC_CPU_RUNTIME,
        ),
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


def runtime_of(image: str | None, built: Image | None, sdk: str | None, *, sdk_stated: bool) -> Runtime:
    """What a run's image brings: the built image's or the public CPU image's facts; for an image
    named in full, only the Neuron runtime library of the SDK its tag names (or `sdk_stated`)."""
    if image == PUBLIC_CPU_IMAGE:
        return PUBLIC_CPU_RUNTIME
    runtime = built.runtime if built else Runtime()
    if sdk and (sdk_stated or built is None):
        runtime = dataclasses.replace(runtime, neuron_runtime=runtime_of_sdk(sdk))
    return runtime
