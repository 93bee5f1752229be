"""Plays kubeflow/mpi-operator v0.8.0 (and the Job controller under it) for one rendered
MPIJob, on a `pods.Cluster`. What it does the way the operator does
(pkg/controller/mpi_job_controller.go at v0.8.0, facts in tests/upstream/mpi-operator-v0.8.0-pods.yaml):

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

Each container's environment is the image's ENV, then the pod's `env`, then the operator's.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import upstream
from tests.launch.images import Image, build_layer, describe
from tests.launch.pods import Cluster, Pod, PodSpec, wait_until

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
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].exit_code == 0

    def log(self) -> str:
        return "".join(f"--- launcher attempt {i + 1} ---\n{a.log}" for i, a in enumerate(self.attempts))


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
    return {e["name"]: e.get("value", "") for e in container.get("env", []) if "valueFrom" not in e}


class Operator:
    """One MPIJob on one cluster: its workers, its launcher attempts, its result."""

    def __init__(self, cluster: Cluster, mpijob: dict[str, Any], facts: dict[str, Any], env: dict[str, str]) -> None:
        self.cluster = cluster
        self.job = mpijob
        self.name = mpijob["metadata"]["name"]
        self.namespace = mpijob["metadata"]["namespace"]
        spec = mpijob["spec"]
        self.slots = int(spec.get("slotsPerWorker", 1))
        self.replicas = spec["mpiReplicaSpecs"]
        self.workers = int(self.replicas["Worker"]["replicas"])
        self.backoff_limit = int(spec.get("runPolicy", {}).get("backoffLimit", 6))
        self.secret = ssh_secret(cluster.workdir, spec.get("sshAuthMountPath", "/root/.ssh"))
        self.harness_env = env
        self.jobdir = cluster.workdir / "jobs" / self.name
        (self.jobdir / "etc-mpi").mkdir(parents=True, exist_ok=True)
        (self.jobdir / "job.json").write_text(json.dumps(facts))
        self._layers: dict[str, Path] = {}
        self.faulty_devices: dict[str, tuple[str, ...]] = {}
        self._write_hostfile()

    def worker_name(self, i: int) -> str:
        return str(OPERATOR["workerName"]).format(job=self.name, index=i)

    def fqdn(self, pod: str) -> str:
        return f"{pod}.{self.name}.{self.namespace}.svc"

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

    def image(self, role: str) -> Image:
        return describe(self.replicas[role]["template"]["spec"]["containers"][0]["image"])

    def layer(self, image: Image, code: dict[str, str]) -> str:
        if image.reference not in self._layers:
            dest = self.cluster.workdir / "layers" / f"{self.name}-{len(self._layers)}"
            self._layers[image.reference] = build_layer(image, dest, code)
        return str(self._layers[image.reference])

    def _pod(self, role: str, name: str, extra_env: dict[str, str], code: dict[str, str]) -> PodSpec:
        container = self.replicas[role]["template"]["spec"]["containers"][0]
        image = self.image(role)
        env = {**image.env, "HOME": "/root", **container_env(container), **extra_env, **self.harness_env}
        limits = container.get("resources", {}).get("limits", {})
        devices = [
            pattern.format(i)
            for resource, pattern in DEVICE_FILES.items()
            for i in range(int(limits.get(resource, 0)) - (1 if name in self.faulty_devices.get(resource, ()) else 0))
        ]
        binds: list[dict[str, object]] = [
            {"source": str(self.cluster.workdir / "shared"), "target": "/shared"},
            {"source": str(self.jobdir), "target": "/harness"},
        ]
        if role == "Launcher":
            binds.append({"source": str(self.jobdir / "etc-mpi"), "target": HOSTFILE_DIR, "readOnly": True})
        return PodSpec(
            name=name,
            dns_names=[self.fqdn(name), f"{self.fqdn(name)}.cluster.local"],
            layers=[self.layer(image, code)],
            env=env,
            command=[*container.get("command", OPERATOR["workerDefaultCommand"]), *container.get("args", [])],
            binds=binds,
            secrets=[self.secret],
            devices=devices,
            working_dir=container.get("workingDir"),
        )

    def start_worker(self, i: int, code: dict[str, str]) -> Pod:
        return self.cluster.start(self._pod("Worker", self.worker_name(i), dict(OPERATOR["workerEnv"]), code))

    def launcher_spec(self, code: dict[str, str]) -> PodSpec:
        operator_env = {k: str(v).format(slots=self.slots) for k, v in OPERATOR["launcherEnv"].items()}
        return self._pod("Launcher", str(OPERATOR["launcherName"]).format(job=self.name), operator_env, code)

    def run(
        self,
        code: dict[str, str],
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
        result = JobResult(self.name)
        for i in range(self.workers):
            if i not in skip_workers:
                self.start_worker(i, code)
        if skip_workers:
            up = [self.worker_name(i) for i in range(self.workers) if i not in skip_workers]
            wait_until(lambda: all(self.cluster.listening(w, 22) for w in up), timeout=30)
        attempts = self.backoff_limit + 1 if max_attempts is None else min(max_attempts, self.backoff_limit + 1)
        try:
            for attempt in range(attempts):
                launcher = self.cluster.start(self.launcher_spec(code))
                began = time.monotonic()
                if during:
                    during(attempt, launcher)
                try:
                    code_ = launcher.wait(timeout=max(1.0, attempt_timeout - (time.monotonic() - began)))
                except subprocess.TimeoutExpired:
                    code_ = None
                self.cluster.remove(launcher.spec.name)
                result.attempts.append(Attempt(code_, launcher.output(), time.monotonic() - began))
                launcher.log.rename(launcher.log.with_suffix(f".{attempt}.log"))
                if code_ == 0 or code_ is None:
                    break
        finally:
            for i in range(self.workers):
                self.cluster.remove(self.worker_name(i))
        return result
