"""The fabric acceptance runs (`fabric-gpu`, `fabric-neuron`) of the example stacks: one awaited,
bounded, never-retried MPIJob on the node group with the fabric image, whose launcher checks the
nodes (on a Trn2 UltraServer, that they form whole UltraServers), gates the all-reduce on the
type's floor, sweeps sizes for the record and writes its report; and the config rules around it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from facts import fabric
from tests.conftest import MINIMAL, plan_exit, resources, stack_plan, stack_values
from workloads.manifests import fabric as acceptance
from workloads.manifests.mpijob import WORKER_WAIT_SECONDS

STACKS = {
    "p4d": "fabric-gpu",
    "p5en": "fabric-gpu",
    "p6-b200": "fabric-gpu",
    "p6-b300": "fabric-gpu",
    "trn2": "fabric-neuron",
}
MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def acceptance_job(stack: str) -> dict[str, Any]:
    """The fabric run's MPIJob (p4d also runs fsx-read, another acceptance run)."""
    runs = stack_values(stack)["llm-training-eks:workloads"]
    names = {f"{n}-{r['runId']}-accept" for n, r in runs.items() if r["recipe"].startswith("fabric-")}
    (job,) = [r["inputs"] for r in resources(stack_plan(stack), MPIJOB) if r["name"] in names]
    return job


def launcher_script(job: dict[str, Any]) -> str:
    (c,) = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return str(c["command"][2])


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_acceptance_job_is_awaited_bounded_and_not_retried(stack: str) -> None:
    """`pulumi up` waits for it to succeed, at most the workers' wait and the checks (an hour),
    and a failure is the answer: no launcher restart."""
    runs = stack_values(stack)["llm-training-eks:workloads"].values()
    assert [r["recipe"] for r in runs if r["recipe"].startswith("fabric-")] == [STACKS[stack]]
    job = acceptance_job(stack)
    annotations = job["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "condition=Succeeded"
    assert int(annotations["pulumi.com/timeoutSeconds"]) == acceptance.TIMEOUT_SECONDS > WORKER_WAIT_SECONDS
    assert job["spec"]["runPolicy"]["backoffLimit"] == 0
    image = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    assert ("/gpu-fabric:" if STACKS[stack] == "fabric-gpu" else "/neuron-fabric:") in image


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_launcher_gates_on_the_types_floor_and_reports_it(stack: str) -> None:
    script = launcher_script(acceptance_job(stack))
    ng = stack_values(stack)["llm-training-eks:nodeGroups"][0]
    floor = fabric.FLOORS[ng["instanceType"]]
    assert f"-v min={floor.min_bus_bandwidth_gb_per_second:g} " in script
    assert floor.basis in script and acceptance.REPORT in script
    order = [script.index(s) for s in ("== health check: every node", "all-reduce across the nodes", "sweep", "PASS")]
    assert order == sorted(order)
    if STACKS[stack] == "fabric-gpu":
        assert '-J "$RUN_DIR/all_reduce_perf.json"' in script and "found ${nics:-no} EFA devices" in script
    else:
        assert "--report-to-json-file $RUN_DIR/nccom-test.json" in script and "ULTRASERVER" in script


@needs_bash
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_launcher_script_and_its_per_node_scripts_are_valid_bash(stack: str) -> None:
    script = launcher_script(acceptance_job(stack))
    snippets = [script, *(shlex.split(q)[0] for q in re.findall(r"\$MPIRUN bash -c ('(?:[^']|'\"'\"')*')", script))]
    for text in snippets:
        done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr


def _ultraserver_lines(script: str, tmp_path: Path) -> str:
    """The launcher's UltraServer check after the per-node lines, reading `tmp_path/us`."""
    start = script.index("grep -q ' 0000000000000000 ' /tmp/us")
    end = script.index('echo "OK: ', start)
    return script[start:end].replace("/tmp/us", str(tmp_path / "us"))


@needs_bash
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["a S1 0", "b S1 1", "c S1 2", "d S1 3"], None),
        (["a S1 0", "b S1 1", "c S1 2", "d S2 0"], "UltraServer S1 has 3 of its 4 nodes"),
        (["a S1 0", "b S1 1", "c S1 1", "d S1 3"], "node id S1 1 twice"),
        (["a 0000000000000000 -1", "b S1 1", "c S1 2", "d S1 3"], "a node reports no UltraServer"),
    ],
)
def test_the_four_trn2u_nodes_must_be_one_whole_ultraserver(
    lines: list[str], message: str | None, tmp_path: Path
) -> None:
    """The ids the Neuron UltraServer init script reads (server_id_4, node_id_4): four nodes per
    server id, each node id once, none outside an UltraServer (tests/upstream/nccom-test-2.32.0.yaml)."""
    (tmp_path / "us").write_text("".join(f"ULTRASERVER {ln}\n" for ln in lines))
    check = _ultraserver_lines(launcher_script(acceptance_job("trn2")), tmp_path)
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{check}"], capture_output=True, text=True)
    assert (done.returncode == 0) == (message is None), done.stdout
    assert message is None or message in done.stdout


@needs_bash
def test_the_report_is_json_with_the_measured_and_the_floor(tmp_path: Path) -> None:
    script = launcher_script(acceptance_job("p6-b300"))
    start = script.index("printf '{")
    report = script[start : script.index('echo "PASS', start)]
    done = subprocess.run(
        ["bash", "-c", f"bw=601.2\nRUN_DIR={tmp_path}\n{report}"], capture_output=True, text=True, check=True
    )
    doc = json.loads((tmp_path / acceptance.REPORT).read_text())
    assert doc == json.loads(done.stdout)
    floor = fabric.FLOORS["p6-b300.48xlarge"]
    assert (doc["instanceType"], doc["nodes"], doc["busBandwidthGBPerSecond"]) == ("p6-b300.48xlarge", 2, 601.2)
    assert (doc["floorGBPerSecond"], doc["floorBasis"], doc["messageSize"]) == (
        floor.min_bus_bandwidth_gb_per_second,
        floor.basis,
        floor.message_size,
    )


# --------------------------------------------------------------------------- config


def _values(recipe: str, itype: str, **run: Any) -> dict[str, Any]:
    ng = {"name": "g", "instanceType": itype, "desiredSize": 4, "availabilityZone": "us-west-2d"}
    wl = {"recipe": recipe, "nodeGroup": "g", "nodes": 2, "runId": "a1", **run}
    return {**MINIMAL, "llm-training-eks:nodeGroups": [ng], "llm-training-eks:workloads": {"fab": wl}}


@pytest.mark.parametrize(
    ("recipe", "itype", "run", "message"),
    [
        ("fabric-gpu", "p5.48xlarge", {"nodes": 1}, "workloads.fab.nodes"),
        ("fabric-gpu", "p5.48xlarge", {"healthCheck": {"enabled": False}}, "workloads.fab.healthCheck.enabled"),
        ("fabric-gpu", "p5.48xlarge", {"maxRetries": 2}, "workloads.fab.maxRetries"),
        ("fabric-gpu", "trn2.48xlarge", {}, "workloads.fab"),
        ("fabric-neuron", "trn2u.48xlarge", {"nodes": 2}, "workloads.fab.nodes: 2 is not a multiple of 4"),
    ],
)
def test_what_the_acceptance_run_refuses(
    recipe: str, itype: str, run: dict[str, Any], message: str, tmp_path: Path
) -> None:
    code, err = plan_exit(_values(recipe, itype, **run), tmp_path)
    assert code == 2 and message in err, err


@pytest.mark.parametrize(
    ("recipe", "itype"),
    [("fabric-gpu", "p4de.24xlarge"), ("fabric-neuron", "trn1.32xlarge"), ("fabric-neuron", "trn2.48xlarge")],
)
def test_the_acceptance_run_plans_on_every_generation(recipe: str, itype: str, tmp_path: Path) -> None:
    """The fabric images cover every GPU of the catalog (sm_80 to sm_103) and the Neuron SDK of
    theirs supports trn1 and trn2; no PyTorch/XLA, so SDK 2.32 is no training refusal."""
    code, err = plan_exit(_values(recipe, itype), tmp_path)
    assert code == 0, err
