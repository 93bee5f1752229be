"""The container images this repository builds, one folder each under `images/`.

A folder is named after its ECR repository (`<cluster>/<name>`), holds one Dockerfile and
whatever it copies, and is built by the stack (infra/images.py, an AWS CodeBuild project per
image) or by hand (docs/training.md, "Build the images"). The tag is derived from the folder's content,
so a changed Dockerfile is a new, immutable tag and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
TAG_LENGTH = 16


@dataclass(frozen=True)
class Image:
    """One image built from `images/<repository>/Dockerfile`."""

    repository: str
    """The ECR repository key (registry.repositories.<key>) and folder name."""
    neuron_sdk: str | None
    """The Neuron SDK the image carries (None: not a Neuron image)."""
    upstream: str
    """What the image packages, at which version (for the README and the plan)."""

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
        Image("neuronx-nemo-megatron", "2.22.0", "aws-neuron/neuronx-nemo-megatron 0.8.0 (2.21_release)"),
        Image("nemo", None, "NVIDIA NeMo 2.0.0rc1 (NGC nemo:24.07) with EFA, aws-ofi-nccl and nccl-tests"),
        Image("bert-neuronx", "2.22.0", "aws-neuron/aws-neuron-samples v2.27.0 dp_bert_hf_pretrain"),
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
