"""Recipe ddp-cpu, the first run of a platform: CPU training on the system node group.

Its rules (the system node group, Kueue quota on the system flavor, the CPU health gate) and its
launcher's training phase run for real: the rendered script under torchrun with gloo on this
machine's CPUs, stopped once after a checkpoint and resumed from it, ending where an
uninterrupted run ends.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import config
from config.workloads import DdpCpuWorkload
from facts import images, instances
from facts.names import SYSTEM_NODE_GROUP
from infra.queues import cluster_queue, queue_objects, teams_of
from tests import upstream
from tests.conftest import API_PATH, EXAMPLES, placed, resources, stack_plan, stack_values
from tools import plan as plan_mod
from workloads.manifests import ddp_cpu
from workloads.manifests.healthcheck import health_gate
from workloads.manifests.mpijob import base_env
from workloads.manifests.objects import Context

TRN1 = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}


def parse(run: dict[str, Any], **more: Any) -> config.StackConfig:
    values = {
        "region": "us-west-2",
        "cluster": API_PATH,
        "nodeGroups": [TRN1],
        "workloads": {"first": {"recipe": "ddp-cpu", "nodes": 2, "runId": "r1", **run}},
        **placed("us-west-2d"),
        **more,
    }
    return config.parse(values)


def problems(run: dict[str, Any], **more: Any) -> list[str]:
    with pytest.raises(config.ConfigError) as e:
        parse(run, **more)
    return e.value.problems


# --------------------------------------------------------------------------- config


def test_it_runs_on_the_system_node_group_by_default() -> None:
    run = parse({}).workloads["first"]
    assert isinstance(run, DdpCpuWorkload)
    assert run.node_group == SYSTEM_NODE_GROUP
    assert run.image == images.PUBLIC_CPU_IMAGE


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ({"nodeGroup": "trn1"}, "workloads.first.nodeGroup: recipe ddp-cpu trains on CPUs, on the system node group"),
        ({"nodes": 5}, "workloads.first.nodes: 5 nodes, but node group 'system' can have at most 4"),
        ({"processesPerNode": 3}, "workloads.first.processesPerNode: 3 is more than the 2 vCPUs a worker gets"),
        ({"interruptOnceAtStep": 200}, "workloads.first.interruptOnceAtStep: 200 is not before the last step (200)"),
        ({"interruptOnceAtStep": 10, "maxRetries": 0}, "workloads.first.maxRetries: 0 leaves no restart"),
        ({"healthCheck": {"messageSize": "2G"}}, "workloads.first.healthCheck.messageSize: the CPU gate runs no"),
    ],
)
def test_what_a_cpu_run_cannot_be(run: dict[str, Any], expected: str) -> None:
    found = problems(run)
    assert any(p.startswith(expected) for p in found), found


def test_accelerated_recipes_stay_off_the_system_node_group() -> None:
    values = {
        "region": "us-west-2",
        "cluster": API_PATH,
        "nodeGroups": [TRN1],
        "workloads": {
            "c": {
                "recipe": "custom",
                "nodeGroup": "system",
                "nodes": 1,
                "runId": "r1",
                "image": "x/y:1",
                "command": ["true"],
            }
        },
    }
    with pytest.raises(config.ConfigError) as e:
        config.parse(values)
    assert any(
        "recipe custom needs an accelerated node group; 'system' is the system node group" in p
        for p in e.value.problems
    )


def test_a_team_may_hold_system_quota_for_cpu_runs() -> None:
    teams = {"platform": {"nodeGroup": "system", "nodes": 2, "borrowingLimitNodes": 0}}
    cfg = parse({"team": "platform"}, teams=teams, queueing={"defaultQueue": False})
    system = cfg.system_node_group.node_group(cfg.availability_zones)
    groups = {"system": system}
    (team,) = teams_of(cfg.teams, groups)
    queue = cluster_queue(team, groups)
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    # 2 worker slots (2 CPUs, 8 GiB each) plus the launchers of the 2 runs they can hold.
    assert quota["cpu"] == "6" and quota["memory"] == "24Gi"


def test_its_cost_is_the_stacks_and_shown() -> None:
    plan = stack_plan("dev")
    assert plan["outputs"]["runCosts"] == {"first-run": 0.0}
    (run,) = plan["cost"]["trainingRuns"]
    assert run["onSystemNodes"] and run["instanceType"] == "m6i.2xlarge"
    assert plan["outputs"]["hourlyCost"] == plan["cost"]["totalHourly"] < 2  # the first hour: a few dollars


def test_a_runs_layer_runs_it_on_the_system_group_the_cluster_layer_exports() -> None:
    values = dict(stack_values("trn1-llama2-runs"))
    values.pop("llm-training-eks:huggingFaceToken")
    values["llm-training-eks:workloads"] = {"first": {"recipe": "ddp-cpu", "nodes": 2, "runId": "r1"}}
    plan = plan_mod.run(values, "trn1-llama2-runs", EXAMPLES)
    (job,) = resources(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob")
    worker = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["nodeSelector"] == {"llm-training-eks/node-group": SYSTEM_NODE_GROUP}
    assert plan["outputs"]["runCosts"] == {"first": 0.0}


# --------------------------------------------------------------------------- Kueue admits it on the system flavor


def _assigned(podset: dict[str, Any], flavors: list[dict[str, Any]]) -> str | None:
    """Kueue's flavor choice for a pod set: the first flavor of the queue whose nodeTaints the pod
    tolerates and whose nodeLabels its nodeSelector (on the flavor's keys) matches
    (tests/upstream/kueue-flavor-assignment-v0.19.2.yaml)."""
    facts = upstream.facts("kueue-flavor-assignment-v0.19.2")
    spec = podset["template"]["spec"]
    tolerated = {(t["key"], t.get("value"), t["effect"]) for t in spec.get("tolerations", [])}
    for flavor in flavors:
        taints = [t for t in flavor["spec"].get("nodeTaints", []) if t["effect"] in facts["taint_effects_checked"]]
        if any((t["key"], t.get("value"), t["effect"]) not in tolerated for t in taints):
            continue
        labels = flavor["spec"].get("nodeLabels", {})
        if all(spec.get("nodeSelector", {}).get(k, v) == v for k, v in labels.items()):
            return str(flavor["metadata"]["name"])
    return None


def test_kueue_admits_the_cpu_run_on_the_system_flavor_within_its_quota() -> None:
    plan = stack_plan("dev")
    objects = {
        (r["inputs"]["kind"], r["inputs"]["metadata"]["name"]): r["inputs"]
        for r in plan["resources"]
        if r["type"].startswith("kubernetes:kueue")
    }
    queue = objects[("ClusterQueue", "default")]
    group = queue["spec"]["resourceGroups"][0]
    flavors = [objects[("ResourceFlavor", f["name"])] for f in group["flavors"]]
    (job,) = [r["inputs"] for r in resources(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob")]
    used: dict[str, float] = {}
    for podset in job["spec"]["mpiReplicaSpecs"].values():
        assert _assigned(podset, flavors) == SYSTEM_NODE_GROUP
        requests = podset["template"]["spec"]["containers"][0]["resources"]["requests"]
        for res, amount in requests.items():
            used[res] = used.get(res, 0) + podset["replicas"] * float(str(amount).removesuffix("Gi"))
    (system,) = [f for f in group["flavors"] if f["name"] == SYSTEM_NODE_GROUP]
    quota = {r["name"]: float(str(r["nominalQuota"]).removesuffix("Gi")) for r in system["resources"]}
    assert all(used[res] <= quota[res] for res in used), (used, quota)


def test_accelerated_workers_still_take_their_own_flavor() -> None:
    plan = stack_plan("trn1-llama2")
    kueue = [r["inputs"] for r in plan["resources"] if r["type"].startswith("kubernetes:kueue")]
    flavors = [o for o in kueue if o["kind"] == "ResourceFlavor"]
    (queue,) = [o for o in kueue if o["kind"] == "ClusterQueue"]
    order = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]
    flavors.sort(key=lambda f: order.index(f["metadata"]["name"]))
    job = next(r["inputs"] for r in resources(plan, "kubernetes:kubeflow.org/v2beta1:MPIJob"))
    assert _assigned(job["spec"]["mpiReplicaSpecs"]["Worker"], flavors) == "trn1"
    assert _assigned(job["spec"]["mpiReplicaSpecs"]["Launcher"], flavors) == SYSTEM_NODE_GROUP


def test_the_default_queue_counts_the_system_worker_slots() -> None:
    cfg = parse({})
    groups = {
        "trn1": cfg.node_groups[0].node_group("us-west-2d"),
        SYSTEM_NODE_GROUP: cfg.system_node_group.node_group(cfg.availability_zones),
    }
    objs = queue_objects(teams_of({}, groups), groups)
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ResourceFlavor"] == ["trn1", "system"]
    system = instances.GENERAL_PURPOSE["m6i.2xlarge"]
    assert groups[SYSTEM_NODE_GROUP].worker_requests() == {
        "cpu": str(system.vcpus // 4),
        "memory": f"{system.memory_gib // 4}Gi",
    }


# --------------------------------------------------------------------------- the script, run for real


def test_the_script_is_python_3_8_as_the_image_runs() -> None:
    facts = upstream.facts("horovod-cpu-0.28.1")
    assert images.PUBLIC_CPU_IMAGE.endswith(f"{facts['image']}:{facts['tag']}")
    major, minor = (int(x) for x in facts["python"]["version"].split("."))
    ast.parse(ddp_cpu.SCRIPT_SOURCE, feature_version=(major, minor))


def test_the_commands_use_only_what_the_public_image_has() -> None:
    """The worker's sshd, the launcher's ssh and mpirun (the image's, by its path), the ranks'
    torchrun, the gate's getconf: each where the image has it (tests/upstream/horovod-cpu-0.28.1.yaml),
    and mpirun's daemon on sshd's default PATH (Open MPI under /usr/local) as well."""
    programs = upstream.facts("horovod-cpu-0.28.1")["programs"]
    (job,) = [r["inputs"] for r in resources(stack_plan("dev"), "kubernetes:kubeflow.org/v2beta1:MPIJob")]
    specs = job["spec"]["mpiReplicaSpecs"]
    launcher = "\n".join(specs["Launcher"]["template"]["spec"]["containers"][0]["command"])
    worker = "\n".join(specs["Worker"]["template"]["spec"]["containers"][0]["command"])
    assert (
        programs["sshd"] in worker
        and programs["bash"] == specs["Worker"]["template"]["spec"]["containers"][0]["command"][0]
    )
    assert "ssh-keygen -A" in worker
    for name in ("ssh", "torchrun", "getconf"):
        assert re.search(rf"(^|[\s'(]){name}\s", launcher), name
    assert f"MPIRUN='{programs['mpirun']} " in launcher
    sshd_default_path = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    assert programs["orted"].rsplit("/", 1)[0] in sshd_default_path


def test_the_torchrun_line_has_the_shape_of_the_other_recipes() -> None:
    """One torchrun per node through `$MPIRUN bash -c 'cd <dir> && torchrun ...'`, with the flags
    the BERT recipe passes (the launch harness plays that shape)."""

    def torchrun_flags(stack: str) -> set[str]:
        jobs = [r["inputs"] for r in resources(stack_plan(stack), "kubernetes:kubeflow.org/v2beta1:MPIJob")]
        script = next(j for j in jobs if j["metadata"]["name"].endswith("-train"))
        text = script["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
        lines = [ln for ln in text.splitlines() if ln.startswith("$MPIRUN bash -c 'cd /") and "torchrun " in ln]
        assert lines
        return {
            f
            for ln in lines
            for f in re.findall(r"--(?:nproc_per_node|nnodes|node_rank|master_addr|master_port)=\S+", ln)
        }

    assert torchrun_flags("dev") == torchrun_flags("trn1-bert")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(tmp: Path, run: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The launcher's health gate and training phase of a one-node run with /shared at `tmp`,
    and the environment its worker has: `$MPIRUN` is empty, so the per-node command runs here,
    as mpirun would start it on the one worker."""
    tmp.mkdir(parents=True, exist_ok=True)  # the mounted file system
    cfg = parse({"nodes": 1, "processesPerNode": 2, "steps": 12, "checkpointEverySteps": 4, **run})
    wl = cfg.workloads["first"]
    assert isinstance(wl, DdpCpuWorkload)
    group = cfg.system_node_group.node_group(cfg.availability_zones)
    ctx = Context(
        namespace="training", storage_claim="shared-fsx", shared_mount=str(tmp), node_group=group, image="x:1"
    )
    rendered = {**base_env("first", wl, ctx, "first-r1-train"), "NPROC_PER_NODE": str(wl.processes_per_node)}
    script = "set -euo pipefail\nexport MPIRUN=\n" + health_gate(wl, ctx, rendered) + ddp_cpu.launch("first", wl, ctx)
    env = {
        **os.environ,
        **rendered,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",  # torchrun of this venv
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "OMPI_COMM_WORLD_RANK": "0",
        "OMP_NUM_THREADS": "1",
    }
    return script, env


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_gate_fails_a_node_without_the_shared_file_system(tmp_path: Path) -> None:
    script, env = _launch(tmp_path / "shared", {})
    env["SHARED_DIR"] = str(tmp_path / "not-mounted")
    result = _run(script, env)
    assert result.returncode != 0
    assert (
        f"FAIL {socket.gethostname()}: the shared file system is not writable at {tmp_path}/not-mounted"
        in result.stdout
    )
    assert "== training" not in result.stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no PyTorch (requirements-launch.txt)")
def test_it_checkpoints_stops_once_and_resumes_where_it_left_off(tmp_path: Path) -> None:
    script, env = _launch(tmp_path / "resumed", {"interruptOnceAtStep": 5})
    run_dir = Path(env["RUN_DIR"])
    first = _run(script, env)
    assert first.returncode != 0, first.stdout + first.stderr
    assert "OK " in first.stdout and not list(
        Path(env["SHARED_DIR"]).glob(".health-check-*")
    )  # gate passed, probe gone
    assert "stopping once after the checkpoint of step 8" in first.stdout
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step-00000004.pt", "step-00000008.pt"]
    second = _run(script, env)  # the restarted launcher
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed from step 8" in second.stdout
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["resumedFrom"], result["steps"], result["worldSize"]) == (8, 12, 2)

    # The same data for each step on every attempt: the resumed run ends where an uninterrupted
    # one does, computed here in one process (DDP averages the ranks' gradients).
    assert result["loss"] == pytest.approx(_uninterrupted_loss(steps=12, ranks=2), rel=1e-5, abs=1e-6)


def _uninterrupted_loss(steps: int, ranks: int) -> float:
    import torch  # only where PyTorch is installed (requirements-launch.txt)

    module = ast.parse(ddp_cpu.SCRIPT_SOURCE)
    namespace: dict[str, Any] = {}
    keep = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef))]
    exec(compile(ast.Module(body=keep, type_ignores=[]), ddp_cpu.SCRIPT, "exec"), namespace)
    torch.manual_seed(0)
    features = namespace["FEATURES"]
    model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss0 = torch.tensor(0.0)
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        losses = [
            torch.nn.functional.mse_loss(model(x), y) for x, y in (namespace["batch"](step, r) for r in range(ranks))
        ]
        (sum(losses) / ranks).backward()
        optimizer.step()
        loss0 = losses[0]
    return round(float(loss0.item()), 6)
