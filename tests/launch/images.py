"""The "image" of a pod, from its Dockerfile in this repository (images/<name>/Dockerfile), or
for the public image of CPU runs from its upstream facts (tests/upstream/horovod-cpu-0.28.1.yaml):

- its environment: the ENV lines, in order, `$VAR`/`${VAR}` substituted from the ones before
  (PATH starting as Docker's default);
- its files: what the Dockerfile's build-time checks assert the image has (`test -f|-x <path>`,
  `command -v <program>`): a stand-in where the harness has one (`standins/`), else an empty
  file; programs go to the directory the base image's Python puts console scripts in.

- its Open MPI where the image has it: the Neuron DLC's in /usr/local (tests/upstream/
  neuron-dlc-pytorch-training.yaml; the DLC also has apt's openmpi-bin in /usr/bin), the EFA
  installer's in /opt/amazon/openmpi for an image whose ENV says OPAL_PREFIX there (no other in
  the image: NGC's removed, /usr/bin's hidden by overlay whiteouts), horovod-cpu's in /usr/local
  (its facts). This machine's Open MPI binaries stand in, copied there: a `mpirun` found on
  PATH starts its remote `orted` through sshd's default PATH, an absolute one (Open MPI's
  implicit --prefix) from its own bin/;
- what its base image brings that the node must fit: the DLC's Neuron runtime library (SDK 2.22.0's;
  SDK 2.28.0's from tests/upstream/neuron-sdk-2.28-2.33.yaml), or the one its Dockerfile installs
  (`ARG NEURON_RUNTIME_VERSION`, images/torchtitan), the NGC container's CUDA major
  (tests/upstream/nvidia-cuda-compatibility.yaml); and which huggingface-hub its Python has
  (neuronx-nemo-megatron's pin: 0.22.2; neuronx-distributed's 0.27.1; the others 0.24.5).

Only that: an image's ssh_config, sshd_config and loader cache (`/etc/ld.so.conf.d`) are not
modelled, so the rendered commands are held to work on an image that has its ENV and files
only (a user's `image:`), and a binary or library outside the default paths is reachable only
through the ENV that carries it, as for a rank sshd starts on EKS.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from facts import serving
from facts.images import IMAGES, PUBLIC_CPU_IMAGE
from tests import upstream
from tests.shell_scan import dockerfile

STANDINS = Path(__file__).with_name("standins")
# The PATH a build starts with when no base image sets one (moby/buildkit, llbutil DefaultPathEnv).
DOCKER_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# ENV that configures the MPI installation itself, not the job: Debian's Open MPI (in /usr)
# runs in every pod here, so an image's OPAL_PREFIX=/opt/amazon/openmpi would break it.
NOT_MODELLED_ENV = {"OPAL_PREFIX", "PMIX_MCA_gds"}
# Where `command -v <program>` finds a Python console script in both base images: the Neuron
# DLC builds Python into /usr/local (deep-learning-containers 2.22.0, Dockerfile.neuronx) and
# NGC's pip installs scripts into /usr/local/bin.
PROGRAM_DIR = "/usr/local/bin"
# Stand-ins by the name of the file they replace; `.py` ones are run as scripts by python.
STANDIN_FILES = {
    "nccom-test": "nccomtest.py",
    "all_reduce_perf": "all_reduce_perf.py",
    "neuron_parallel_compile": "neuron_parallel_compile.py",
    "aws": "awscli.py",
    "huggingface-cli": "huggingface_cli.py",
    "preprocess_data_for_megatron.py": "preprocess_data_for_megatron.py",
    "megatron_gpt_pretraining.py": "megatron_gpt_pretraining.py",
    "dp_bert_large_hf_pretrain_hdf5.py": "dp_bert_large_hf_pretrain_hdf5.py",
    "tp_zero1_llama_hf_pretrain.py": "tp_zero1_llama_hf_pretrain.py",
    "get_dataset.py": "get_dataset.py",
    "convert_checkpoints.py": "convert_checkpoints.py",
    "download_hf_assets.py": "download_hf_assets.py",
    "train.py": "torchtitan_train.py",  # torchtitan/train.py of the checkout: `python -m torchtitan.train`
    "hf": "hf_cli.py",
    "run_recipe.py": "run_recipe.py",
    "run_conversion.py": "run_conversion.py",
    "vllm": "vllm.py",
    "convert_llama_nemo_to_hf.py": "convert_llama_nemo_to_hf.py",
    "fio": "fio.py",
}
PYTHON_TOOLS = ("python", "python3", "torchrun")  # this machine's PyTorch (CPU), behind wrappers
# What the NVIDIA container toolkit mounts into a GPU pod from the host driver.
GPU_RUNTIME_FILES = {"/usr/bin/nvidia-smi": "nvidiasmi.py"}
# Which training framework's checkpoint and resume rules an image's Megatron script follows.
# (ddp-cpu: the recipe's own script runs for real, under this machine's PyTorch.)
FRAMEWORKS = {
    "neuronx-nemo-megatron": "neuronx-nemo-megatron",
    "nemo": "nemo",
    "bert-neuronx": "bert",
    "horovod-cpu": "ddp-cpu",
    "neuronx-distributed": "nxd",
    "torchtitan": "torchtitan",
    "nemo-megatron-bridge": "megatron-bridge",
    "gpu-fabric": "fabric",
    "neuron-fabric": "fabric",
    "fio": "fsx-read",
    "vllm-openai": "vllm",
    "pytorch-inference-vllm-neuronx": "vllm",
}
# Public images a recipe runs unbuilt, and the fact file that describes each.
PUBLIC = {PUBLIC_CPU_IMAGE: "horovod-cpu-0.28.1"}
DLC = upstream.facts("neuron-dlc-pytorch-training")
DLC_BASES = {base: DLC[f"{sdk}_pytorch_2.5.1"] for sdk, base in DLC["images"].items() if f"{sdk}_pytorch_2.5.1" in DLC}
_DLC_2_28 = upstream.facts("neuron-sdk-2.28-2.33")["dlc_2_28_0_training"]
DLC_BASES[_DLC_2_28["image"]] = {  # the SDK 2.28.0 DLC of images/neuronx-distributed, in the same shape
    "open_mpi": _DLC_2_28["open_mpi"],
    "apt_neuron": [f"aws-neuronx-runtime-lib {_DLC_2_28['runtime_lib']}"],
}
NGC_CUDA_MAJOR = upstream.facts("nvidia-cuda-compatibility")["ngc_24_containers_cuda_major"]
# This machine's Open MPI (Debian openmpi-bin), and the names an image without it must not show.
SYSTEM_MPI = {"orterun": "/usr/bin/orterun", "orted": "/usr/bin/orted"}
SYSTEM_MPI_NAMES = ("/usr/bin/mpirun", "/usr/bin/mpiexec", "/usr/bin/orterun", "/usr/bin/orted")
HUB_VERSIONS = {
    "neuronx-nemo-megatron": "huggingface-hub-0.22.2",  # its requirements: <0.23
    "neuronx-distributed": "huggingface-hub-0.27.1",  # pinned by its Dockerfile (the example's floor)
    "nemo-megatron-bridge": "huggingface-hub-1.24.0",  # what Megatron Bridge 0.6.0 locks
    # The vLLM images: huggingface-hub 1.x (facts/serving.py, their `hub_cli`).
    "vllm-openai": "huggingface-hub-1.24.0",
    "pytorch-inference-vllm-neuronx": "huggingface-hub-1.24.0",
}
SERVING_PROGRAMS = frozenset({"vllm", "python3", "python", "hf"})
"""What a vLLM image is held to have on its PATH (not read from its Dockerfile: those images are
not built here): `vllm` (the stand-in checks its arguments), the Python of its converter-free
steps, and huggingface-hub 1.x's `hf` that the staging Job runs in it."""


def _substitute(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def parse_env(text: str) -> dict[str, str]:
    """The environment a Dockerfile's ENV instructions leave, in order, with `$VAR`/`${VAR}`
    substituted from the ones before (PATH starts as Docker's default)."""
    env = {"PATH": DOCKER_DEFAULT_PATH}
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        m = re.match(r"\s*ENV\s+(.*)", line, re.IGNORECASE)
        if not m:
            continue
        body = m.group(1).strip()
        if "=" not in body.split()[0]:  # legacy form: ENV KEY value with spaces
            key, _, value = body.partition(" ")
            env[key] = _substitute(value.strip(), env)
            continue
        for key, value in re.findall(r'(\w+)=("[^"]*"|\S*)', body):
            env[key] = _substitute(value.strip('"'), env)
    return {k: v for k, v in env.items() if k not in NOT_MODELLED_ENV}


@dataclass(frozen=True)
class Image:
    """One image: its repository name, environment, and the files its Dockerfile asserts."""

    reference: str
    name: str
    env: dict[str, str]
    paths: frozenset[str]
    programs: frozenset[str]
    source: str
    workdir: str | None = None  # the last WORKDIR: where a container without workingDir starts
    open_mpi: str | None = None  # the prefix of the Open MPI the image's mpirun is
    prefix_by_default: bool = False  # that Open MPI is built --enable-orterun-prefix-by-default
    system_mpi: bool = False  # the image also has Open MPI in /usr/bin (apt's openmpi-bin)
    neuron_runtime: str | None = None
    cuda_major: str | None = None

    @property
    def framework(self) -> str:
        return FRAMEWORKS[self.name]

    @property
    def hub_facts(self) -> str:
        """The upstream facts of the huggingface-hub its Python has."""
        return HUB_VERSIONS.get(self.name, "huggingface-hub-0.24.5")


def describe(reference: str) -> Image:
    """The image of a reference `<registry>/<path>/<name>:<tag>`, built from images/<name>/."""
    name = reference.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    if reference in PUBLIC:  # its programs are this machine's (sshd, mpirun) or wrappers (python, torchrun)
        facts, source = upstream.facts(PUBLIC[reference]), f"tests/upstream/{PUBLIC[reference]}.yaml"
        env = {"PATH": DOCKER_DEFAULT_PATH, **facts["env"]}
        programs = frozenset([*facts["programs"], facts["python"]["command"]])
        return Image(reference, name, env, frozenset(), programs, source, facts["workdir"], facts["open_mpi"]["prefix"])
    pinned = serving.image_for_name(reference)
    if pinned is not None:  # a public vLLM image: its programs on Docker's default PATH, as root
        return Image(
            reference,
            name,
            {"PATH": DOCKER_DEFAULT_PATH},
            frozenset(),
            SERVING_PROGRAMS,
            "facts/serving.py",
            neuron_runtime=pinned.runtime.neuron_runtime,
        )
    if name not in IMAGES:
        raise KeyError(f"{reference!r} is not built from images/ (known: {sorted(IMAGES)}): no description of it")
    base_image = re.search(r"^FROM (\S+)", IMAGES[name].dockerfile.read_text(), re.M)
    if base_image and base_image.group(1) in PUBLIC:  # images/fio: the public CPU image plus what it adds
        public, provides = describe(base_image.group(1)), dockerfile(IMAGES[name].dockerfile)
        return replace(
            public, reference=reference, name=name, paths=provides.paths, programs=public.programs | provides.programs
        )
    path = IMAGES[name].dockerfile
    text = path.read_text()
    provides = dockerfile(path)
    source = f"images/{name}/Dockerfile"
    base = re.search(r"^ARG BASE=(\S+)", text, re.M)
    dlc = DLC_BASES.get(base.group(1) if base else "")
    opal = re.search(r"^ENV OPAL_PREFIX=(\S+)", text, re.M)
    # The fabric images name what they install: the Neuron runtime library, the CUDA base.
    runtime_arg = re.search(r"^ARG NEURON_RUNTIME_VERSION=(\S+)", text, re.M)
    cuda_arg = re.search(r"^ARG CUDA_VERSION=(\d+)\.", text, re.M)
    return Image(
        reference,
        name,
        parse_env(text),
        provides.paths,
        provides.programs,
        source,
        open_mpi=dlc["open_mpi"]["prefix"] if dlc else (opal.group(1) if opal else None),
        prefix_by_default=bool(dlc and dlc["open_mpi"]["prefix_by_default"]),
        system_mpi=bool(dlc),  # the DLC installs apt's openmpi-bin too
        neuron_runtime=_runtime_lib(dlc) if dlc else (runtime_arg.group(1) if runtime_arg else None),
        cuda_major=NGC_CUDA_MAJOR
        if base and base.group(1).startswith("nvcr.io/nvidia/")
        else (cuda_arg.group(1) if cuda_arg else None),
    )


def _runtime_lib(dlc: dict[str, Any]) -> str:
    """The aws-neuronx-runtime-lib version of a DLC's apt packages."""
    package = next(p for p in dlc["apt_neuron"] if p.startswith("aws-neuronx-runtime-lib "))
    return package.split()[1].split("-")[0]


def _write(path: Path, text: str, mode: int = 0o755) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _runner(standin: str) -> str:
    """An executable that runs a stand-in (stdlib only: without site-packages, which starts faster)."""
    return f'#!/bin/sh\nexec {sys.executable} -S {STANDINS / standin} "$@"\n'


def code_shim(standin: str) -> str:
    """A Python script file that runs a stand-in of `standins/` in its place (same argv)."""
    return (
        f"import runpy, sys\nsys.path.insert(0, {str(STANDINS)!r})\n"
        f"runpy.run_path({str(STANDINS / standin)!r}, run_name='__main__')\n"
    )


def _place(dest: Path, path: str) -> None:
    """One path the Dockerfile asserts: a stand-in, a loadable library, or an empty file."""
    name = path.rsplit("/", 1)[-1]
    target = dest / path.lstrip("/")
    if name in STANDIN_FILES:
        standin = STANDIN_FILES[name]
        _write(target, code_shim(standin) if name.endswith(".py") else _runner(standin))
    elif name.endswith(".so"):  # any loadable library will do: it is only dlopen'ed
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path("/lib/x86_64-linux-gnu/libz.so.1").resolve(), target)
    else:
        _write(target, "", 0o644)


def build_layer(image: Image, dest: Path) -> Path:
    """The image's layer: every path its Dockerfile asserts that this machine lacks, the
    programs it asserts that the harness has a stand-in for, and the image's SSH host keys."""
    venv_bin = Path(sys.executable).parent
    if PROGRAM_DIR not in image.env["PATH"].split(":"):
        raise ValueError(f"{image.source}: {PROGRAM_DIR} is not on its ENV PATH; put its programs elsewhere")
    for path in sorted(image.paths):
        if not Path(path).exists() or path.rsplit("/", 1)[-1] in STANDIN_FILES:
            _place(dest, path)
    for program in sorted(image.programs):
        target = dest / PROGRAM_DIR.lstrip("/") / program
        if program in PYTHON_TOOLS:  # the image's `transformers` is a stand-in (standins/pylib)
            path = f"PYTHONPATH={STANDINS / 'pylib'}${{PYTHONPATH:+:$PYTHONPATH}}"
            _write(target, f'#!/bin/sh\nexport {path}\nexec {venv_bin / program} "$@"\n')
        elif program in STANDIN_FILES:
            _write(target, _runner(STANDIN_FILES[program]))
    if image.workdir:
        (dest / image.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    if image.open_mpi:
        _open_mpi(dest, image)
    # SSH host keys of the image (its Dockerfile runs `ssh-keygen -A`): the same in every pod.
    keys = host_keys()
    (dest / "etc" / "ssh").mkdir(parents=True, exist_ok=True)
    for key in (keys / "etc" / "ssh").glob("ssh_host_*"):
        shutil.copy2(key, dest / "etc" / "ssh" / key.name)
    return dest


def _open_mpi(dest: Path, image: Image) -> None:
    """This machine's Open MPI binaries at the image's Open MPI prefix; /usr/bin's hidden (a
    whiteout each) where the image has no Open MPI there."""
    home = dest / str(image.open_mpi).lstrip("/")
    (home / "lib").mkdir(parents=True, exist_ok=True)
    for name, source in SYSTEM_MPI.items():
        (home / "bin").mkdir(parents=True, exist_ok=True)
        (home / "bin" / name).unlink(missing_ok=True)
        shutil.copy2(source, home / "bin" / name)
    for alias in ("mpirun", "mpiexec"):
        (home / "bin" / alias).unlink(missing_ok=True)
        (home / "bin" / alias).symlink_to("orterun")
    if not image.system_mpi:
        for path in SYSTEM_MPI_NAMES:
            target = dest / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.mknod(target, stat.S_IFCHR, os.makedev(0, 0))  # overlayfs whiteout


def gpu_runtime_layer(dest: Path) -> Path:
    """What the NVIDIA container runtime adds to a pod that was given GPUs."""
    for path, standin in GPU_RUNTIME_FILES.items():
        _write(dest / path.lstrip("/"), _runner(standin))
    return dest


@cache
def host_keys() -> Path:
    """A set of SSH host keys, made once per process (`ssh-keygen -A` takes half a CPU-second)."""
    prefix = Path(tempfile.mkdtemp(prefix="launch-host-keys-"))
    atexit.register(shutil.rmtree, prefix, True)
    (prefix / "etc" / "ssh").mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-A", "-f", str(prefix)], check=True, capture_output=True)
    return prefix
