"""A Deployment's rolling update behind its load balancer, on the harness's clock (serving.PROBE_SCALE),
as the controllers and the kubelet of the cluster's Kubernetes (1.34: kubernetes/kubernetes
v1.34.0) play it, and the internal NLB's target group (standins/nlb.py) as the AWS Load Balancer
Controller keeps it:

- the Deployment controller (pkg/controller/deployment/rolling.go, reconcileNewReplicaSet and
  reconcileOldReplicaSets; pkg/controller/deployment/util/deployment_util.go ResolveFenceposts:
  maxSurge rounds up, maxUnavailable down): new pods while old + new stay within replicas +
  maxSurge; an old pod deleted only while the available pods stay at least replicas -
  maxUnavailable; a new pod counts once its readiness probe passes and, under the controller's
  readiness gate (aws-load-balancer-controller v3.5.0 docs/deploy/pod_readiness_gate.md), once
  its target is registered;
- a pod's deletion (kubernetes.io docs "Termination of Pods", pkg/kubelet/kuberuntime
  killContainer): its endpoint leaves the Service at once (EndpointSlice `ready: false`), the
  load balancer controller deregisters its target (draining for the target group's
  `deregistration_delay.timeout_seconds`, from the Service's annotation), the kubelet runs the
  preStop hook (a `sleep`), then SIGTERM, and SIGKILL once terminationGracePeriodSeconds have
  passed since the deletion;
- a draining target still gets new connections until its delay ends: the conservative reading
  the preStop is sized against (ELB says it stops sending to a deregistering target, but users of
  the controller saw a pod whose target was draining with a 5 s delay get requests for about two
  minutes: github.com/kubernetes-sigs/aws-load-balancer-controller/issues/3270).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.launch import plans
from tests.launch.netpolicy import Peer
from tests.launch.pods import Cluster, Pod, PodSpec, wait_until
from tests.launch.serving import PROBE_SCALE, Deployment

DEREGISTRATION = "deregistration_delay.timeout_seconds"
TARGET_GROUP_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
ELB_DEFAULT_DELAY = 300
"""A target group's deregistration delay when the Service sets none (ELB's default)."""
KUBELET_GRACE_EXTENSION = 2
"""The least seconds the kubelet leaves between SIGTERM and SIGKILL (minimumGracePeriodInSeconds)."""
STANDINS = Path(__file__).with_name("standins")


def deregistration_delay(service: dict[str, Any]) -> int:
    """The target group's deregistration delay the Service's annotation sets (else ELB's 300 s)."""
    attributes = service["metadata"].get("annotations", {}).get(TARGET_GROUP_ATTRIBUTES, "")
    pairs = dict(kv.split("=", 1) for kv in attributes.split(",") if "=" in kv)
    return int(pairs.get(DEREGISTRATION, ELB_DEFAULT_DELAY))


@dataclass
class TargetGroup:
    """The NLB's targets: healthy ones, and draining ones until their delay ends; written where
    the NLB stand-in reads them."""

    path: Path
    delay: float  # on the harness's clock
    healthy: dict[str, tuple[str, int]] = field(default_factory=dict)
    draining: dict[str, tuple[tuple[str, int], float]] = field(default_factory=dict)

    def register(self, name: str, address: str, port: int) -> None:
        self.healthy[name] = (address, port)
        self.write()

    def deregister(self, name: str) -> None:
        if name in self.healthy:
            self.draining[name] = (self.healthy.pop(name), time.monotonic() + self.delay)
            self.write()

    def tick(self) -> None:
        """Targets whose deregistration delay has passed are gone."""
        done = [n for n, (_, until) in self.draining.items() if time.monotonic() >= until]
        for name in done:
            del self.draining[name]
        if done:
            self.write()

    def write(self) -> None:
        routed = [*self.healthy.values(), *(t for t, _ in self.draining.values())]
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps({"targets": routed}))
        partial.rename(self.path)  # the NLB reads the old group or the new, whole


def first_process(pod: Pod) -> int:
    """The pid (on this machine) of the pod's first process: PID 1 of its PID namespace."""
    pids = [pod.process.pid]
    while pids:
        pid = pids.pop(0)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if len(nspid) > 1 and nspid[-1] == "1":
            return pid
        pids += [int(c) for c in children]
    raise LookupError(f"{pod.spec.name}: no first process")


@dataclass
class Terminating:
    """A deleted pod, on its way out as the kubelet stops it."""

    pod: Pod
    deleted: float
    pre_stop: float  # harness seconds
    grace: float
    events: list[str] = field(default_factory=list)

    def step(self, cluster: Cluster) -> bool:
        """Advance; True once the pod is gone."""
        since = time.monotonic() - self.deleted
        if not self.events and since >= min(self.pre_stop, self.grace):
            self.events.append("SIGTERM")  # the hook has returned (or the grace ran out)
            with contextlib.suppress(LookupError, ProcessLookupError):
                os.kill(first_process(self.pod), signal.SIGTERM)
        if not self.pod.alive():
            self.events.append(f"exited {self.pod.process.returncode}")
            cluster.remove(self.pod.spec.name)
            return True
        # killContainer: what is left of the grace after the hook, but at least 2 s after SIGTERM.
        limit = max(self.grace, min(self.pre_stop, self.grace) + KUBELET_GRACE_EXTENSION * PROBE_SCALE)
        if since >= limit:
            self.events.append("SIGKILL")
            cluster.remove(self.pod.spec.name)
            return True
        return False


@dataclass
class Rollout:
    """One rolling update of a Deployment whose pods run (`old`), to its template in `after`."""

    deployment: Deployment  # its `obj` the Deployment after the update
    old: list[Pod]
    before: dict[str, Any]  # the Deployment the old pods were made from (their preStop, their grace)
    lb: TargetGroup | None
    port: int
    scale: float = PROBE_SCALE
    new: list[Pod] = field(default_factory=list)
    available: set[str] = field(default_factory=set)
    probing: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    terminating: list[Terminating] = field(default_factory=list)
    gone: dict[str, list[str]] = field(default_factory=dict)
    """Each deleted pod's termination: SIGTERM, then `exited <code>` or SIGKILL."""

    def bounds(self) -> tuple[int, int, int]:
        """replicas, maxSurge, maxUnavailable (percentages resolved as the controller does)."""
        spec = self.deployment.obj["spec"]
        replicas = int(spec.get("replicas", 1))
        rolling = spec.get("strategy", {}).get("rollingUpdate", {})

        def resolve(key: str, up: bool) -> int:
            value = rolling.get(key, "25%")
            if isinstance(value, str) and value.endswith("%"):
                share = replicas * int(value[:-1]) / 100
                return math.ceil(share) if up else math.floor(share)
            return int(value)

        surge, unavailable = resolve("maxSurge", True), resolve("maxUnavailable", False)
        return replicas, surge, unavailable or (0 if surge else 1)

    def admit(self, pod: Pod) -> None:
        """A pod whose readiness probe passed: its target registered (the readiness gate), then ready."""
        if self.lb is not None:
            self.lb.register(pod.spec.name, pod.address, self.port)
        self.deployment.cluster.set_ready(pod.spec.name, True)
        self.available.add(pod.spec.name)

    def delete(self, pod: Pod) -> None:
        """The pod's deletion: out of the Service and the target group at once, then the kubelet."""
        obj = self.deployment.obj if pod in self.new else self.before
        template = plans.pod_spec(obj)
        hook = plans.containers(obj).get("lifecycle", {}).get("preStop", {})
        pre_stop = float(hook.get("sleep", {}).get("seconds", 0)) * self.scale
        grace = float(template.get("terminationGracePeriodSeconds", 30)) * self.scale
        self.deployment.cluster.set_ready(pod.spec.name, False)
        if self.lb is not None:
            self.lb.deregister(pod.spec.name)
        self.available.discard(pod.spec.name)
        self.terminating.append(Terminating(pod, time.monotonic(), pre_stop, grace))

    def run(self, timeout: float = 120) -> None:
        """Until every old pod is gone and every new one available (else AssertionError)."""
        replicas, surge, unavailable = self.bounds()
        self.available |= {p.spec.name for p in self.old}
        deadline = time.monotonic() + timeout
        while self.old or len(self.available) < replicas or self.terminating:
            assert time.monotonic() < deadline, f"rollout stuck: {self.__dict__}"
            if len(self.old) + len(self.new) < replicas + surge:
                pod = self.deployment.replica(f"r{len(self.new)}")
                self.new.append(pod)
                self.probing[pod.spec.name] = self.deployment.prober(pod, self.scale)
            elif self.old and len(self.available) > replicas - unavailable:
                pod = next((p for p in self.old if p.spec.name not in self.available), self.old[0])
                self.old.remove(pod)
                self.delete(pod)
            self.tick()
            time.sleep(0.01)

    def tick(self) -> None:
        for name, prober in list(self.probing.items()):
            if prober.poll() is not None:
                del self.probing[name]
                assert prober.returncode == 0, f"{name} never got ready: {prober.communicate()[0]}"
                self.admit(next(p for p in self.new if p.spec.name == name))
        for t in list(self.terminating):
            if t.step(self.deployment.cluster):
                self.terminating.remove(t)
                self.gone[t.pod.spec.name] = t.events
        if self.lb is not None:
            self.lb.tick()


def start_nlb(
    cluster: Cluster, service: dict[str, Any], target_port: int, scale: float = PROBE_SCALE
) -> tuple[Pod, TargetGroup]:
    """The Service's NLB (outside the cluster's policies: its own address, no Peer) and its
    target group, empty; the delay from the Service's annotation on the harness's clock."""
    folder = cluster.workdir / f"nlb-{service['metadata']['name']}"
    folder.mkdir(exist_ok=True)
    group = TargetGroup(folder / "targets.json", deregistration_delay(service) * scale)
    group.write()
    (port,) = service["spec"]["ports"]
    name = f"nlb-{service['metadata']['name']}"
    command = [sys.executable, "-S", str(STANDINS / "nlb.py"), str(port["port"]), "/nlb/targets.json"]
    pod = cluster.start(PodSpec(name, [], [], {}, command, binds=[{"source": str(folder), "target": "/nlb"}]))
    assert wait_until(lambda: "listening" in pod.output(), timeout=10), pod.output()
    return pod, group


def start_caller(
    cluster: Cluster, name: str, url: str, model: str, peer: Peer | None = None, interval: float = 0.02
) -> Pod:
    """A client that calls `url` without pause, one line per request (standins/request_loop.py);
    with `peer`, a pod of the cluster under its namespaces' policies, else outside them (in the VPC)."""
    command = [sys.executable, "-S", str(STANDINS / "request_loop.py"), url, model, str(interval)]
    spec = PodSpec(name, [], [], {}, command)
    spec.peer = peer
    pod = cluster.start(spec)
    assert wait_until(lambda: "started" in pod.output(), timeout=10), pod.output()
    return pod


def outcomes(pod: Pod) -> tuple[int, list[str]]:
    """The caller's answered requests and its lost ones (complete lines only)."""
    lines = [line for line in pod.output().split("\n")[:-1] if line.startswith(("ok", "lost"))]
    return sum(1 for line in lines if line.startswith("ok")), [line for line in lines if line.startswith("lost")]
