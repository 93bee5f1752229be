"""The Neuron version table against the release notes and container sources it is built from
(tests/upstream/neuron-sdk-support.yaml, tests/upstream/neuron-dlc-pytorch-training.yaml)."""

from __future__ import annotations

import pytest

from config.workloads import RECIPES
from facts import versions
from facts.images import IMAGES
from tests import upstream

SUPPORT = upstream.facts("neuron-sdk-support")
DLC = upstream.facts("neuron-dlc-pytorch-training")


def test_boundaries_are_the_release_notes() -> None:
    assert versions.parse(SUPPORT["pytorch_xla_training_ends"]) == versions.XLA_TRAINING_ENDS
    assert versions.parse(SUPPORT["pytorch_xla_training_last_sdk"]) < versions.XLA_TRAINING_ENDS
    assert versions.parse(SUPPORT["nemo_megatron_end_of_support_from"] + ".0") == versions.NEMO_MEGATRON_ENDS
    assert versions.parse(SUPPORT["trn2_first_sdk"]) == versions.TRN2_FIRST
    assert versions.parse(SUPPORT["pytorch_training_dlc_last_published_before"]) == versions.TRAINING_DLC_ENDS
    assert versions.parse(DLC["mpi_operator_ssh"]["first_pytorch_training_tag"]) == versions.DLC_MPI_SSH_FIRST


def test_trn1_has_no_training_after_pytorch_xla() -> None:
    """TorchNeuron, the successor of PyTorch/XLA training, targets neither trn1 nor trn1n."""
    for family in ("trn1", "trn1n"):
        assert family not in SUPPORT["torchneuron_targets"]
        assert family not in versions.xla_training_families(SUPPORT["pytorch_xla_training_ends"])
        assert family in versions.xla_training_families(SUPPORT["pytorch_xla_training_last_sdk"] + ".0")


@pytest.mark.parametrize("tag", DLC["mpi_operator_ssh"]["tags_without"])
def test_dlcs_without_sshd_are_refused(tag: str) -> None:
    image = f"public.ecr.aws/neuron/pytorch-training-neuronx:2.1.2-neuronx-py310-sdk{tag}-ubuntu20.04"
    sdk = versions.sdk_of_image(image)
    assert sdk == tag
    assert any("no sshd" in p for p in versions.problems(sdk, "trn1", nemo_megatron=False, image=image))


@pytest.mark.parametrize(
    ("sdk", "family", "nemo", "ok"),
    [
        ("2.22.0", "trn1", True, True),
        ("2.22.0", "trn2", True, False),  # neuronx-nemo-megatron: trn1/trn1n only
        ("2.23.0", "trn1", True, False),  # NeMo Megatron support ends in 2.23
        ("2.29.1", "trn1", False, True),  # the last SDK with PyTorch/XLA training
        ("2.30.0", "trn1", False, False),
        ("2.20.0", "trn2", False, False),  # trn2 arrives in 2.21
        ("2.21.1", "trn2", False, True),
    ],
)
def test_recipes_and_hardware(sdk: str, family: str, nemo: bool, ok: bool) -> None:
    assert (versions.problems(sdk, family, nemo_megatron=nemo, image=None) == []) == ok


def test_the_images_of_this_repository_fit_trn1() -> None:
    """The images of the recipes that train with PyTorch/XLA; the Neuron fabric image runs no
    framework and is held to its SDK's packages instead (tests/unit/test_fabric.py)."""
    xla = {m.REPOSITORY for m in RECIPES.values() if m.ACCELERATOR == "neuron" and m.XLA_TRAINING}
    for image in IMAGES.values():
        if image.neuron_sdk and image.repository in xla:
            assert versions.problems(image.neuron_sdk, "trn1", nemo_megatron=True, image=None) == []
            assert f"sdk{image.neuron_sdk}" in DLC["images"], "a published training DLC of that SDK"
    fabric = {m.REPOSITORY for m in RECIPES.values() if m.ACCELERATOR == "neuron" and not m.XLA_TRAINING}
    for repository in fabric:
        sdk = IMAGES[str(repository)].neuron_sdk
        assert sdk and versions.problems(sdk, "trn2", nemo_megatron=False, image=None, xla_training=False) == []


def test_table_rows_agree_with_the_rules() -> None:
    for row in versions.TABLE:
        trains = row.trains_on
        assert ("trn1" in trains) == (versions.parse(row.sdk) < versions.XLA_TRAINING_ENDS), row.sdk
        if row.training_dlc:
            assert versions.sdk_of_image(row.training_dlc) == row.sdk


def test_sdk_is_read_only_from_a_tag() -> None:
    assert versions.sdk_of_image("repo/pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.22.0-ubuntu22.04") == "2.22.0"
    assert versions.sdk_of_image("registry.invalid:5000/sdk2.22.0/img:1") is None
    assert versions.sdk_of_image("repo/img@sha256:" + "0" * 64) is None
