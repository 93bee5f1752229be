"""The harness's image descriptions: a Dockerfile's ENV lines give the environment (so that
when images/<name>/Dockerfile lands, the harness runs with what it sets)."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_nccl_tests_fallback_reaches_the_net_plugin_only_through_ld_library_path() -> None:
    image = images.describe("123.dkr.ecr.us-east-1.amazonaws.com/nccl-tests:cuda12.4-efa1.37.0")
    plugin_dir = image.family.libraries["libnccl-net.so"]
    assert plugin_dir in image.env["LD_LIBRARY_PATH"].split(":")
    assert "OPAL_PREFIX" not in image.env  # Debian's Open MPI runs here, not /opt/amazon/openmpi


def test_a_dockerfile_in_the_repository_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "images" / "nemo").mkdir(parents=True)
    (tmp_path / "images" / "nemo" / "Dockerfile").write_text("ENV LD_LIBRARY_PATH=/opt/aws-ofi-nccl/install/lib\n")
    monkeypatch.setattr(images, "ROOT", tmp_path)
    image = images.describe("123.dkr.ecr.us-east-1.amazonaws.com/x/nemo:24.07")
    assert image.source == "images/nemo/Dockerfile"
    assert image.env["LD_LIBRARY_PATH"] == "/opt/aws-ofi-nccl/install/lib"


def test_an_image_without_a_description_is_named() -> None:
    with pytest.raises(KeyError, match="images/unknown/Dockerfile"):
        images.describe("registry/unknown:1")
