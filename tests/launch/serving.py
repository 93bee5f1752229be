"""A serving workload of an example stack on a local cluster (tests/launch/README.md, "Serving"):
the training run it serves first where it serves one (its own pipeline, as the launch chain plays
it), then its Jobs in order (image check, directories, the Hub staging or the conversion), then
its Deployment: the replicas the plan renders started as pods, probed as the kubelet probes them
(prober.py: the rendered startup and readiness probes' path, port and thresholds), the Service
played as its DNS name listing the ready pods' addresses, and client pods that call it through
the namespaces' NetworkPolicies, enforced per port (pods.Cluster._connect).

Not modelled: kube-proxy (the Service's name resolves to a pod's address, so its port must be
the container's: checked), the liveness probe, container restarts (CrashLoopBackOff), the
PodDisruptionBudget, Kueue's admission of the replicas. The rollout and a pod's deletion are
rollout.py's.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from facts import instances, leaderworkerset, serving
from tests import upstream
from tests.launch import lws, plans
from tests.launch.harness import Faults, WorkloadRun
from tests.launch.mpioperator import Controller, JobController, JobResult
from tests.launch.netpolicy import Peer
from tests.launch.pods import Cluster, Pod, PodSpec

PROBER = Path(__file__).with_name("prober.py")
CLIENT = Path(__file__).with_name("standins") / "completion_client.py"
NEURON_CACHE = upstream.facts("vllm-neuron-compile-cache")
PROBE_SCALE = 0.02
"""The harness's clock for probes: a rendered second lasts 20 ms (a 10 s period, 0.2 s)."""
SOURCE_NODES = 2
"""The training run a serving workload serves is played at 2 nodes, as the launch chain plays it."""


class Deployment(Controller):
    """One Deployment: its replicas as pods (named `<deployment>-<template hash>-<i>`)."""

    def start(self) -> list[Pod]:
        spec = self.obj["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        selector = spec["selector"]["matchLabels"]
        if any(labels.get(k) != v for k, v in selector.items()):
            raise AssertionError(f"{self.name}: selector {selector} does not select its template's labels {labels}")
        return [self.replica(str(i)) for i in range(int(spec.get("replicas", 1)))]

    @property
    def template_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.obj["spec"]["template"], sort_keys=True).encode()).hexdigest()[:10]

    def replica(self, suffix: str) -> Pod:
        """One pod of the template, `<deployment>-<template hash>-<suffix>`, started."""
        template = self.obj["spec"]["template"]
        labels = template["metadata"].get("labels", {})
        container = plans.containers(self.obj)
        ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports", []) if "name" in p}
        name = f"{self.name}-{self.template_hash}-{suffix}"
        pod = self.pod(container, name, {}, pod_spec=template["spec"], labels=labels)
        pod.dns_names = []
        pod.peer = Peer(name, self.namespace, dict(labels), ports)
        return self.cluster.start(pod)

    def prober(self, pod: Pod, scale: float = PROBE_SCALE) -> subprocess.Popen[str]:
        """The kubelet's startup then readiness probe of one pod, running (prober.py)."""
        container = plans.containers(self.obj)
        probes = {k: container[k] for k in ("startupProbe", "readinessProbe")}
        spec = {
            "address": pod.address,
            "port": self.port(container, probes["startupProbe"]["httpGet"]["port"]),
            "path": probes["startupProbe"]["httpGet"]["path"],
            "startup": probes["startupProbe"],
            "readiness": probes["readinessProbe"],
            "scale": scale,
        }
        if probes["readinessProbe"]["httpGet"] != probes["startupProbe"]["httpGet"]:
            raise NotImplementedError(f"{self.name}: a readiness probe on another endpoint than the startup one")
        command = ["ip", "netns", "exec", pod.netns, sys.executable, "-S", str(PROBER), json.dumps(spec)]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)

    def probe(self, pods: list[Pod], scale: float = PROBE_SCALE) -> dict[str, str]:
        """Each pod's probes to their end: "ready", or the startup probe's last failure."""
        container = plans.containers(self.obj)
        probes = {k: container[k] for k in ("startupProbe", "readinessProbe")}
        running = {pod.spec.name: self.prober(pod, scale) for pod in pods}
        budget = max(p["periodSeconds"] * (p["failureThreshold"] + 1) for p in probes.values()) * scale + 30
        outcome = {}
        for name, prober in running.items():
            out, _ = prober.communicate(timeout=budget)
            outcome[name] = "ready" if prober.returncode == 0 else out.strip()
            self.cluster.set_ready(name, outcome[name] == "ready")
        return outcome

    @staticmethod
    def port(container: dict[str, Any], port: int | str) -> int:
        """A probe's or Service's target port: a number, or the name of a container port."""
        if isinstance(port, int):
            return port
        named = {p.get("name"): int(p["containerPort"]) for p in container.get("ports", [])}
        if port not in named:
            raise AssertionError(f"port {port!r} is not a named port of the container (ports: {named})")
        return named[port]


class LeaderWorkerSet(Deployment):
    """A LeaderWorkerSet (lws.py): every group's leader and workers started together (its
    startupPolicy LeaderCreated: the leader is ready only once its workers have joined it)."""

    def start(self) -> list[Pod]:
        spec = self.obj["spec"]
        if spec.get("startupPolicy", leaderworkerset.LEADER_CREATED) != leaderworkerset.LEADER_CREATED:
            raise NotImplementedError(f"{self.name}: startupPolicy {spec['startupPolicy']} is not modelled")
        size = int(spec["leaderWorkerTemplate"].get("size", 1))
        groups = range(int(spec.get("replicas", 1)))
        return [self.cluster.start(lws.member(self, g, i, size)) for g in groups for i in range(size)]

    def probe(self, pods: list[Pod], scale: float = PROBE_SCALE) -> dict[str, str]:
        """The leaders' probes (a worker has none)."""
        return super().probe([p for p in pods if lws.is_leader(p.spec)], scale)


class ServingRun(WorkloadRun):
    """A serving workload (and the training run it serves) on its own local cluster."""

    def __init__(self, workdir: Path, stack: str, workload: str) -> None:
        self.stack, self.workload, self.nodes = stack, workload, 1
        self.plan = plans.serving(stack, workload)
        source = plans.serving_values(stack, workload)[f"{plans.PREFIX}workloads"]
        names = [w for w in source if w != workload]
        self.source = WorkloadRun(workdir, stack, names[0], SOURCE_NODES) if names else None
        self.cluster = self.source.cluster if self.source else Cluster(workdir)
        self.shared = workdir / "shared"
        self.shared.mkdir(exist_ok=True)
        self.jobs = list(self.plan["steps"])
        self.policies = tuple(self.plan["policies"])
        self.cluster.policies = list(self.policies)
        self.results: list[JobResult] = []
        self.set_aside: set[str] = set()
        self.driver_override: str | None = None
        self.deployment: Deployment | None = None
        self.pods: list[Pod] = []

    @property
    def training_image(self) -> str:
        return str(plans.containers(self.server)["image"])

    @property
    def server(self) -> dict[str, Any]:
        return next(o for o in self.jobs if o["kind"] in ("Deployment", "LeaderWorkerSet"))

    def facts(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A job's facts, and the server's: the options of its image's vLLM, the logical
        NeuronCores of one device of its node group's instance."""
        facts = super().facts(obj)
        pinned = serving.image_for_name(str(plans.containers(obj)["image"]))
        if pinned is not None:
            facts["joinSeconds"] = lws.JOIN_SECONDS
            facts["vllm"] = upstream.facts(pinned.facts)
            facts["vllmSeries"] = upstream.facts(f"{pinned.facts}-metrics")
            instance = instances.get(plans.instance_type(self.stack, self.workload))
            facts["servingCoresPerDevice"] = serving.neuron_cores_per_device(instance)
            if pinned.accelerator == "neuron":  # the plugin of its vLLM: 0.24's torch.compile cache, else NxD's
                plugin = "vllm_024_plugin" if pinned.vllm == "0.24.0" else "nxdi_plugin"
                facts["neuronPlugin"] = NEURON_CACHE[plugin]
        return facts

    def run_jobs(self, until: str | None = None) -> bool:
        """The training run it serves (its pipeline), then its own Jobs in order; stop at a failed
        one, or before the Job whose component is `until`. True when all ran and succeeded."""
        if self.source is not None:
            self.results += self.source.pipeline(Faults())
            if not all(r.succeeded for r in self.results):
                return False
        for job in self.jobs:
            if job["kind"] != "Job":
                continue
            if until and plans.component(job) == until:
                return True
            result = JobController(self.cluster, job, self.facts(job), {}, self.policies, self.node()).run()
            self.results.append(result)
            if not result.succeeded:
                return False
        return True

    def apply(self, after: dict[str, Any]) -> bool:
        """A day-2 `pulumi up` of the after-stack's plan (`plans.serving(..., edit)`) as far as
        its Jobs go: each Job that is not the same object as before is (re)created and run, in
        order (a Job's template is immutable: a changed one is replaced); the Deployment's pods are
        left to the caller (a rollout). True when every such Job succeeded."""
        before = self.jobs
        self.plan, self.jobs = after, list(after["steps"])
        self.policies = tuple(after["policies"])
        self.cluster.policies = list(self.policies)
        for job in self.jobs:
            if job["kind"] != "Job" or job in before:
                continue
            result = JobController(self.cluster, job, self.facts(job), {}, self.policies, self.node()).run()
            self.results.append(result)
            if not result.succeeded:
                return False
        return True

    def start_server(self) -> list[Pod]:
        """Start the Deployment's replicas (not probed, not in the Service)."""
        kind = LeaderWorkerSet if self.server["kind"] == "LeaderWorkerSet" else Deployment
        self.deployment = kind(self.cluster, self.server, self.facts(self.server), {}, self.policies, self.node())
        self.pods = self.deployment.start()
        return self.pods

    def serve(self, scale: float = PROBE_SCALE) -> dict[str, str]:
        """Start the Deployment's replicas, probe them, publish the Service's name."""
        self.start_server()
        assert self.deployment is not None
        for service in self.plan["services"]:
            selector = service["spec"]["selector"]
            members = [
                p.spec.name for p in self.pods if all(p.spec.peer.labels.get(k) == v for k, v in selector.items())
            ]  # type: ignore[union-attr]
            self.cluster.services[self.service_name(service)] = members
        return self.deployment.probe(self.pods, scale)

    @staticmethod
    def service_name(service: dict[str, Any]) -> str:
        return f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"

    def url(self) -> str:
        """The in-cluster Service's completions URL; its port must be the container's (no kube-proxy
        here). An internal load balancer's Service (type LoadBalancer, an NLB on AWS) is not played."""
        (service,) = [s for s in self.plan["services"] if s["spec"].get("type", "ClusterIP") == "ClusterIP"]
        (port,) = service["spec"]["ports"]
        target = Deployment.port(plans.containers(self.server), port.get("targetPort", port["port"]))
        if target != port["port"]:
            raise NotImplementedError(
                f"Service port {port['port']} -> {target}: kube-proxy's translation is not modelled"
            )
        return f"http://{self.service_name(service)}:{port['port']}/v1/completions"

    def scrape_url(self) -> str:
        """Where a Prometheus scraper reads a server pod: the port and path of the pod template's
        `prometheus.io/` annotations (the CloudWatch agent's relabelling, infra.metrics), on a ready
        pod's address (the Service's name resolves to those here)."""
        (service,) = [s for s in self.plan["services"] if s["spec"].get("type", "ClusterIP") == "ClusterIP"]
        template = (
            self.server["spec"].get("leaderWorkerTemplate", {}).get("leaderTemplate") or self.server["spec"]["template"]
        )
        notes = template["metadata"]["annotations"]
        return f"http://{self.service_name(service)}:{notes['prometheus.io/port']}{notes['prometheus.io/path']}"

    def call(self, name: str, namespace: str, labels: dict[str, str], model: str | None) -> tuple[int, str]:
        """A client pod in `namespace` with `labels` that asks the Service for a completion (with
        `model` None: a scraper that reads the metrics of a server pod)."""
        args = [self.url(), model] if model is not None else ["--get", self.scrape_url()]
        spec = PodSpec(name, [], [], {}, [sys.executable, "-S", str(CLIENT), *args])
        spec.peer = Peer(name, namespace, labels)
        pod = self.cluster.start(spec)
        code = pod.wait(timeout=30)
        out = pod.output()
        self.cluster.remove(name)
        return code, out

    def server_logs(self) -> str:
        return "\n".join(f"--- {p.spec.name} ---\n{p.output()}" for p in self.pods)
