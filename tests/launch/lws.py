"""A LeaderWorkerSet of a serving workload as the LWS v0.9.0 controller and its pod webhook make
its pods (tests/upstream/lws-v0.9.0.yaml; facts/leaderworkerset.py): per group g of `replicas`,
the leader pod `<set>-<g>` from the leader template and the workers `<set>-<g>-<i>` (i in
1..size-1) from the worker template, each with the set's name, group-index and worker-index
labels and the variables the webhook injects (LWS_LEADER_ADDRESS `<set>-<g>.<set>.<namespace>`:
the set's name as the pods' subdomain, the default "Shared" subdomain policy; LWS_GROUP_SIZE;
LWS_WORKER_INDEX). The kubelet's `$(VAR)` expansion of command and args from the container's
environment. The leader answers to its address in the cluster DNS while it runs (the set's
headless Service publishes not-ready addresses). Only the leaders are probed (the workers have
no probes); a worker is in no Service.

Not modelled: the group's restart policy (RecreateGroupOnPodRestart: a failed pod is not
restarted here), rolling updates, Kueue's admission of a group whole, exclusive placement.
"""

from __future__ import annotations

import copy
import re

from facts import leaderworkerset as lws
from tests.launch.mpioperator import Controller, container_env
from tests.launch.netpolicy import Peer
from tests.launch.pods import PodSpec

REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")
JOIN_SECONDS = 30
"""How long the stand-in vLLM leader waits for its workers (job facts "joinSeconds"): longer
than the leader's startup probe lasts at the harness's clock, so the probe decides."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of a container's command or argument: `$(VAR)` is the value of VAR
    in the container's environment (unchanged when VAR is not defined), `$$` is a literal `$`."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return REFERENCE.sub(one, text)


def leader_address(set_name: str, group: int, namespace: str) -> str:
    """The value of LWS_LEADER_ADDRESS: pod_utils.go AddLWSVariables, `<set>-<group>.<subdomain>.<ns>`."""
    return f"{set_name}-{group}.{set_name}.{namespace}"


def member(controller: Controller, group: int, index: int, size: int) -> PodSpec:
    """The pod of worker `index` of `group` (0: the leader) of the set `controller` plays, as the
    controller and its webhook leave it."""
    name_, namespace = controller.name, controller.namespace
    template = controller.obj["spec"]["leaderWorkerTemplate"]["leaderTemplate" if index == 0 else "workerTemplate"]
    name = f"{name_}-{group}" if index == 0 else f"{name_}-{group}-{index}"
    labels = {
        **template["metadata"].get("labels", {}),
        lws.NAME_LABEL: name_,
        lws.GROUP_INDEX_LABEL: str(group),
        lws.WORKER_INDEX_LABEL: str(index),
    }
    address = leader_address(name_, group, namespace)
    injected = {lws.LEADER_ADDRESS_ENV: address, lws.GROUP_SIZE_ENV: str(size), lws.WORKER_INDEX_ENV: str(index)}
    container = copy.deepcopy(template["spec"]["containers"][0])
    env = {**container_env(container), **injected}
    for key in ("command", "args"):
        if key in container:
            container[key] = [expand(str(part), env) for part in container[key]]
    pod = controller.pod(container, name, injected, pod_spec=template["spec"], labels=labels)
    pod.dns_names = [address, f"{address}.svc.cluster.local"] if index == 0 else []
    ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports", []) if "name" in p}
    pod.peer = Peer(name, namespace, labels, ports)
    return pod


def is_leader(pod: PodSpec) -> bool:
    return pod.peer is not None and pod.peer.labels.get(lws.WORKER_INDEX_LABEL) == "0"
