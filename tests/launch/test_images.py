"""The harness's images and stand-ins, held to the Dockerfiles and the upstream facts (no
namespaces needed): ENV parsing, the layer each Dockerfile describes, and the pins the
stand-ins' rules were read at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from facts.images import IMAGES
from tests import upstream
from tests.launch import images


def test_env_lines_in_both_forms_with_substitution() -> None:
    env = images.parse_env(
        "FROM x\n"
        "ENV PATH /opt/aws/neuron/bin:$PATH\n"
        'ENV LD_LIBRARY_PATH=/opt/a/lib:${LD_LIBRARY_PATH} FOO="b c" \\\n    BAR=1\n'
        "RUN echo ENV NOT=this\n"
    )
    assert env["PATH"] == f"/opt/aws/neuron/bin:{images.DOCKER_DEFAULT_PATH}"
    assert env["LD_LIBRARY_PATH"] == "/opt/a/lib:"
    assert (env["FOO"], env["BAR"]) == ("b c", "1")
    assert "NOT" not in env


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_layer_has_what_the_dockerfile_asserts(name: str, tmp_path: Path) -> None:
    """Every stand-in the Dockerfile's checks name is placed at its path, and the programs go
    to a directory on the image's ENV PATH."""
    image = images.describe(f"123.dkr.ecr.us-west-2.amazonaws.com/c/{name}:abc")
    layer = images.build_layer(image, tmp_path / "layer")
    for path in image.paths:
        if path.rsplit("/", 1)[-1] in images.STANDIN_FILES:
            assert (layer / path.lstrip("/")).is_file(), path
    for program in image.programs & {*images.PYTHON_TOOLS, *images.STANDIN_FILES}:
        assert (layer / images.PROGRAM_DIR.lstrip("/") / program).is_file(), program
    assert images.PROGRAM_DIR in image.env["PATH"].split(":")
    assert "OPAL_PREFIX" not in image.env  # Debian's Open MPI runs here, not /opt/amazon/openmpi


def test_nccl_net_plugin_is_reachable_only_through_the_image_ld_library_path() -> None:
    image = images.describe("x/nemo:1")
    (plugin,) = [p for p in image.paths if p.endswith("/libnccl-net.so")]
    assert plugin.rsplit("/", 1)[0] in image.env["LD_LIBRARY_PATH"].split(":")
    assert not Path(plugin).exists(), "this machine has the plugin: the harness would not notice a lost path"


def test_an_image_not_built_here_is_named() -> None:
    with pytest.raises(KeyError, match="not built from images/"):
        images.describe("registry/unknown:1")


def test_standin_rules_are_read_at_the_versions_the_images_pin() -> None:
    """tests/upstream/training-resume-rules.yaml names the commits the Dockerfiles build."""
    rules = upstream.load("training-resume-rules")["source"]
    pinned = {rules["repository"]: rules["commit"], **{a["repository"]: a["commit"] for a in rules["also"]}}
    nnm = IMAGES["neuronx-nemo-megatron"].dockerfile.read_text()
    assert f"ARG NNM_COMMIT={pinned['aws-neuron/neuronx-nemo-megatron']}" in nnm
    bert = IMAGES["bert-neuronx"].dockerfile.read_text()
    assert f"ARG SAMPLES_COMMIT={pinned['aws-neuron/aws-neuron-samples']}" in bert
    assert pinned["NVIDIA/NeMo"] == upstream.load("nemo-r2.0.0rc1")["source"]["commit"]
    bridge = IMAGES["nemo-megatron-bridge"].dockerfile.read_text()
    assert f"ARG BRIDGE_COMMIT={pinned['NVIDIA-NeMo/Megatron-Bridge']}" in bridge
    facts = upstream.facts("training-resume-rules")
    assert facts["nemo"]["saveLast"] is upstream.facts("nemo-r2.0.0rc1")["resume"]["save_last_default"]
    assert re.fullmatch(r"ckpt_\{step\}\.pt", facts["bert"]["checkpoint"])
    assert "--resume_ckpt" in upstream.facts("dp-bert-hf-pretrain-v2.27.0")["options"]
