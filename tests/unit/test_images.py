"""Every program, absolute path and environment variable a rendered command uses exists in the
image that runs it, per the Dockerfile that builds it (images/<repository>/Dockerfile: its ENV
lines and the build-time checks, which fail the build when the image lacks what they assert).

Scripts started on other hosts are held to the environment they get there: a rank started by
`$MPIRUN bash -c '...'` sees what mpirun forwards with `-x` (plus Open MPI's own variables), a
command run by `ssh host "..."` only what the command line sets (sshd starts it with its own
defaults, not the image's ENV).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from facts.images import IMAGES, content_tag
from tests import upstream
from tests.shell_scan import Provides, dockerfile, scan
from tests.unit.test_recipes import built_with

# Ubuntu's essential packages (Priority: required: coreutils, findutils, grep, sed, mawk, tar,
# bash, hostname, libc-bin) are in every Ubuntu base image the Dockerfiles start from.
BASE_PROGRAMS = {
    "awk", "basename", "bash", "cat", "chown", "cp", "cut", "date", "env", "find", "getent", "grep", "head", "ln",
    "hostname", "ls", "mkdir", "mv", "rm", "sed", "seq", "sh", "sleep", "sort", "tail", "tar", "tee", "touch", "tr",
    "wc", "xargs",
}  # fmt: skip
# Programs the platform puts into the container at run time: the NVIDIA container toolkit mounts
# nvidia-smi from the host driver; dcgmi and nv-hostengine are used only behind `command -v dcgmi`.
RUNTIME_PROGRAMS = {"nvidia-smi", "dcgmi", "nv-hostengine"}
# Paths the pod gets at run time: the FSx claim, devices, scratch, the MPI operator's hostfile
# and SSH keys, the directory sshd needs (made by the worker command), the kernel's sysfs (the
# Neuron driver's version, its UltraServer ids, which the acceptance run reports).
RUNTIME_PATHS = ("/shared/", "/dev/", "/tmp/", "/etc/mpi/", "/root/.ssh", "/run/sshd", "/proc/", "/sys/")
SHELL_VARIABLES = {"SECONDS", "HOSTNAME", "RANDOM", "PWD", "HOME"}
OPEN_MPI_VARIABLES = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}
# What sshd gives a session (OpenSSH's default environment): a fixed PATH, HOME, USER, SHELL.
SSHD_VARIABLES = {"PATH", "HOME", "USER", "SHELL", "LOGNAME"}


def _provides(repository: str) -> Provides:
    return dockerfile(IMAGES[repository].dockerfile)


def _path_provided(path: str, image: Provides) -> bool:
    if path.startswith(RUNTIME_PATHS):
        return True
    # a provided file, or a directory above one
    return any(p == path or p.startswith(path.rstrip("/") + "/") for p in image.paths)


def problems(script: str, image: Provides, env: set[str], where: str = "") -> list[str]:
    """What a script uses that its image or its environment does not provide."""
    uses = scan(script)
    out = []
    for program in sorted(uses.programs):
        ok = (
            _path_provided(program, image)
            if program.startswith("/")
            else program in image.programs | BASE_PROGRAMS | RUNTIME_PROGRAMS
        )
        if not ok:
            out.append(f"{where}program {program}")
    out += [f"{where}path {p}" for p in sorted(uses.paths) if not _path_provided(p, image)]
    known = env | set(uses.assigned) | SHELL_VARIABLES
    out += [f"{where}variable ${v}" for v in sorted(uses.variables - known)]
    forwarded = {w for w in uses.assigned.get("MPIRUN", "").split() if w.isupper() or "_" in w}
    for how, nested in uses.nested:
        inner_env = {
            "mpirun": forwarded | OPEN_MPI_VARIABLES | SSHD_VARIABLES,
            "ssh": SSHD_VARIABLES,
            "ssh-expanded": env | set(uses.assigned) | SSHD_VARIABLES,
            "bash": env | set(uses.assigned),
        }[how]
        out += problems(nested, image, inner_env, where=f"{where}{how}: ")
    return out


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    if obj["kind"] == "MPIJob":
        return [c for r in spec["mpiReplicaSpecs"].values() for c in r["template"]["spec"]["containers"]]
    if obj["kind"] == "Pod":
        return list(spec["containers"])
    return list(spec["template"]["spec"]["containers"])


def image_problems(objs: list[dict[str, Any]]) -> list[str]:
    """Problems of every container whose image is built from images/ (explicit images are the user's)."""
    out = []
    for obj in objs:
        if obj.get("kind") not in ("MPIJob", "Job", "Deployment", "Pod"):
            continue
        for c in _containers(obj):
            repository = c["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1]
            if repository not in IMAGES:
                continue
            image = _provides(repository)
            env = {e["name"] for e in c.get("env", [])} | set(image.env)
            command = c["command"]
            script = command[2] if command[:2] in (["/bin/bash", "-c"], ["bash", "-c"]) else " ".join(command)
            out += [f"{obj['metadata']['name']} ({repository}): {p}" for p in problems(script, image, env)]
    return out


@pytest.mark.parametrize(
    ("recipe", "extra"),
    [
        ("llama2-neuron", {"model": {"preset": "70b"}, "nodes": 4, "training": {"checkpointsToKeep": 1}}),
        ("nemo-gpu", {"dataPrefix": "/shared/data/corpus_text_document"}),
        ("bert-neuron", {"healthCheck": {"enabled": False}}),
    ],
)
def test_recipe_commands_use_only_what_their_image_has(recipe: str, extra: dict[str, Any]) -> None:
    assert image_problems([s.obj for s in built_with(recipe, extra)]) == []


def test_the_check_catches_what_an_image_lacks() -> None:
    """A code path no image has, nccom-test by PATH over ssh (ranks started over ssh get sshd's
    default environment, not the image's ENV), nccl-tests in an image that does not build them,
    and a variable only the image's ENV sets, read by a rank."""
    nnm, nemo = _provides("neuronx-nemo-megatron"), _provides("nemo")
    env = set(nnm.env)
    old_path = (
        "python3 /workspace/neuronx-nemo-megatron/nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
    )
    assert problems(old_path, nnm, env) == [
        "path /workspace/neuronx-nemo-megatron/nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
    ]
    assert problems('ssh "$h" "nccom-test -r 64 -N 2 allr"', nnm, env | {"h"}) == ["ssh-expanded: program nccom-test"]
    assert problems("ssh \"$h\" 'echo $PATH $NEURON_RT_ROOT_COMM_ID'", nnm, env | {"h"}) == [
        "ssh: variable $NEURON_RT_ROOT_COMM_ID"
    ]
    assert problems("/opt/nccl-tests/build/all_reduce_perf -b 8", nnm, env) == [
        "program /opt/nccl-tests/build/all_reduce_perf",
        "path /opt/nccl-tests/build/all_reduce_perf",
    ]
    assert problems("/opt/nccl-tests/build/all_reduce_perf -b 8", nemo, set(nemo.env)) == []
    rank = "export MPIRUN='mpirun -np 2 -x A'\n$MPIRUN bash -c 'echo $A $LD_LIBRARY_PATH'"
    assert problems(rank, nnm, env | {"A"}) == ["mpirun: variable $LD_LIBRARY_PATH"]


def test_dockerfiles_restate_path_and_library_path() -> None:
    """The issue-13 harness (and a reader) takes PATH and LD_LIBRARY_PATH from each Dockerfile."""
    for image in IMAGES.values():
        env = _provides(image.repository).env
        assert "PATH" in env and "LD_LIBRARY_PATH" in env, image.repository
        if image.neuron_sdk:  # a virtual environment's bin may come first
            assert env["PATH"].removeprefix("/opt/venv/bin:").startswith("/opt/aws/neuron/bin:"), image.repository


def test_dockerfiles_set_sshd_up_for_the_mpi_operator() -> None:
    """Host keys baked in, StrictModes off (the operator's ~/.ssh is a read-only Secret mount),
    no host-key prompt and no known_hosts writes (kubeflow/mpi-operator#580)."""
    for image in IMAGES.values():
        text = image.dockerfile.read_text()
        for needle in (
            "ssh-keygen -A",
            "s/^#\\?StrictModes .*/StrictModes no/",
            "grep -q '^StrictModes no' /etc/ssh/sshd_config",
            "StrictHostKeyChecking no",
            "UserKnownHostsFile /dev/null",
            "test -x /usr/sbin/sshd",
        ):
            assert needle in text, (image.repository, needle)


def test_dockerfiles_pin_the_upstream_their_facts_name() -> None:
    nnm = upstream.load("neuronx-nemo-megatron-2.21")["source"]
    assert f"ARG NNM_COMMIT={nnm['commit']}" in IMAGES["neuronx-nemo-megatron"].dockerfile.read_text()
    bert = upstream.load("dp-bert-hf-pretrain-v2.27.0")["source"]
    assert f"ARG SAMPLES_COMMIT={bert['commit']}" in IMAGES["bert-neuronx"].dockerfile.read_text()
    nemo = IMAGES["nemo"].dockerfile.read_text()
    assert "ARG BASE=nvcr.io/nvidia/nemo:24.07" in nemo
    assert "nvcr.io/nvidia/nemo:24.07" in upstream.facts("nemo-r2.0.0rc1")["container"]
    assert "nemo.__version__ == '2.0.0rc1'" in nemo
    dlc = upstream.facts("neuron-dlc-pytorch-training")["images"]
    for repository in ("neuronx-nemo-megatron", "bert-neuronx"):
        sdk = IMAGES[repository].neuron_sdk
        assert f"ARG BASE={dlc[f'sdk{sdk}']}" in IMAGES[repository].dockerfile.read_text(), repository


def test_image_tag_is_the_folder_content(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    first = content_tag(tmp_path)
    content_tag.cache_clear()
    (tmp_path / "Dockerfile").write_text("FROM y\n")
    assert content_tag(tmp_path) != first
    content_tag.cache_clear()
