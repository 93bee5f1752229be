"""A pod's first process: run inside fresh mount, UTS and PID namespaces (and the pod's network
namespace), it builds the pod's root file system and execs the pod's command in it, as a
container runtime would. Argument: the path of a JSON spec written by `tests.launch.pods`.

Root: an overlay of the image layer over this machine's root (upper layer in memory, so
nothing the pod writes reaches the machine), then /proc, /sys, a /dev with only the devices
the pod was given, tmpfs /tmp and /run, and the pod's volumes. The command starts with the
container's open-files limit and capability set (the spec's `rlimits` and `capabilities`).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import shutil
import socket
import stat
import struct
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
RDONLY, REMOUNT, BIND, REC, PRIVATE = 1, 32, 4096, 16384, 1 << 18  # mount(2) flags


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    """mount(2), without a process per mount."""
    args = [None if v is None else v.encode() for v in (source, target, fstype)]
    if LIBC.mount(*args, ctypes.c_ulong(flags), None if data is None else data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def bind(source: str, target: str, read_only: bool = False) -> None:
    mount(source, target, flags=BIND)
    if read_only:
        mount(None, target, flags=REMOUNT | BIND | RDONLY)


def mount_sysfs_class(root: str, files: dict[str, str]) -> None:
    """/sys/class as this machine has it, plus the given driver files (a Neuron device's
    UltraServer ids): a tmpfs over the pod's /sys/class, each machine class bound back in."""
    mount("tmpfs", f"{root}/sys/class", "tmpfs", data="mode=755")
    for name in os.listdir("/sys/class"):
        os.makedirs(f"{root}/sys/class/{name}")
        bind(f"/sys/class/{name}", f"{root}/sys/class/{name}")
    for path, text in files.items():
        os.makedirs(os.path.dirname(f"{root}{path}"), exist_ok=True)
        with open(f"{root}{path}", "w") as f:
            f.write(text + "\n")


def mount_dev(root: str, devices: list[str]) -> None:
    """A /dev like a container's: the null-type nodes of the machine, a private pts, and the
    device files the device plugins gave the pod (empty files: they are only counted)."""
    dev = f"{root}/dev"
    mount("tmpfs", dev, "tmpfs", data="mode=755")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        open(f"{dev}/{node}", "w").close()
        bind(f"/dev/{node}", f"{dev}/{node}")
    os.makedirs(f"{dev}/pts")
    mount("devpts", f"{dev}/pts", "devpts", data="newinstance,ptmxmode=0666")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")
    os.makedirs(f"{dev}/shm")
    mount("tmpfs", f"{dev}/shm", "tmpfs")
    for path in devices:
        os.makedirs(os.path.dirname(f"{root}{path}"), exist_ok=True)
        open(f"{root}{path}", "w").close()


def mount_home(root: str, traversable: bool) -> None:
    """The image's /root, not this machine's: only the shell start-up files Debian's base-files
    gives root (the pod's sshd sessions run them), then the Secret mounted into it. Mode 0700 as
    in the images, or 0711 when this machine's Python (which stands in for the image's, in
    /usr/local there) lives under /root and a non-root process must reach it."""
    mount("tmpfs", f"{root}/root", "tmpfs", data="mode=711" if traversable else "mode=700")
    for name in ("bashrc", "profile"):
        if os.path.exists(f"/usr/share/base-files/dot.{name}"):
            shutil.copy(f"/usr/share/base-files/dot.{name}", f"{root}/root/.{name}")


def mount_secret(root: str, path: str, files: dict[str, list]) -> None:
    """A Secret volume as the kubelet makes it: a tmpfs (mode 1777, tmpfs's default), the files
    in a timestamped directory behind `..data` symlinks, each with the volume's mode, and the
    whole mount read-only."""
    target = f"{root}{path}"
    os.makedirs(target, exist_ok=True)
    mount("tmpfs", target, "tmpfs")
    data = f"{target}/..2026_01_01_00_00_00.000000000"
    os.makedirs(data)
    for name, (content, mode) in files.items():
        with open(f"{data}/{name}", "w") as f:
            f.write(content)
        os.chmod(f"{data}/{name}", mode)
    os.symlink(os.path.basename(data), f"{target}/..data")
    for name in files:
        os.symlink(f"..data/{name}", f"{target}/{name}")
    mount(None, target, flags=REMOUNT | BIND | RDONLY)


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def nofile_raises_succeed() -> None:
    """Where this machine cannot give a pod a container's hard open-files limit (no
    CAP_SYS_RESOURCE here), a `ulimit -n N` that a node would allow (N up to that limit) must
    not fail either: a seccomp filter makes setrlimit/prlimit64 of RLIMIT_NOFILE with a new
    value return success without changing anything (x86_64 only). Inherited by every process
    of the pod."""
    if platform.machine() != "x86_64":
        return
    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, ok = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | 0
    setrlimit, prlimit64, nofile = 160, 302, 7
    prog = [
        _bpf(ld, 4), _bpf(jeq, 0xC000003E, 0, 12),  # 0-1: arch x86_64, else allow
        _bpf(ld, 0), _bpf(jeq, setrlimit, 0, 2),  # 2-3: setrlimit(resource, new)
        _bpf(ld, 16), _bpf(jeq, nofile, 7, 8),  # 4-5: resource NOFILE: succeed, else allow
        _bpf(jeq, prlimit64, 0, 7),  # 6: prlimit64(pid, resource, new, old)
        _bpf(ld, 24), _bpf(jeq, nofile, 0, 5),  # 7-8: resource NOFILE
        _bpf(ld, 32), _bpf(jeq, 0, 0, 2),  # 9-10: new value (pointer not NULL): succeed
        _bpf(ld, 36), _bpf(jeq, 0, 1, 0),  # 11-12
        _bpf(ret, ok), _bpf(ret, allow),  # 13, 14
    ]  # fmt: skip
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
    if LIBC.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "seccomp filter")


def set_nofile(soft: int, hard: int) -> None:
    """The container's open-files limit, or the most this machine allows (see above)."""
    machine_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, machine_hard), machine_hard))
        nofile_raises_succeed()


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    # The pod's addresses are in 127.0.0.0/8: let them be routed through eth0 (this process is
    # in the pod's network namespace, whose /proc/sys/net this is).
    for iface in ("all", "eth0"):
        with open(f"/proc/sys/net/ipv4/conf/{iface}/route_localnet", "w") as f:
            f.write("1")
    base = spec["base"]
    mount(None, "/", flags=REC | PRIVATE)
    os.makedirs(f"{base}/mem", exist_ok=True)
    mount("tmpfs", f"{base}/mem", "tmpfs")
    upper, work, root = f"{base}/mem/upper", f"{base}/mem/work", f"{base}/root"
    for d in (upper, work, root):
        os.makedirs(d, exist_ok=True)
    # The image layers are copied into the pod's memory first: overlayfs refuses a lower layer
    # that lies inside another one (here the machine's root), and a copy is cheap (few files).
    layers = []
    for i, layer in enumerate(spec["layers"]):
        shutil.copytree(layer, f"{base}/mem/layer{i}", symlinks=True, copy_function=copy_entry)
        layers.append(f"{base}/mem/layer{i}")
    lower = ":".join([*layers, "/"])
    mount("overlay", root, "overlay", data=f"lowerdir={lower},upperdir={upper},workdir={work}")
    mount("proc", f"{root}/proc", "proc")
    mount("/sys", f"{root}/sys", flags=BIND | REC)
    if spec.get("sysfs"):
        mount_sysfs_class(root, spec["sysfs"])
    mount_node_files(root, spec["nodeFiles"])
    mount_dev(root, spec["devices"])
    for d in ("/tmp", "/run"):  # the image's (empty) directories: this machine's stay hidden
        mount("tmpfs", f"{root}{d}", "tmpfs")
    mount_home(root, spec["user"][0] != 0 and sys.base_prefix.startswith("/root/"))
    mount_volumes(root, spec["binds"])
    for s in spec["secrets"]:
        mount_secret(root, s["path"], s["files"])
    if spec["readOnlyRoot"]:  # the image's file system, not the volumes mounted on it
        volumes = {m["target"] for m in spec["binds"]}
        for d in ("", "/tmp", "/run", "/root"):
            if d not in volumes:  # a volume at /tmp (an emptyDir) stays as mounted
                mount(None, f"{root}{d}", flags=REMOUNT | BIND | RDONLY)
    socket.sethostname(spec["hostname"])
    setpriv = shutil.which("setpriv")
    os.chroot(root)
    # As runc does in the jail, as root, before the process starts (opencontainers/runc
    # libcontainer/rootfs_linux.go prepareRootfs: os.MkdirAll(cwd, 0o755)): a missing
    # workingDir is created, not an error.
    workdir = spec.get("workingDir") or "/"
    os.makedirs(workdir, mode=0o755, exist_ok=True)
    os.chdir(workdir)
    set_nofile(*spec["nofile"])
    command = [str(setpriv), *identity(spec), "--", *spec["command"]]
    os.execvpe(command[0], command, spec["env"])


def copy_entry(source: str, target: str) -> None:
    """A layer's file, or its whiteout (a 0/0 character device: overlayfs hides the file of that
    name in the layers below, as a deleted file of an image layer)."""
    st = os.lstat(source)
    if stat.S_ISCHR(st.st_mode):
        os.mknod(target, st.st_mode, st.st_rdev)
    else:
        shutil.copy2(source, target)


def mount_node_files(root: str, files: dict[str, str]) -> None:
    """What the pod's node shows of its kernel modules: /sys/module/<module>/version of the
    drivers its AMI carries (a read-only tmpfs over /sys/module; this machine's are not the node's)."""
    if not files:
        return
    mount("tmpfs", f"{root}/sys/module", "tmpfs", data="mode=755")
    for path, text in files.items():
        os.makedirs(os.path.dirname(f"{root}{path}"), exist_ok=True)
        with open(f"{root}{path}", "w") as f:
            f.write(text)
    mount(None, f"{root}/sys/module", flags=REMOUNT | BIND | RDONLY)


def mount_volumes(root: str, mounts: list[dict]) -> None:
    """Bind mounts (volumes, the cluster's files) and emptyDirs (`tmpfs`: the directory's mode)."""
    for m in mounts:
        target = f"{root}{m['target']}"
        if "secret" in m:
            mount_secret(root, m["target"], m["secret"])
            continue
        if "tmpfs" in m or os.path.isdir(m["source"]):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.exists(target):
                open(target, "w").close()
        if "tmpfs" in m:
            mount("tmpfs", target, "tmpfs", data=f"mode={m['tmpfs']}")
            if m.get("readOnly"):
                mount(None, target, flags=REMOUNT | BIND | RDONLY)
        else:
            bind(m["source"], target, bool(m.get("readOnly")))


def identity(spec: dict) -> list[str]:
    """setpriv's options: the container's capability set (bounding and inheritable; a non-root
    user keeps none across exec), its user and groups, no_new_privs."""
    caps = ",".join(["-all", *(f"+{c.lower().removeprefix('cap_')}" for c in spec["capabilities"])])
    uid, gid, groups = spec["user"]
    options = ["--inh-caps", caps, "--bounding-set", caps]
    if uid != 0 or gid != 0 or groups:
        options += [f"--reuid={uid}", f"--regid={gid}"]
        options += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    if spec["noNewPrivs"]:
        options.append("--no-new-privs")
    return options


if __name__ == "__main__":
    main(sys.argv[1])
