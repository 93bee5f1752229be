"""A pod's first process: run inside fresh mount, UTS and PID namespaces (and the pod's network
namespace), it builds the pod's root file system and execs the pod's command in it, as a
container runtime would. Argument: the path of a JSON spec written by `tests.launch.pods`.

Root: an overlay of the image layer over this machine's root (upper layer in memory, so
nothing the pod writes reaches the machine), then /proc, /sys, a /dev with only the devices
the pod was given, tmpfs /tmp and /run, and the pod's volumes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def sh(*args: str) -> None:
    subprocess.run(args, check=True)


def mount_dev(root: str, devices: list[str]) -> None:
    """A /dev like a container's: the null-type nodes of the machine, a private pts, and the
    device files the device plugins gave the pod (empty files: they are only counted)."""
    dev = f"{root}/dev"
    sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", dev)
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        open(f"{dev}/{node}", "w").close()
        sh("mount", "--bind", f"/dev/{node}", f"{dev}/{node}")
    os.makedirs(f"{dev}/pts")
    sh("mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666", "devpts", f"{dev}/pts")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")
    os.makedirs(f"{dev}/shm")
    sh("mount", "-t", "tmpfs", "tmpfs", f"{dev}/shm")
    for path in devices:
        os.makedirs(os.path.dirname(f"{root}{path}"), exist_ok=True)
        open(f"{root}{path}", "w").close()


def mount_secret(root: str, path: str, files: dict[str, list]) -> None:
    """A Secret volume as the kubelet makes it: a tmpfs (mode 1777, tmpfs's default), the files
    in a timestamped directory behind `..data` symlinks, each with the volume's mode, and the
    whole mount read-only."""
    target = f"{root}{path}"
    os.makedirs(target, exist_ok=True)
    sh("mount", "-t", "tmpfs", "tmpfs", target)
    data = f"{target}/..2026_01_01_00_00_00.000000000"
    os.makedirs(data)
    for name, (content, mode) in files.items():
        with open(f"{data}/{name}", "w") as f:
            f.write(content)
        os.chmod(f"{data}/{name}", mode)
    os.symlink(os.path.basename(data), f"{target}/..data")
    for name in files:
        os.symlink(f"..data/{name}", f"{target}/{name}")
    sh("mount", "-o", "remount,ro,bind", target)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    base = spec["base"]
    sh("mount", "--make-rprivate", "/")
    os.makedirs(f"{base}/mem", exist_ok=True)
    sh("mount", "-t", "tmpfs", "tmpfs", f"{base}/mem")
    upper, work, root = f"{base}/mem/upper", f"{base}/mem/work", f"{base}/root"
    for d in (upper, work, root):
        os.makedirs(d, exist_ok=True)
    # The image layers are copied into the pod's memory first: overlayfs refuses a lower layer
    # that lies inside another one (here the machine's root), and a copy is cheap (few files).
    layers = []
    for i, layer in enumerate(spec["layers"]):
        sh("cp", "-a", layer, f"{base}/mem/layer{i}")
        layers.append(f"{base}/mem/layer{i}")
    lower = ":".join([*layers, "/"])
    sh("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}", root)
    sh("mount", "-t", "proc", "proc", f"{root}/proc")
    sh("mount", "--rbind", "/sys", f"{root}/sys")
    mount_dev(root, spec["devices"])
    for d in ("/tmp", "/run"):
        sh("mount", "-t", "tmpfs", "tmpfs", f"{root}{d}")
    for m in spec["binds"]:
        target = f"{root}{m['target']}"
        if os.path.isdir(m["source"]):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.exists(target):
                open(target, "w").close()
        sh("mount", "--bind", m["source"], target)
        if m.get("readOnly"):
            sh("mount", "-o", "remount,ro,bind", target)
    for s in spec["secrets"]:
        mount_secret(root, s["path"], s["files"])
    sh("hostname", spec["hostname"])
    os.chroot(root)
    os.chdir(spec.get("workingDir") or "/")
    os.execvpe(spec["command"][0], spec["command"], spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
