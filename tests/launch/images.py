"""The "image" of a pod: which binaries and libraries exist where, and the environment (ENV)
through which a process finds them. Binaries are the stand-ins of `standins/`; python and
torchrun are this machine's PyTorch (CPU), behind wrappers at the image's path.

The environment comes from the repository's Dockerfile (`images/<name>/Dockerfile`, its ENV
lines) when there is one, else from a fallback description that names its source. Where the
files go comes from the image's family (Neuron or NVIDIA). A binary that the image puts
outside the default PATH is reachable only through the image's ENV PATH, so a process that
does not get that environment (a rank that mpirun starts over ssh without `-x PATH`) does not
find it, as on EKS.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANDINS = Path(__file__).with_name("standins")
# The PATH a build starts with when no base image sets one (moby/buildkit, llbutil DefaultPathEnv).
DOCKER_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# ENV that configures the MPI installation itself, not the job: this machine's Open MPI is
# Debian's, in /usr, so an image's OPAL_PREFIX=/opt/amazon/openmpi would break it.
NOT_MODELLED_ENV = {"OPAL_PREFIX", "PMIX_MCA_gds"}


@dataclass(frozen=True)
class Family:
    """Where an image family puts what the rendered commands run, and which framework's
    checkpoint and resume rules its training script follows."""

    framework: str
    python_bin: str
    binaries: dict[str, str]  # stand-in name -> absolute path in the image
    libraries: dict[str, str] = field(default_factory=dict)  # soname -> directory


NEURON = Family(
    framework="neuronx-nemo-megatron",
    python_bin="/usr/local/bin",
    binaries={
        # nccom-test ships in aws-neuronx-tools under /opt/aws/neuron/bin (Neuron docs, nccom-test).
        "nccom-test": "/opt/aws/neuron/bin/nccom-test",
        # neuron_parallel_compile is a console script of the torch-neuronx wheel (python's bin).
        "neuron_parallel_compile": "/usr/local/bin/neuron_parallel_compile",
    },
)
NVIDIA = Family(
    framework="nemo",
    python_bin="/usr/local/bin",
    binaries={
        "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf",
        # The NVIDIA container runtime mounts the driver's nvidia-smi into /usr/bin.
        "nvidia-smi": "/usr/bin/nvidia-smi",
    },
    # aws-ofi-nccl (the NCCL net plugin NCCL dlopens as libnccl-net.so) and NCCL as
    # awsome-distributed-training's nccl-tests.Dockerfile installs them.
    libraries={"libnccl-net.so": "/opt/aws-ofi-nccl/install/lib", "libnccl.so": "/opt/nccl/build/lib"},
)
FAMILIES = {
    "neuronx-nemo-megatron": NEURON,
    "bert-neuronx": NEURON,
    "pytorch-training-neuronx": NEURON,
    "nemo": NVIDIA,
    "nccl-tests": NVIDIA,
}

# ENV of images that have no Dockerfile in this repository yet, each with its source.
FALLBACK_DOCKERFILES = {
    # Data on EKS's Neuron Dockerfiles and the Neuron DLCs add the Neuron tools to PATH.
    "neuron": "ENV PATH /opt/aws/neuron/bin:$PATH\n",
    # aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/nccl-tests.Dockerfile
    # at 7988de6df1a319c47e2c927cc97fa285ea5a1d56 (its ENV lines, in order).
    "nccl-tests": (
        "ENV OPAL_PREFIX=\n"
        "ENV LD_LIBRARY_PATH /usr/local/cuda/extras/CUPTI/lib64:/opt/amazon/openmpi/lib:/opt/nccl/build/lib:"
        "/opt/amazon/efa/lib:/opt/aws-ofi-nccl/install/lib:/usr/local/lib:$LD_LIBRARY_PATH\n"
        "ENV PATH /opt/amazon/openmpi/bin/:/opt/amazon/efa/bin:/usr/bin:/usr/local/bin:$PATH\n"
        "ENV LD_LIBRARY_PATH /opt/gdrcopy/lib:$LD_LIBRARY_PATH\n"
        "ENV PATH /opt/gdrcopy/bin:$PATH\n"
        "ENV OMPI_MCA_pml=^cm,ucx OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_exclude=lo,docker0,veth_def_agent"
        " OPAL_PREFIX=/opt/amazon/openmpi NCCL_SOCKET_IFNAME=^docker,lo,veth_def_agent,eth\n"
        "ENV PMIX_MCA_gds=hash\n"
        "ENV LD_PRELOAD /opt/nccl/build/lib/libnccl.so\n"
    ),
    # NGC NeMo 24.07 has neither EFA nor aws-ofi-nccl (FACTS.md); the harness models no ENV.
    "nemo": "",
}


def _substitute(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def parse_env(dockerfile: str) -> dict[str, str]:
    """The environment a Dockerfile's ENV instructions leave, in order, with `$VAR`/`${VAR}`
    substituted from the ones before (PATH starts as Docker's default)."""
    env = {"PATH": DOCKER_DEFAULT_PATH}
    text = re.sub(r"\\\n", " ", dockerfile)
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
    """One image: its name, family, environment, and where that environment came from."""

    reference: str
    name: str
    family: Family
    env: dict[str, str]
    source: str


def describe(reference: str) -> Image:
    """The image of a reference like `<registry>/<path>/<name>:<tag>`: its Dockerfile in
    images/<name>/ when the repository has one, else the fallback description."""
    name = reference.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    if name not in FAMILIES:
        raise KeyError(f"no image description for {reference!r}: add images/{name}/Dockerfile and its family")
    family = FAMILIES[name]
    dockerfile = ROOT / "images" / name / "Dockerfile"
    if dockerfile.exists():
        return Image(reference, name, family, parse_env(dockerfile.read_text()), str(dockerfile.relative_to(ROOT)))
    fallback = FALLBACK_DOCKERFILES.get(name, FALLBACK_DOCKERFILES["neuron"] if family is NEURON else "")
    return Image(reference, name, family, parse_env(fallback), f"fallback description of {name}")


def _write(path: Path, text: str, mode: int = 0o755) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def code_shim(standin: str) -> str:
    """A script file that runs a stand-in of `standins/` in its place (same argv)."""
    return (
        f"import runpy, sys\nsys.path.insert(0, {str(STANDINS)!r})\n"
        f"runpy.run_path({str(STANDINS / standin)!r}, run_name='__main__')\n"
    )


def build_layer(image: Image, dest: Path, code: dict[str, str]) -> Path:
    """The image's layer: stand-ins at the family's paths, python/torchrun wrappers, the
    libraries, code stand-ins (`code`: path in the image -> stand-in file), and the image's own
    SSH host keys in place of this machine's."""
    venv_bin = Path(sys.executable).parent
    fam = image.family
    for tool in ("python", "python3", "torchrun"):
        _write(dest / fam.python_bin.lstrip("/") / tool, f'#!/bin/sh\nexec {venv_bin / tool} "$@"\n')
    for standin, path in fam.binaries.items():
        runner = f'#!/bin/sh\nexec {venv_bin / "python"} {STANDINS / (standin.replace("-", "") + ".py")} "$@"\n'
        _write(dest / path.lstrip("/"), runner)
    real_lib = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()  # any loadable library
    for soname, directory in fam.libraries.items():
        target = dest / directory.lstrip("/") / soname
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real_lib, target)
    for path, standin in code.items():
        _write(dest / path.lstrip("/"), code_shim(standin))
    # SSH host keys of the image, made once per cluster (an image built with openssh-server has
    # its own; `ssh-keygen -A` in the worker's command then finds them and makes none).
    keys = host_keys(dest.parent / "ssh-host-keys")
    (dest / "etc" / "ssh").mkdir(parents=True, exist_ok=True)
    for key in (keys / "etc" / "ssh").glob("ssh_host_*"):
        shutil.copy2(key, dest / "etc" / "ssh" / key.name)
    return dest


def host_keys(prefix: Path) -> Path:
    if not (prefix / "etc" / "ssh").exists():
        (prefix / "etc" / "ssh").mkdir(parents=True)
        subprocess.run(["ssh-keygen", "-A", "-f", str(prefix)], check=True, capture_output=True)
    return prefix
