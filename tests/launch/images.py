"""The "image" of a pod, from its Dockerfile in this repository (images/<name>/Dockerfile), or
for the public image of CPU runs from its upstream facts (tests/upstream/horovod-cpu-0.28.1.yaml):

- its environment: the ENV lines, in order, `$VAR`/`${VAR}` substituted from the ones before
  (PATH starting as Docker's default);
- its files: what the Dockerfile's build-time checks assert the image has (`test -f|-x <path>`,
  `command -v <program>`): a stand-in where the harness has one (`standins/`), else an empty
  file; programs go to the directory the base image's Python puts console scripts in.

Only that: an image's ssh_config, sshd_config and loader cache (`/etc/ld.so.conf.d`) are not
modelled, so the rendered commands are held to work on an image that has its ENV and files
only (a user's `image:`), and a binary or library outside the default paths is reachable only
through the ENV that carries it, as for a rank sshd starts on EKS.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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
    "gpu-fabric": "fabric",
    "neuron-fabric": "fabric",
}
# Public images a recipe runs unbuilt, and the fact file that describes each.
PUBLIC = {PUBLIC_CPU_IMAGE: "horovod-cpu-0.28.1"}


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

    @property
    def framework(self) -> str:
        return FRAMEWORKS[self.name]


def describe(reference: str) -> Image:
    """The image of a reference `<registry>/<path>/<name>:<tag>`, built from images/<name>/."""
    name = reference.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    if reference in PUBLIC:  # its programs are this machine's (sshd, mpirun) or wrappers (python, torchrun)
        facts, source = upstream.facts(PUBLIC[reference]), f"tests/upstream/{PUBLIC[reference]}.yaml"
        env = {"PATH": DOCKER_DEFAULT_PATH, **facts["env"]}
        programs = frozenset([*facts["programs"], facts["python"]["command"]])
        return Image(reference, name, env, frozenset(), programs, source, facts["workdir"])
    if name not in IMAGES:
        raise KeyError(f"{reference!r} is not built from images/ (known: {sorted(IMAGES)}): no description of it")
    path = IMAGES[name].dockerfile
    provides = dockerfile(path)
    source = f"images/{name}/Dockerfile"
    return Image(reference, name, parse_env(path.read_text()), provides.paths, provides.programs, source)


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
        if program in PYTHON_TOOLS:
            _write(target, f'#!/bin/sh\nexec {venv_bin / program} "$@"\n')
        elif program in STANDIN_FILES:
            _write(target, _runner(STANDIN_FILES[program]))
    if image.workdir:
        (dest / image.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    # SSH host keys of the image (its Dockerfile runs `ssh-keygen -A`): the same in every pod.
    keys = host_keys()
    (dest / "etc" / "ssh").mkdir(parents=True, exist_ok=True)
    for key in (keys / "etc" / "ssh").glob("ssh_host_*"):
        shutil.copy2(key, dest / "etc" / "ssh" / key.name)
    return dest


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
