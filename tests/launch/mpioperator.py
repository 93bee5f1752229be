"""Plays kubeflow/mpi-operator v0.8.0 (and the Job controller under it) for one rendered MPIJob,
and the Job controller for a plain Job, on a `pods.Cluster`. What it does the way the operator
does (pkg/controller/mpi_job_controller.go at v0.8.0, facts in tests/upstream/mpi-operator-v0.8.0-pods.yaml):

- the SSH Secret: an ECDSA P-521 key, items id_rsa, id_rsa.pub and authorized_keys, mounted
  on every pod at spec.sshAuthMountPath with mode 0600 when that path is /root/.ssh;
- the hostfile ConfigMap at /etc/mpi/hostfile: `<job>-worker-<i>.<job>.<namespace>.svc
  slots=<slotsPerWorker>` per worker (Open MPI), plus discover_hosts.sh;
- worker pods `<job>-worker-<i>` and the launcher `<job>-launcher` with those hostnames, the
  launcher's environment (K_MPI_JOB_ROLE, OMPI_MCA_orte_keep_fqdn_hostnames,
  OMPI_MCA_orte_default_hostfile, OMPI_MCA_plm_rsh_args, OMPI_MCA_orte_set_default_slots,
  NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES emptied), the worker's K_MPI_JOB_ROLE;
- the launcher Job's backoffLimit = runPolicy.backoffLimit: a failed launcher is started
  again that many times.

Each container's environment is the image's ENV, then the pod's `env` (a Secret reference
resolves to a placeholder value), then the operator's.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facts.names import NODE_GROUP_LABEL
from tests import upstream
from tests.launch import internet, plans
from tests.launch.images import build_layer, describe, gpu_runtime_layer
from tests.launch.netpolicy import denied_pairs, reaches_internet
from tests.launch.pods import Cluster, Pod, PodSpec, wait_until
from tests.launch.security import effective, volume_mounts

OPERATOR = upstream.facts("mpi-operator-v0.8.0-pods")
HOSTFILE_DIR = OPERATOR["configMountPath"]
DEVICE_FILES = {
    "aws.amazon.com/neuron": "/dev/neuron{}",
    "nvidia.com/gpu": "/dev/nvidia{}",
    "vpc.amazonaws.com/efa": "/dev/infiniband/uverbs{}",
}


@dataclass
class Attempt:
    exit_code: int | None  # None: the harness stopped it after its time limit
    log: str
    seconds: float


@dataclass
class JobResult:
    name: str
    kind: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].exit_code == 0

    def log(self) -> str:
        return "".join(f"--- {self.name} attempt {i + 1} ---\n{a.log}" for i, a in enumerate(self.attempts))


def ssh_secret(workdir: Path, mount_path: str) -> dict[str, Any]:
    key = workdir / "ssh-key"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f", str(key)],
            check=True,
        )
    mode = int(OPERATOR["sshDefaultModeAtRootSshPath"], 8) if mount_path == "/root/.ssh" else 0o644
    data = {"ssh-privatekey": key.read_text(), "ssh-publickey": Path(f"{key}.pub").read_text()}
    files = {item: [data[secret_key], mode] for item, secret_key in OPERATOR["sshItems"].items()}
    return {"path": mount_path, "files": files}


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's `env`; a secretKeyRef resolves to a placeholder (the Secret's value)."""
    out = {}
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        out[e["name"]] = f"harness-secret-{ref['name']}-{ref['key']}" if ref else e.get("value", "")
    return out


class Controller:
    """One Job or MPIJob on one cluster: its pods, its attempts, its result. `policies`: the
    NetworkPolicies of its namespace (whether a pod reaches the internet); `node`: the node
    group its pods' nodeSelector names and what that group's nodes show under /sys/module."""

    def __init__(
        self,
        cluster: Cluster,
        obj: dict[str, Any],
        facts: dict[str, Any],
        env: dict[str, str],
        policies: tuple[dict[str, Any], ...] = (),
        node: tuple[str, dict[str, str]] = ("", {}),
    ) -> None:
        self.cluster = cluster
        self.obj = obj
        self.name = obj["metadata"]["name"]
        self.namespace = obj["metadata"]["namespace"]
        self.harness_env = env
        self.facts = facts
        self.policies = [p for p in policies if p["metadata"].get("namespace") == self.namespace]
        self.node = node
        self.read_only_shared: tuple[str, ...] = ()  # pods whose /shared mount is read-only
        self.jobdir = cluster.workdir / "jobs" / self.name
        (self.jobdir / "etc-mpi").mkdir(parents=True, exist_ok=True)
        self.jobdir.chmod(0o1777)  # the harness's own /harness: stand-ins of any user record there
        (self.jobdir / "job.json").write_text(json.dumps(facts))

    def fqdn(self, pod: str) -> str:
        return f"{pod}.{self.name}.{self.namespace}.svc"

    def layers(self, container: dict[str, Any]) -> list[str]:
        image = describe(container["image"])
        if self.cluster.mpi_on_sshd_path:  # a scenario that sets the MPI need aside
            image = dataclasses.replace(image, system_mpi=True)
        key = f"{image.name}{'+system-mpi' if image.system_mpi else ''}"
        layers = [str(self.cluster.layer(key, lambda dest: build_layer(image, dest)))]
        if "nvidia.com/gpu" in container.get("resources", {}).get("limits", {}):
            layers.append(str(self.cluster.layer("gpu-runtime", gpu_runtime_layer)))
        return layers

    def pod(self, container: dict[str, Any], name: str, extra_env: dict[str, str], **kw: Any) -> PodSpec:
        image = describe(container["image"])
        pod_spec = kw.pop("pod_spec")
        labels: dict[str, str] = kw.pop("labels")
        group, node_files = self.node
        on_group = group and pod_spec.get("nodeSelector", {}).get(NODE_GROUP_LABEL) == group
        security = effective(pod_spec, container, name)
        env = {**image.env, "HOME": security.home, **container_env(container), **extra_env, **self.harness_env}
        limits = container.get("resources", {}).get("limits", {})
        faulty: dict[str, tuple[str, ...]] = kw.pop("faulty_devices", {})
        devices = [
            pattern.format(i)
            for resource, pattern in DEVICE_FILES.items()
            for i in range(int(limits.get(resource, 0)) - (1 if name in faulty.get(resource, ()) else 0))
        ]
        binds: list[dict[str, object]] = [
            *volume_mounts(pod_spec, container, self.cluster.workdir / "shared", name in self.read_only_shared),
            {"source": str(self.jobdir), "target": "/harness"},
            *kw.pop("binds", []),
        ]
        return PodSpec(
            name=name,
            dns_names=[self.fqdn(name), f"{self.fqdn(name)}.cluster.local"],
            layers=self.layers(container),
            env=env,
            command=[*container.get("command", OPERATOR["workerDefaultCommand"]), *container.get("args", [])],
            binds=binds,
            devices=devices,
            working_dir=container.get("workingDir") or image.workdir,
            security=security,
            internet=reaches_internet(self.policies, labels, internet.PORT),
            node_files=dict(node_files) if on_group else {},
            **kw,
        )

    def attempt(self, spec: PodSpec, n: int, timeout: float, during: Callable[[int, Pod], None] | None) -> Attempt:
        """One pod run to its end (or `timeout`), `during(n, pod)` while it runs."""
        (self.jobdir / "attempt").write_text(str(n))
        if n > 0 and (self.jobdir / "records").exists():  # what the stand-ins saw, per attempt
            (self.jobdir / "records").rename(self.jobdir / f"records.{n - 1}")
        pod = self.cluster.start(spec)
        began = time.monotonic()
        if spec.security and spec.security.refused:  # never started: the kubelet's error is all there is
            self.cluster.remove(spec.name)
            return Attempt(None, f"Error: {spec.security.refused}\n", 0.0)
        if during:
            during(n, pod)
        try:
            code: int | None = pod.wait(timeout=max(1.0, timeout - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            code = None
        self.cluster.remove(spec.name)
        attempt = Attempt(code, pod.output(), time.monotonic() - began)
        pod.log.rename(pod.log.with_suffix(f".{n}.log"))
        return attempt


class JobController(Controller):
    """A batch/v1 Job of one pod; its backoffLimit is not used (a failure here is final)."""

    def run(self, timeout: float = 60.0) -> JobResult:
        container = plans.containers(self.obj)
        labels = self.obj["spec"]["template"]["metadata"].get("labels", {})
        spec = self.pod(container, f"{self.name}-0", {}, pod_spec=plans.pod_spec(self.obj), labels=labels)
        return JobResult(self.name, "Job", [self.attempt(spec, 0, timeout, None)])


class Operator(Controller):
    """One MPIJob: its workers, its launcher attempts."""

    def __init__(
        self,
        cluster: Cluster,
        mpijob: dict[str, Any],
        facts: dict[str, Any],
        env: dict[str, str],
        policies: tuple[dict[str, Any], ...] = (),
        node: tuple[str, dict[str, str]] = ("", {}),
    ) -> None:
        super().__init__(cluster, mpijob, facts, env, policies, node)
        spec = mpijob["spec"]
        self.slots = int(spec.get("slotsPerWorker", 1))
        self.workers = int(spec["mpiReplicaSpecs"]["Worker"]["replicas"])
        self.backoff_limit = int(spec.get("runPolicy", {}).get("backoffLimit", 6))
        self.secret = ssh_secret(cluster.workdir, spec.get("sshAuthMountPath", "/root/.ssh"))
        self.faulty_devices: dict[str, tuple[str, ...]] = {}
        self._write_hostfile()
        self.labels = self.pod_labels()
        cluster.denied |= denied_pairs(self.policies, self.labels)

    def pod_labels(self) -> dict[str, dict[str, str]]:
        """Each pod's labels: its template's, then the operator's (defaultLabels)."""
        out = {}
        names = {"launcher": [str(OPERATOR["launcherName"]).format(job=self.name)]}
        names["worker"] = [self.worker_name(i) for i in range(self.workers)]
        for role, pods in names.items():
            spec = self.obj["spec"]["mpiReplicaSpecs"][role.capitalize()]["template"]
            operator = {k: str(v).format(job=self.name, role=role) for k, v in OPERATOR["podLabels"].items()}
            out.update({pod: {**spec["metadata"].get("labels", {}), **operator} for pod in pods})
        return out

    def worker_name(self, i: int) -> str:
        return str(OPERATOR["workerName"]).format(job=self.name, index=i)

    def _write_hostfile(self) -> None:
        line = str(OPERATOR["hostfile"])
        lines = "".join(
            line.format(worker=self.worker_name(i), job=self.name, namespace=self.namespace, slots=self.slots) + "\n"
            for i in range(self.workers)
        )
        hostfile = self.jobdir / "etc-mpi" / "hostfile"
        hostfile.write_text(lines)
        hostfile.chmod(0o444)
        hosts = "".join(f"echo {self.fqdn(self.worker_name(i))}:{self.slots}\n" for i in range(self.workers))
        discover = self.jobdir / "etc-mpi" / "discover_hosts.sh"
        discover.write_text(f"#!/bin/sh\n{hosts}")
        discover.chmod(0o555)

    def _role_pod(self, role: str, name: str, env: dict[str, str], binds: list[dict[str, object]]) -> PodSpec:
        container, pod_spec = plans.containers(self.obj, role), plans.pod_spec(self.obj, role)
        return self.pod(
            container,
            name,
            env,
            binds=binds,
            secrets=[self.secret],
            faulty_devices=self.faulty_devices,
            pod_spec=pod_spec,
            labels=self.labels[name],
        )

    def start_worker(self, i: int) -> Pod:
        spec = self._role_pod("Worker", self.worker_name(i), dict(OPERATOR["workerEnv"]), [])
        spec.sysfs = self.ultraserver_ids(i)
        return self.cluster.start(spec)

    def ultraserver_ids(self, i: int) -> dict[str, str]:
        """On UltraServer members (the job's facts say how many instances one has), the ids the
        Neuron driver exposes for the 4-node configuration: worker i is node i % size of
        UltraServer i // size (tests/upstream/nccom-test-2.32.0.yaml names the files)."""
        size = int(self.facts.get("ultraserverSize") or 0)
        if not size:
            return {}
        files = self.facts["ultraserverSysfs"]
        return {files["server_id"]: f"{i // size + 1:016x}", files["node_id"]: str(i % size)}

    def launcher_spec(self) -> PodSpec:
        operator_env = {k: str(v).format(slots=self.slots) for k, v in OPERATOR["launcherEnv"].items()}
        hostfile = {"source": str(self.jobdir / "etc-mpi"), "target": HOSTFILE_DIR, "readOnly": True}
        return self._role_pod("Launcher", str(OPERATOR["launcherName"]).format(job=self.name), operator_env, [hostfile])

    def run(
        self,
        *,
        skip_workers: tuple[int, ...] = (),
        during: Callable[[int, Pod], None] | None = None,
        attempt_timeout: float = 90.0,
        max_attempts: int | None = None,
    ) -> JobResult:
        """Start the workers (all but `skip_workers`, which never come up), then the launcher,
        again after each failure up to backoffLimit times; `during(attempt, launcher)` runs
        while an attempt is under way. Leaves no pod behind (cleanPodPolicy).

        With `skip_workers`, the launcher starts once the other workers' sshd listens: the
        scenario is a launcher whose every worker but one is up (after a Kueue readmission,
        where WaitForWorkersReady is not honoured again)."""
        result = JobResult(self.name, "MPIJob")
        for i in range(self.workers):
            if i not in skip_workers:
                self.start_worker(i)
        if skip_workers:
            up = [self.worker_name(i) for i in range(self.workers) if i not in skip_workers]
            wait_until(lambda: all(self.cluster.listening(w, 22) for w in up), timeout=30)
        attempts = self.backoff_limit + 1 if max_attempts is None else min(max_attempts, self.backoff_limit + 1)
        try:
            for n in range(attempts):
                attempt = self.attempt(self.launcher_spec(), n, attempt_timeout, during)
                result.attempts.append(attempt)
                if attempt.exit_code in (0, None):
                    break
        finally:
            for i in range(self.workers):
                self.cluster.remove(self.worker_name(i))
        return result
