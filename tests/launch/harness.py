"""One workload of an example stack on a local cluster: its MPIJobs run in the order `pulumi
up` creates them, an awaited one that fails stopping the rest (its dependents are never
created), with the faults a scenario injects."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.launch import plans
from tests.launch.images import code_shim, describe
from tests.launch.mpioperator import JobResult, Operator, container_env
from tests.launch.pods import Cluster, Pod, wait_until
from workloads.manifests.mpijob import POLL_ENV, WAIT_ENV

RANKS_PER_NODE = "2"  # torchrun processes per node here (the job renders 32 or 8)
CHECKPOINT = re.compile(r"^(ckpt_\d+\.pt|.*step=\d+.*)$")


def checkpoint_step(name: str) -> int:
    """The step of a checkpoint named the way NeMo (`step=N`) or the BERT script (`ckpt_N.pt`) names it."""
    m = re.search(r"step=(\d+)", name) or re.search(r"^ckpt_(\d+)\.pt$", name)
    if not m:
        raise ValueError(f"not a checkpoint name: {name}")
    return int(m.group(1))


@dataclass
class Faults:
    """What goes wrong: a device missing on a worker, a worker that never comes up, a worker
    killed once the first checkpoint is written (and recreated after `recreate_after`)."""

    missing_device: dict[str, int] = field(default_factory=dict)  # resource -> worker index
    never_up: tuple[int, ...] = ()
    kill: int | None = None
    recreate_after: float = 1.0


class WorkloadRun:
    def __init__(self, workdir: Path, stack: str, workload: str, nodes: int) -> None:
        self.stack, self.workload, self.nodes = stack, workload, nodes
        self.jobs = plans.mpijobs(stack, workload, nodes)
        self.cluster = Cluster(workdir)
        self.shared = workdir / "shared"
        self.shared.mkdir()
        self.results: list[JobResult] = []
        self.operators: list[Operator] = []
        self.killed_checkpoints: list[str] = []  # the checkpoints there were when a worker was killed

    def close(self) -> None:
        self.cluster.close()

    def facts(self, job: dict[str, Any], framework: str) -> dict[str, Any]:
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        steps = plans.launcher_script(job)
        return {
            "framework": framework,
            "renderedNprocPerNode": container_env(worker).get("NPROC_PER_NODE"),
            "stepSeconds": 0.0 if "dp_bert" in steps else 0.1,
            "stepsPerShard": 250,
            "neuronCoresPerDevice": 2,
            "busBandwidthGbps": 400.0,
        }

    def operator(self, job: dict[str, Any], faults: Faults, wait_seconds: int) -> Operator:
        env = {"NPROC_PER_NODE": RANKS_PER_NODE, WAIT_ENV: str(wait_seconds), POLL_ENV: "1"}
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        op = Operator(self.cluster, job, self.facts(job, describe(worker["image"]).family.framework), env)
        op.faulty_devices = {r: (op.worker_name(i),) for r, i in faults.missing_device.items()}
        return op

    def stage(self, job: dict[str, Any]) -> dict[str, str]:
        """Code under /shared is staged there (as the user would); other code is in the image."""
        code = plans.code_paths(job)
        for path, standin in list(code.items()):
            if path.startswith("/shared/"):
                target = self.shared / path[len("/shared/") :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(code_shim(standin))
                del code[path]
        return code

    def checkpoints(self) -> list[Path]:
        return [p for p in self.shared.rglob("*") if CHECKPOINT.match(p.name)]

    def run(
        self, job: dict[str, Any], faults: Faults, wait_seconds: int = 20, max_attempts: int | None = None
    ) -> JobResult:
        op = self.operator(job, faults, wait_seconds)
        self.operators.append(op)
        code = self.stage(job)

        def during(attempt: int, launcher: Pod) -> None:
            if attempt > 0 and (op.jobdir / "records").exists():
                (op.jobdir / "records").rename(op.jobdir / f"records.{attempt - 1}")
            if faults.kill is None:
                return
            if attempt == 0:
                deadline = time.monotonic() + 60
                while not self.checkpoints() and launcher.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.killed_checkpoints = [p.name for p in self.checkpoints()]
                self.cluster.remove(op.worker_name(faults.kill))
            elif attempt == 1:
                # The node comes back after the restarted launcher has started waiting for it
                # (a node replacement takes minutes, a launcher restart seconds).
                host = op.fqdn(op.worker_name(faults.kill))
                wait_until(lambda: f"waiting for worker {host}" in launcher.output(), timeout=60)
                time.sleep(faults.recreate_after)
                op.start_worker(faults.kill, code)

        result = op.run(code, skip_workers=faults.never_up, during=during, max_attempts=max_attempts)
        self.results.append(result)
        return result

    def pipeline(self, faults: Faults, only: Callable[[dict[str, Any]], bool] = lambda j: True) -> list[JobResult]:
        """Run the workload's MPIJobs in order; stop after an awaited one that failed."""
        for job in self.jobs:
            if not only(job):
                continue
            result = self.run(job, faults)
            if not result.succeeded and plans.is_awaited(job):
                break
        return self.results

    def records(self, job_name: str, kind: str, attempt: int | None = None) -> list[dict[str, Any]]:
        """What the stand-ins of a job recorded (of one launcher attempt; default: the last)."""
        base = self.cluster.workdir / "jobs" / job_name
        folder = base / ("records" if attempt is None else f"records.{attempt}")
        docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
        return [d for d in docs if d["kind"] == kind]
