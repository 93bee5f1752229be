"""Which Neuron SDK trains what, on which instances, with which framework, in which container.

Sources (tests/upstream/neuron-sdk-support.yaml, tests/upstream/neuron-sdk-2.28-2.33.yaml and
tests/upstream/neuron-dlc-pytorch-training.yaml hold them; tests/unit/test_versions.py checks):
- aws-neuron/aws-neuron-sdk v2.32.0, announcements: NxD Training and the NxD Core training APIs
  end with 2.28 ("stay on Neuron SDK 2.28 (PyTorch 2.9) until ready to migrate"); PyTorch/XLA is
  no longer supported for training from Neuron 2.30.0 (PyTorch 2.9 is the last PyTorch/XLA
  training version); the pytorch-training-neuronx DLC is no longer published from 2.31.0;
  NeMo Megatron (neuronx-nemo-megatron) support ends with 2.23; trn2 arrives in 2.21.0.
  release-notes/components/runtime.rst: the runtime library and driver of each release.
- The Neuron 2.33.0 documentation (2026-10-19): TorchNeuron, the native PyTorch backend
  (torch-neuronx 2.14.3.0 for PyTorch 2.14), is a public beta for Trn2 and Trn3 only, and so is
  TorchTitan Neuron 0.2.2+neuron.1 on it; runtime library 2.35.30.0, driver 2.31.7.0; Neuron
  DLCs are published on Ubuntu 26.04 only from 2.33.0.
- aws-neuron/deep-learning-containers: the PyTorch training DLC configures sshd for the MPI
  operator from tag 2.22.0 (not 2.20.1: the Dockerfile at that tag has no openssh).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Version = tuple[int, ...]
Framework = Literal["pytorch-xla", "nxd", "nemo-megatron", "torchneuron", "none"]
"""How a recipe trains on Neuron: PyTorch/XLA (torch-neuronx up to PyTorch 2.9), NxD Core's
training APIs on it, neuronx-nemo-megatron on it, TorchNeuron (the native PyTorch backend), or no
framework at all (the runtime and tools only: the SDK need only support the instance family)."""
Status = Literal["current", "beta", "maintenance", "end of support"]


def parse(version: str) -> Version:
    """'2.22.0' -> (2, 22, 0)."""
    return tuple(int(p) for p in version.split("."))


XLA_TRAINING_ENDS = parse("2.30.0")
"""First SDK without PyTorch/XLA training (on any instance)."""
NXD_TRAINING_ENDS = parse("2.29.0")
"""First SDK without NxD Training and the NxD Core training APIs (2.28 is the last)."""
TRN2_FIRST = parse("2.21.0")
"""First SDK with trn2."""
NEMO_MEGATRON_ENDS = parse("2.23.0")
"""First SDK without neuronx-nemo-megatron (its last release, 0.8.0, shipped with 2.21)."""
DLC_MPI_SSH_FIRST = parse("2.22.0")
"""First pytorch-training-neuronx DLC whose Dockerfile sets sshd up for the MPI operator."""
TRAINING_DLC_ENDS = parse("2.31.0")
"""First SDK without a pytorch-training-neuronx DLC."""
TORCHNEURON_FIRST = parse("2.33.0")
"""First SDK with TorchNeuron (public beta) and TorchTitan Neuron."""
TORCHNEURON_FAMILIES = ("trn2", "trn3")
"""The instance families TorchNeuron supports (Neuron 2.33 support matrix)."""

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


def torchneuron_families(sdk: str) -> tuple[str, ...]:
    """Instance families on which TorchNeuron trains with an SDK."""
    return TORCHNEURON_FAMILIES if parse(sdk) >= TORCHNEURON_FIRST else ()


def training_families(sdk: str) -> tuple[str, ...]:
    """Instance families an SDK trains on with any of its frameworks."""
    return (*xla_training_families(sdk), *torchneuron_families(sdk))


@dataclass(frozen=True)
class SdkRow:
    """One row of the version table in docs/training.md."""

    sdk: str
    pytorch: str
    training_dlc: str | None
    note: str
    runtime: str | None = None
    """The Neuron runtime library of the release (aws-neuronx-runtime-lib, inside the image)."""
    driver: str | None = None
    """The Neuron driver of the release (aws-neuronx-dkms, on the node)."""
    framework: str = "PyTorch/XLA"

    @property
    def trains_on(self) -> tuple[str, ...]:
        return training_families(self.sdk)


# The releases a stack of this project pins or meets, newest last. Runtime and driver: the
# release notes of each (release-notes/components/runtime.rst; 2.33.0 its documentation).
TABLE: tuple[SdkRow, ...] = (
    SdkRow(
        "2.20.0", "2.1.2", "pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04", "no sshd in the DLC"
    ),
    SdkRow("2.21.1", "2.5.1", "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.21.1-ubuntu22.04", "trn2; no sshd"),
    SdkRow(
        "2.22.0",
        "2.5.1",
        "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.22.0-ubuntu22.04",
        "sshd for the MPI operator; last with neuronx-nemo-megatron; the seed recipes' images",
        runtime="2.24.53.0",
    ),
    SdkRow("2.27.1", "2.9.0", "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04", ""),
    SdkRow(
        "2.28.0",
        "2.9.0",
        "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04",
        "last with NxD Training and the NxD Core training APIs (neuronx-distributed 0.17): maintenance-only;"
        " images/neuronx-distributed",
        runtime="2.30.50.0",
        driver="2.26.10.0",
    ),
    SdkRow("2.29.1", "2.9", None, "last with PyTorch/XLA training (trn1 ends here)", "2.31.24.0", "2.27.4.0"),
    SdkRow("2.30.0", "-", None, "no PyTorch/XLA training", "2.32.31.0", "2.28.0.0"),
    SdkRow("2.31.0", "-", None, "no pytorch-training-neuronx DLC", "2.33", "2.29"),
    SdkRow("2.32.0", "-", None, "torch-neuronx no longer on the DLAMIs and DLCs", "2.34.10", "2.30.2"),
    SdkRow(
        "2.33.0",
        "2.14.0",
        None,
        "TorchNeuron public beta (torch-neuronx 2.14.3.0), TorchTitan Neuron 0.2.2+neuron.1; DLCs on Ubuntu 26.04"
        " only; images/torchtitan",
        runtime="2.35.30.0",
        driver="2.31.7.0",
        framework="TorchNeuron (beta)",
    ),
)


def _xla_problems(sdk: str, family: str) -> list[str]:
    v = parse(sdk)
    if family in xla_training_families(sdk):
        return []
    if v >= XLA_TRAINING_ENDS:
        return [
            f"Neuron SDK {sdk} has no PyTorch/XLA training (it ended in 2.30.0); {family} training needs SDK <= 2.29"
        ]
    return [f"Neuron SDK {sdk} does not support {family} (trn2 needs SDK >= 2.21.0)"]


def family_problems(family: str, *, framework: Framework | None) -> list[str]:
    """Why a framework cannot train on an instance family whatever the SDK (the node group is
    what to change): TorchNeuron targets trn2 and trn3 only."""
    if framework != "torchneuron" or family in TORCHNEURON_FAMILIES:
        return []
    return [
        f"TorchNeuron (Neuron SDK 2.33, public beta) trains on {' and '.join(TORCHNEURON_FAMILIES)} only, not {family};"
        f" on {family} train with NxD on Neuron SDK 2.28 (maintenance-only) or PyTorch/XLA on SDK <= 2.29"
    ]


def problems(sdk: str, family: str, *, framework: Framework | None, image: str | None) -> list[str]:
    """Why an SDK cannot run a training framework on an instance family (empty: it can).
    `framework` None: any framework the SDK has (bring-your-own code)."""
    v = parse(sdk)
    if framework is None:
        out = [] if family in training_families(sdk) else _xla_problems(sdk, family)
    elif framework == "none":
        out = [] if family != "trn2" or v >= TRN2_FIRST else [f"Neuron SDK {sdk} does not support trn2 (from 2.21.0)"]
    elif framework == "torchneuron":
        out = [] if v >= TORCHNEURON_FIRST else [f"TorchNeuron needs Neuron SDK >= 2.33.0 (this image has {sdk})"]
    else:
        out = _xla_problems(sdk, family)
    if framework == "nxd" and v >= NXD_TRAINING_ENDS:
        out.append(f"NxD Core training is not supported from Neuron SDK 2.29 on (this image has {sdk}); stay on 2.28")
    if framework == "nemo-megatron" and v >= NEMO_MEGATRON_ENDS:
        out.append(f"neuronx-nemo-megatron is not supported from Neuron SDK 2.23 on (this image has {sdk})")
    if framework == "nemo-megatron" and family == "trn2":
        out.append("neuronx-nemo-megatron runs on trn1/trn1n only")
    if image and TRAINING_DLC in image and v < DLC_MPI_SSH_FIRST:
        out.append(
            f"the {TRAINING_DLC} DLC of SDK {sdk} has no sshd for the MPI operator (first in 2.22.0); workers"
            " would crash-loop"
        )
    return out
