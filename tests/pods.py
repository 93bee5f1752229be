"""Every pod an example stack's objects make, as Kubernetes will run it: the pod templates of
Jobs and Deployments, the launcher and worker pods mpi-operator v0.8.0 creates from an MPIJob's
replica templates (with the labels it adds, tests/upstream/mpi-operator-v0.8.0-pods.yaml), and the
leader and a worker of a LeaderWorkerSet's group (with the labels LWS v0.9.0 adds, lws-v0.9.0.yaml).
Shared by the pod-security, network and checkov tests."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from config.stackfile import SECRET
from facts.names import COMPONENT_LABEL, ROLE_LABEL
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, stack_plan, stack_values
from tools import plan as plan_mod

VARIANT = "trn1-llama2+secret-env"
"""trn1-llama2 whose run has a `secretEnv` value (stored encrypted) and `internetEgress`: the
paths no example stack takes, rendered for the same checks."""

ROLES = {
    "image": "image check",
    "dirs": "directory step",
    "data": "data step",
    "tensorboard": "TensorBoard",
    "shell": "shell",
    "launcher": "MPI launcher",
    "worker": "MPI worker",
    "convert": "conversion step",
    "serve": "vLLM server",
    "serve-worker": "vLLM group worker",
}
"""What a pod is, by its component label (or its MPI replica role): the names the README's
pod security table uses."""


@dataclass(frozen=True)
class Pod:
    role: str
    owner: dict[str, Any]
    """The object the pod comes from (Job, Deployment, MPIJob)."""
    metadata: dict[str, Any]
    spec: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str(self.metadata["namespace"])

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.get("labels", {}))

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    def as_object(self) -> dict[str, Any]:
        """The pod as a Pod object (for checkov)."""
        return {"apiVersion": "v1", "kind": "Pod", "metadata": self.metadata, "spec": self.spec}


def operator_labels(job: str, role: str) -> dict[str, str]:
    """The labels mpi-operator v0.8.0 puts on a launcher or worker pod of MPIJob `job`."""
    labels = upstream.facts("mpi-operator-v0.8.0-pods")["podLabels"]
    return {k: v.format(job=job, role=role) for k, v in labels.items()}


def group_labels(lws: str, group: int, worker: int) -> dict[str, str]:
    """The labels LWS v0.9.0 puts on pod `worker` of group `group` of set `lws` (0: its leader)."""
    labels = upstream.facts("lws-v0.9.0")["labels"]
    return {labels["name"]: lws, labels["group_index"]: str(group), labels["worker_index"]: str(worker)}


def _group_pods(obj: dict[str, Any]) -> list[Pod]:
    """The leader and the first worker of a LeaderWorkerSet's first group."""
    meta, template = obj["metadata"], obj["spec"]["leaderWorkerTemplate"]
    out = []
    for worker, key, role in ((0, "leaderTemplate", "serve"), (1, "workerTemplate", "serve-worker")):
        t = copy.deepcopy(template[key])
        labels = {**t["metadata"]["labels"], **group_labels(meta["name"], 0, worker)}
        name = f"{meta['name']}-0" + (f"-{worker}" if worker else "")
        out.append(Pod(ROLES[role], obj, {"name": name, "namespace": meta["namespace"], "labels": labels}, t["spec"]))
    return out


def pods(plan: dict[str, Any]) -> list[Pod]:
    out = []
    for obj in plan_mod.kubernetes_objects(plan):
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if obj["kind"] == "MPIJob":
            for replica in spec["mpiReplicaSpecs"].values():
                template = copy.deepcopy(replica["template"])
                role = template["metadata"]["labels"][ROLE_LABEL]
                labels = {**template["metadata"]["labels"], **operator_labels(meta["name"], role)}
                pod_meta = {"name": f"{meta['name']}-{role}", "namespace": meta["namespace"], "labels": labels}
                out.append(Pod(ROLES[role], obj, pod_meta, template["spec"]))
        elif obj["kind"] in ("Job", "Deployment"):
            template = copy.deepcopy(spec["template"])
            labels = template["metadata"]["labels"]
            pod_meta = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}
            out.append(Pod(ROLES[labels[COMPONENT_LABEL]], obj, pod_meta, template["spec"]))
        elif obj["kind"] == "LeaderWorkerSet":
            out += _group_pods(obj)
        else:
            assert obj["kind"] != "Pod", f"{meta['name']}: a standalone pod (no owner, no NetworkPolicy on EKS)"
    return out


@cache
def _variant() -> dict[str, Any]:
    values = copy.deepcopy(stack_values("trn1-llama2"))
    run = values["llm-training-eks:workloads"]["llama2"]
    run.update(secretEnv={"WANDB_API_KEY": SECRET}, internetEgress=True)
    return plan_mod.run(json.loads(json.dumps(values)), "trn1-llama2")


def plan_of(name: str) -> dict[str, Any]:
    """The plan of an example stack, or of VARIANT."""
    return _variant() if name == VARIANT else stack_plan(name)


def rendered_stacks() -> list[str]:
    """The example stacks that render pods, and VARIANT."""
    return [*(s for s in EXAMPLE_STACKS if pods(stack_plan(s))), VARIANT]
