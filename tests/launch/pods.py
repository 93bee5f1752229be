"""Pods on this machine: each its own network, UTS, mount and PID namespace, joined by a
bridge in a switch namespace of their own cluster (so the machine's own network is never
touched), on addresses of the loopback range 127.0.0.0/8.

A `Cluster` also plays the cluster DNS: one hosts file, bind-mounted read-only as every pod's
/etc/hosts, that lists the pods that are running (a headless Service publishes ready pods
only), so a deleted worker stops resolving and a recreated one resolves again; and the
internet: a host outside the pods' range (tests/launch/internet.py) that a pod reaches only
where its NetworkPolicies allow (PodSpec.internet).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests import upstream
from tests.conftest import ROOT
from tests.launch import internet
from tests.launch.netpolicy import Peer, ports_allowed
from tests.launch.security import Security

PODINIT = Path(__file__).with_name("podinit.py")
LIBC = ctypes.CDLL(None, use_errno=True)
# What containerd gives a container on an EKS AL2023 node: its open-files limit and capabilities.
RUNTIME = upstream.facts("amazon-eks-ami-base-runtime-spec")
# Directories a pod gets fresh (podinit.py): this machine's files under them are not visible.
POD_OWN_DIRS = ("/tmp/", "/run/", "/dev/", "/root/")
SUBNET = "127.10.0"  # inside the loopback range; routed across veths with route_localnet=1
LO = ("link set lo up", "addr del 127.0.0.1/8 dev lo", "addr add 127.0.0.1/32 dev lo")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def batch(netns: str | None, *commands: str) -> None:
    """Several `ip` commands in one process (in `netns` when given)."""
    where = ["-n", netns] if netns else []
    subprocess.run(["ip", *where, "-batch", "-"], input="\n".join(commands), text=True, check=True, capture_output=True)


def namespaces_available() -> str | None:
    """None when this machine lets us create the namespaces the harness needs, else why not."""
    missing = [tool for tool in ("ip", "unshare", "mpirun", "sshd") if not shutil.which(tool)]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install iproute2 util-linux openmpi-bin openssh-server)"
    if os.geteuid() != 0:
        return "needs root to create network and mount namespaces"
    probe = f"ltprobe{os.getpid()}"
    try:
        ip("netns", "add", probe)
        ip("netns", "del", probe)
    except (subprocess.CalledProcessError, OSError) as e:
        return f"cannot create a network namespace: {e}"
    return None


@dataclass
class PodSpec:
    """What the kubelet would be told: name (the pod's hostname), the DNS names it answers to,
    image layers, environment, command, volumes and device files."""

    name: str
    dns_names: list[str]
    layers: list[str]
    env: dict[str, str]
    command: list[str]
    binds: list[dict[str, object]] = field(default_factory=list)
    secrets: list[dict[str, object]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    sysfs: dict[str, str] = field(default_factory=dict)
    """Files under /sys/class the node's drivers would show (path -> content)."""
    working_dir: str | None = None
    security: Security | None = None  # None: root with the runtime's default capabilities
    internet: bool = False  # its NetworkPolicies let it reach the internet (netpolicy.reaches_internet)
    node_files: dict[str, str] = field(default_factory=dict)  # what its node shows under /sys/module
    peer: Peer | None = None
    """Its namespace, labels and named ports: set, the namespaces' NetworkPolicies decide per port
    what it may open to every other pod that has one (Cluster.policies)."""


@dataclass
class Pod:
    spec: PodSpec
    netns: str
    address: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the pod's PID namespace (everything in it) goes with its first process."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Cluster:
    """A switch namespace with a bridge, pods plugged into it, a hosts file as its DNS and a
    directory shared by every pod (the FSx volume)."""

    def __init__(self, workdir: Path) -> None:
        self.id = uuid.uuid4().hex[:6]
        sweep_orphans()
        # Network namespaces carry the owner's pid, so a run that was killed is swept by the next.
        self.prefix = f"{OWNED}{os.getpid()}-{self.id}-"
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.switch = f"{self.prefix}sw"
        self.hosts = workdir / "dns-hosts"
        self.hosts.write_text("")
        # No name server: every name a pod resolves comes from the hosts file above.
        self.resolv = workdir / "resolv.conf"
        self.resolv.write_text("options timeout:1 attempts:1\n")
        self.pods: dict[str, Pod] = {}
        self._layers: dict[str, Path] = {}
        self._netns: list[str] = []
        self._slots: dict[str, int] = {}
        self._plugs = 0
        # (a, b): pod a cannot reach pod b (the namespace's NetworkPolicies, tests/launch/netpolicy.py)
        self.denied: set[tuple[str, str]] = set()
        # The NetworkPolicies between pods that carry a Peer, enforced per port (Cluster._connect).
        self.policies: list[dict[str, object]] = []
        self._connected: set[tuple[str, str]] = set()
        # Service DNS names -> the pods behind them; a pod is listed once it is ready.
        self.services: dict[str, list[str]] = {}
        self.ready: set[str] = set()
        # A scenario that sets the MPI need aside: every image keeps this machine's Open MPI in /usr/bin.
        self.mpi_on_sshd_path = False
        ip("netns", "add", self.switch)
        self._netns.append(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        self.internet = self._internet()

    def layer(self, key: str, build: Callable[[Path], Path]) -> Path:
        """An image layer, built once per cluster."""
        if key not in self._layers:
            self._layers[key] = build(self.workdir / "layers" / key)
        return self._layers[key]

    def _slot(self, name: str) -> int:
        """A stable address per pod name: a recreated pod answers at the same name."""
        return self._slots.setdefault(name, len(self._slots) + 2)

    def _veth(self, netns: str) -> None:
        """A new network namespace with eth0 on the bridge."""
        self._plugs += 1  # veth names are never reused: a deleted one goes away asynchronously
        veth = f"lt{self.id}v{self._plugs}"
        if netns in self._netns:
            ip("netns", "del", netns)
            self._netns.remove(netns)
        ip("netns", "add", netns)
        self._netns.append(netns)
        batch(None, f"link add {veth} type veth peer name eth0 netns {netns}", f"link set {veth} netns {self.switch}")
        batch(self.switch, f"link set {veth} master br0", f"link set {veth} up")

    def _plug(self, name: str, reaches_internet: bool) -> tuple[str, str]:
        slot = self._slot(name)
        netns, address = f"{self.prefix}p{slot}", f"{SUBNET}.{slot}"
        self._veth(netns)
        # Only 127.0.0.1 is local to the pod, so the rest of 127/8 goes out through eth0
        # (podinit.py lets it: route_localnet); the internet host is on the same link.
        blocked = [f"route add blackhole {SUBNET}.{self._slot(b)}/32" for a, b in sorted(self.denied) if a == name]
        if not reaches_internet:
            blocked.append(f"route add blackhole {internet.ADDRESS}/32")
        batch(
            netns,
            *LO,
            f"addr add {address}/24 dev eth0",
            "link set eth0 up",
            f"route add {internet.NETWORK} dev eth0 src {address}",
            *blocked,
        )
        return netns, address

    def _connect(self, spec: PodSpec, netns: str, address: str) -> None:
        """Policy-routing rules between a new pod and every running pod with a Peer, both ways:
        in the sender's network namespace, packets to the other pod pass only to a port its
        policies allow (or from one the other may open to it: the replies a stateful filter lets
        through); the rest hit a blackhole rule, so the connection fails at once."""
        if spec.peer is None:
            return
        mine = (spec.name, netns, address, spec.peer)
        for pod in list(self.pods.values()):
            if pod.spec.peer is None or pod.spec.name == spec.name or not pod.alive():
                continue
            theirs = (pod.spec.name, pod.netns, pod.address, pod.spec.peer)
            self._rules(mine, theirs)
            self._rules(theirs, mine)

    def _rules(self, a: tuple[str, str, str, Peer], b: tuple[str, str, str, Peer]) -> None:
        if (a[0], b[0]) in self._connected:
            return
        self._connected.add((a[0], b[0]))
        policies = [dict(p) for p in self.policies]
        out, back = ports_allowed(policies, a[3], b[3]), ports_allowed(policies, b[3], a[3])
        if out is None:
            return
        if back is None:
            raise NotImplementedError(f"{b[0]} may open any port of {a[0]}, which may not reach it: not modelled")
        to = f"to {b[2]}/32 ipproto tcp"
        commands = [f"rule add {to} dport {p} lookup main pref 100" for p in sorted(out)]
        commands += [f"rule add {to} sport {p} lookup main pref 100" for p in sorted(back)]
        batch(a[1], *commands, f"rule add to {b[2]}/32 blackhole pref 200")

    def _internet(self) -> subprocess.Popen[bytes]:
        """The stand-in internet host (tests/launch/internet.py) on the bridge, and its server."""
        netns = f"{self.prefix}inet"
        self._veth(netns)
        batch(
            netns,
            *LO,
            f"addr add {internet.ADDRESS}/24 dev eth0",
            "link set eth0 up",
            f"route add {SUBNET}.0/24 dev eth0 src {internet.ADDRESS}",
        )
        for iface in ("all", "eth0"):
            subprocess.run(
                ["ip", "netns", "exec", netns, "sh", "-c", f"echo 1 > /proc/sys/net/ipv4/conf/{iface}/route_localnet"],
                check=True,
            )
        server = internet.start(netns, self.workdir, die_with_parent)
        wait_until(lambda: b"listening" in (self.workdir / "internet.log").read_bytes(), timeout=10)
        return server

    def start(self, spec: PodSpec) -> Pod:
        """Create the pod's namespaces and start its command; publish its DNS names."""
        netns, address = self._plug(spec.name, spec.internet)
        self._connect(spec, netns, address)
        base = self.workdir / "pods" / f"{spec.name}-{uuid.uuid4().hex[:4]}"
        base.mkdir(parents=True)
        log = self.workdir / f"{spec.name}.log"
        if spec.security and spec.security.refused:  # CreateContainerConfigError: nothing runs, no DNS name
            log.write_text(f"Error: {spec.security.refused}\n")
            pod = Pod(spec, netns, address, subprocess.Popen(["sleep", "infinity"], start_new_session=True), log)
            self.pods[spec.name] = pod
            return pod
        # The stand-ins and the Python that runs them, where a pod would not see them (a
        # checkout under /tmp, a pyenv Python under /root).
        paths = (ROOT, Path(sys.prefix), Path(sys.base_prefix).resolve())
        own = {str(p) for p in paths if str(p).startswith(POD_OWN_DIRS)}
        binds = [
            *({"source": p, "target": p, "readOnly": True} for p in sorted(own)),
            {"source": str(self.hosts), "target": "/etc/hosts", "readOnly": True},
            {"source": str(self.resolv), "target": "/etc/resolv.conf", "readOnly": True},
            *spec.binds,
        ]
        # Parents first: a pod's emptyDir at /tmp must not hide a checkout under /tmp mounted before it.
        binds.sort(key=lambda m: len(Path(str(m["target"])).parts))
        env = {**spec.env, "HOSTNAME": spec.name}
        doc = {
            "base": str(base),
            "hostname": spec.name,
            "layers": spec.layers,
            "env": env,
            "command": spec.command,
            "binds": binds,
            "secrets": spec.secrets,
            "devices": spec.devices,
            "sysfs": spec.sysfs,
            "nodeFiles": spec.node_files,
            "workingDir": spec.working_dir,
            "nofile": [RUNTIME["rlimits"]["RLIMIT_NOFILE"]["soft"], RUNTIME["rlimits"]["RLIMIT_NOFILE"]["hard"]],
            **process_identity(spec.security),
        }
        (base / "spec.json").write_text(json.dumps(doc))
        out = log.open("ab")
        unshare = ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child"]
        process = subprocess.Popen(
            ["ip", "netns", "exec", netns, *unshare, sys.executable, str(PODINIT), str(base / "spec.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        out.close()
        pod = Pod(spec, netns, address, process, log)
        self.pods[spec.name] = pod
        self._publish()
        return pod

    def listening(self, name: str, port: int) -> bool:
        """Whether something in the pod listens on `port` (TCP)."""
        pod = self.pods.get(name)
        if not pod or not pod.alive():
            return False
        out = subprocess.run(
            ["ip", "netns", "exec", pod.netns, "ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True
        )
        return bool(out.stdout.strip())

    def set_ready(self, name: str, ready: bool) -> None:
        """The kubelet's readiness of a pod: a Service's DNS name lists ready pods only."""
        (self.ready.add if ready else self.ready.discard)(name)
        self._publish()

    def remove(self, name: str) -> None:
        """Delete a pod: kill everything in it and take its names out of DNS."""
        pod = self.pods.pop(name, None)
        self.ready.discard(name)
        # Its network namespace goes with it; the rules towards its address stay in the others'.
        self._connected = {pair for pair in self._connected if pair[0] != name}
        if pod:
            pod.kill()
            self._publish()

    def _publish(self) -> None:
        lines = ["127.0.0.1 localhost\n", f"{internet.ADDRESS} {' '.join(internet.HOSTS)}\n"]
        running = [p for p in self.pods.values() if p.alive() and not (p.spec.security and p.spec.security.refused)]
        lines += [f"{p.address} {' '.join(p.spec.dns_names)} {p.spec.name}\n" for p in running]
        for service, members in self.services.items():  # a Service's name: its ready pods' addresses
            lines += [f"{self.pods[m].address} {service}\n" for m in members if m in self.ready and m in self.pods]
        # In place: every pod's /etc/hosts is a bind mount of this very file. Overwritten, then
        # cut: a pod resolving meanwhile reads the old lines or the new, never an empty file.
        text = "".join(lines)
        with self.hosts.open("r+") as f:
            if f.read() == text:
                return
            f.seek(0)
            f.write(text)
            f.truncate()

    def close(self) -> None:
        for name in list(self.pods):
            self.remove(name)
        os.killpg(self.internet.pid, signal.SIGKILL)
        self.internet.wait()
        for netns in reversed(self._netns):
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        self._netns.clear()


def process_identity(security: Security | None) -> dict[str, object]:
    """The user, groups and capability set the container's process starts with, whether it may
    gain privileges, and whether the image's file system is read-only. Plus CAP_AUDIT_CONTROL
    for root when this machine's own login uid is set (a `sudo` in a login session): a container
    on a node inherits an unset one from containerd (a systemd service), which lets sshd's
    pam_loginuid set it without that capability."""
    caps = list(security.capabilities if security else RUNTIME["capabilities"])
    uid = security.uid if security else 0
    if uid == 0 and Path("/proc/self/loginuid").read_text().strip() != str(2**32 - 1):
        caps.append("CAP_AUDIT_CONTROL")
    return {
        "capabilities": caps,
        "user": [uid, security.gid if security else 0, list(security.groups) if security else []],
        "noNewPrivs": bool(security and security.no_new_privs),
        "readOnlyRoot": bool(security and security.read_only_root),
    }


OWNED = "ltp"


def die_with_parent() -> None:
    """The pod's first process gets SIGKILL when the test process dies (a killed test run), and
    with it, through `unshare --kill-child`, the pod's PID namespace."""
    if LIBC.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def sweep_orphans() -> None:
    """Delete the network namespaces of harness processes that are gone (killed before close())."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.startswith(OWNED)):
        owner = name[len(OWNED) :].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
