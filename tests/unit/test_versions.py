"""The Neuron version table against the release notes and container sources it is built from
(tests/upstream/neuron-sdk-support.yaml, tests/upstream/neuron-sdk-2.28-2.33.yaml,
tests/upstream/neuron-dlc-pytorch-training.yaml)."""

from __future__ import annotations

import pytest

from config.workloads import RECIPES
from facts import instances, versions
from facts.images import IMAGES
from tests import upstream

SUPPORT = upstream.facts("neuron-sdk-support")
DLC = upstream.facts("neuron-dlc-pytorch-training")
RELEASES = upstream.facts("neuron-sdk-2.28-2.33")


def test_boundaries_are_the_release_notes() -> None:
    assert versions.parse(SUPPORT["pytorch_xla_training_ends"]) == versions.XLA_TRAINING_ENDS
    assert versions.parse(SUPPORT["pytorch_xla_training_last_sdk"]) < versions.XLA_TRAINING_ENDS
    assert versions.parse(SUPPORT["nemo_megatron_end_of_support_from"] + ".0") == versions.NEMO_MEGATRON_ENDS
    assert versions.parse(SUPPORT["trn2_first_sdk"]) == versions.TRN2_FIRST
    assert versions.parse(SUPPORT["pytorch_training_dlc_last_published_before"]) == versions.TRAINING_DLC_ENDS
    assert versions.parse(DLC["mpi_operator_ssh"]["first_pytorch_training_tag"]) == versions.DLC_MPI_SSH_FIRST
    assert versions.parse(RELEASES["nxd_core_training_ends"] + ".0") == versions.NXD_TRAINING_ENDS
    assert versions.parse(RELEASES["torchneuron"]["first_sdk"]) == versions.TORCHNEURON_FIRST
    assert tuple(RELEASES["torchneuron"]["families"]) == versions.TORCHNEURON_FAMILIES


def test_table_runtime_and_driver_are_the_release_notes() -> None:
    rows = {row.sdk: row for row in versions.TABLE}
    for sdk, release in RELEASES["releases"].items():
        row = rows.get(sdk) or rows[next(s for s in rows if s.rsplit(".", 1)[0] == sdk.rsplit(".", 1)[0])]
        assert (row.runtime, row.driver) == (str(release["runtime"]), str(release["driver"])), sdk


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
    assert any("no sshd" in p for p in versions.problems(sdk, "trn1", framework="pytorch-xla", image=image))


@pytest.mark.parametrize(
    ("sdk", "family", "framework", "ok"),
    [
        ("2.22.0", "trn1", "nemo-megatron", True),
        ("2.22.0", "trn2", "nemo-megatron", False),  # neuronx-nemo-megatron: trn1/trn1n only
        ("2.23.0", "trn1", "nemo-megatron", False),  # NeMo Megatron support ends in 2.23
        ("2.29.1", "trn1", "pytorch-xla", True),  # the last SDK with PyTorch/XLA training
        ("2.30.0", "trn1", "pytorch-xla", False),
        ("2.20.0", "trn2", "pytorch-xla", False),  # trn2 arrives in 2.21
        ("2.21.1", "trn2", "pytorch-xla", True),
        ("2.28.0", "trn1", "nxd", True),  # the last SDK with NxD Core's training APIs
        ("2.29.1", "trn1", "nxd", False),
        ("2.33.0", "trn2", "torchneuron", True),  # TorchNeuron's public beta
        ("2.32.0", "trn2", "torchneuron", False),
        ("2.33.0", "trn2", None, True),  # your code: TorchNeuron on trn2
        ("2.33.0", "trn1", None, False),  # nothing trains on trn1 with 2.33
        ("2.20.0", "trn2", "none", False),  # no framework: the SDK must know the family
        ("2.32.0", "trn2", "none", True),
    ],
)
def test_recipes_and_hardware(sdk: str, family: str, framework: versions.Framework | None, ok: bool) -> None:
    found = versions.problems(sdk, family, framework=framework, image=None)
    assert (found + versions.family_problems(family, framework=framework) == []) == ok, found


@pytest.mark.parametrize("family", ["trn1", "trn1n"])
def test_torchneuron_is_refused_on_trn1_whatever_the_sdk(family: str) -> None:
    (problem,) = versions.family_problems(family, framework="torchneuron")
    assert "trn2 and trn3 only" in problem and family in problem


def test_the_images_of_this_repository_train_where_their_recipes_say() -> None:
    """Each built Neuron image trains on the families its recipe's support row names, and the
    TorchNeuron one not on trn1 (so a trn1 environment does not build it)."""
    trn1, trn2 = instances.get("trn1.32xlarge"), instances.get("trn2.48xlarge")
    for model in RECIPES.values():
        if model.ACCELERATOR != "neuron" or model.REPOSITORY is None:
            continue
        support = model.DOCS.support
        assert support is not None
        wants = [i for i in (trn1, trn2) if i.family in support.hardware]
        assert wants and all(model.built_image_trains_on(i) for i in wants), model.RECIPE
    assert not RECIPES["torchtitan-neuron"].built_image_trains_on(trn1)


XLA_FRAMEWORKS = ("pytorch-xla", "nemo-megatron", "nxd")


def test_the_images_of_this_repository_fit_trn1() -> None:
    """The images of the recipes that train with PyTorch/XLA (on it: NxD, neuronx-nemo-megatron);
    the Neuron fabric image runs no framework and is held to its SDK's packages instead
    (tests/unit/test_fabric.py)."""
    xla = {m.REPOSITORY: m.NEURON_FRAMEWORK for m in RECIPES.values() if m.NEURON_FRAMEWORK in XLA_FRAMEWORKS}
    assert set(xla) >= {"neuronx-nemo-megatron", "bert-neuronx", "neuronx-distributed"}
    for image in IMAGES.values():
        if image.neuron_sdk and image.repository in xla:
            framework = xla[image.repository]
            assert versions.problems(image.neuron_sdk, "trn1", framework=framework, image=None) == []
            published = {
                *DLC["images"],
                "sdk" + RELEASES["dlc_2_28_0_training"]["image"].split("-sdk")[1].split("-")[0],
            }
            assert f"sdk{image.neuron_sdk}" in published, "a published training DLC of that SDK"
    fabric = {m.REPOSITORY for m in RECIPES.values() if m.ACCELERATOR == "neuron" and m.NEURON_FRAMEWORK == "none"}
    assert fabric
    for repository in fabric:
        sdk = IMAGES[str(repository)].neuron_sdk
        assert sdk and versions.problems(sdk, "trn2", framework="none", image=None) == []


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
