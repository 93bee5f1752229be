"""Which Neuron SDK trains what, on which instances, in which container.

Sources (read 2026-11-22; tests/upstream/neuron-sdk-support.yaml and
tests/upstream/neuron-dlc-pytorch-training.yaml hold them):
- aws-neuron/aws-neuron-sdk v2.32.0, announcements: PyTorch/XLA is no longer supported for
  training from Neuron 2.30.0 (PyTorch 2.9 is the last PyTorch/XLA training version); the
  pytorch-training-neuronx DLC is no longer published from 2.31.0; NeMo Megatron
  (neuronx-nemo-megatron) support ends with 2.23; trn2 arrives in 2.21.0. TorchNeuron, the
  successor, targets Trn2 and Trn3 only (frameworks/torch/about/index.rst, "Target Platforms"),
  so trn1/trn1n training stays on SDK <= 2.29.
- aws-neuron/deep-learning-containers: the PyTorch training DLC configures sshd for the MPI
  operator from tag 2.22.0 (not 2.20.1: the Dockerfile at that tag has no openssh).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, ...]


def parse(version: str) -> Version:
    """'2.22.0' -> (2, 22, 0)."""
    return tuple(int(p) for p in version.split("."))


XLA_TRAINING_ENDS = parse("2.30.0")
"""First SDK without PyTorch/XLA training (on any instance)."""
TRN2_FIRST = parse("2.21.0")
"""First SDK with trn2."""
NEMO_MEGATRON_ENDS = parse("2.23.0")
"""First SDK without neuronx-nemo-megatron (its last release, 0.8.0, shipped with 2.21)."""
DLC_MPI_SSH_FIRST = parse("2.22.0")
"""First pytorch-training-neuronx DLC whose Dockerfile sets sshd up for the MPI operator."""
TRAINING_DLC_ENDS = parse("2.31.0")
"""First SDK without a pytorch-training-neuronx DLC."""

_SDK_IN_TAG = re.compile(r"[-_]sdk([0-9]+\.[0-9]+\.[0-9]+)(?:[-_.]|$)", re.ASCII)
TRAINING_DLC = "pytorch-training-neuronx"


def sdk_of_image(image: str) -> str | None:
    """The Neuron SDK a Neuron DLC-style tag names (`...-sdk2.22.0-ubuntu22.04`), or None."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
    m = _SDK_IN_TAG.search(tag)
    return m.group(1) if m else None


def xla_training_families(sdk: str) -> tuple[str, ...]:
    """Instance families on which PyTorch/XLA training is supported by an SDK."""
    v = parse(sdk)
    if v >= XLA_TRAINING_ENDS:
        return ()
    return ("trn1", "trn1n", "trn2") if v >= TRN2_FIRST else ("trn1", "trn1n")


@dataclass(frozen=True)
class SdkRow:
    """One row of the version table in docs/training.md."""

    sdk: str
    pytorch: str
    training_dlc: str | None
    note: str

    @property
    def trains_on(self) -> tuple[str, ...]:
        return xla_training_families(self.sdk)


# The releases a stack of this project pins or meets, newest last.
TABLE: tuple[SdkRow, ...] = (
    SdkRow(
        "2.20.0", "2.1.2", "pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04", "no sshd in the DLC"
    ),
    SdkRow("2.21.1", "2.5.1", "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.21.1-ubuntu22.04", "trn2; no sshd"),
    SdkRow(
        "2.22.0",
        "2.5.1",
        "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.22.0-ubuntu22.04",
        "sshd for the MPI operator; last with neuronx-nemo-megatron; the images of this repository",
    ),
    SdkRow("2.27.1", "2.9.0", "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04", ""),
    SdkRow("2.29.1", "2.9", None, "last with PyTorch/XLA training (trn1 ends here)"),
    SdkRow("2.30.0", "-", None, "no PyTorch/XLA training"),
    SdkRow("2.31.0", "-", None, "no pytorch-training-neuronx DLC"),
)


def problems(sdk: str, family: str, *, nemo_megatron: bool, image: str | None, xla_training: bool = True) -> list[str]:
    """Why an SDK cannot run a training recipe on an instance family (empty: it can). A recipe
    without PyTorch/XLA (`xla_training=False`) needs only an SDK that supports the family."""
    v = parse(sdk)
    out = []
    if not xla_training:
        return [] if family != "trn2" or v >= TRN2_FIRST else [f"Neuron SDK {sdk} does not support trn2 (from 2.21.0)"]
    families = xla_training_families(sdk)
    if family not in families:
        if v >= XLA_TRAINING_ENDS:
            out.append(
                f"Neuron SDK {sdk} has no PyTorch/XLA training (it ended in 2.30.0);"
                f" {family} training needs SDK <= 2.29"
            )
        else:
            out.append(f"Neuron SDK {sdk} does not support {family} (trn2 needs SDK >= 2.21.0)")
    if nemo_megatron and v >= NEMO_MEGATRON_ENDS:
        out.append(f"neuronx-nemo-megatron is not supported from Neuron SDK 2.23 on (this image has {sdk})")
    if nemo_megatron and family == "trn2":
        out.append("neuronx-nemo-megatron runs on trn1/trn1n only")
    if image and TRAINING_DLC in image and v < DLC_MPI_SSH_FIRST:
        out.append(
            f"the {TRAINING_DLC} DLC of SDK {sdk} has no sshd for the MPI operator (first in 2.22.0); workers"
            " would crash-loop"
        )
    return out
