"""What the fabric acceptance recipes render (their modules: fabric_gpu.py, fabric_neuron.py): the
run a platform team starts on new capacity before anything trains on it. On the node group's
nodes, with the fabric image of images/gpu-fabric or images/neuron-fabric: the per-node checks of
the training gate (devices, EFA devices, a self-test), on a Trn2 UltraServer each node's
UltraServer ids, then the all-reduce across the nodes against the instance type's floor, a size
sweep for the record, and a report.

`pulumi up` waits for it (condition Succeeded, bounded): on failure the launcher log says which
node or which measurement failed, and nothing after it in the stack is created. The report,
`fabric-acceptance.json` in the run's directory on /shared, says what was measured against what.
"""

from __future__ import annotations

import shlex

from config.workloads.base import AcceptanceRun
from config.workloads.fabric import CHECKS_SECONDS, FabricAcceptanceRun
from facts import fabric
from workloads.manifests.healthcheck import ALL_REDUCE_PERF, NCCOM_TEST, NEURON_ROOT_COMM_PORT, health_gate
from workloads.manifests.mpijob import (
    SSH_OPTIONS,
    WORKER_WAIT_SECONDS,
    MPIJobSpec,
    base_env,
    mpijob,
    mpirun_command,
)
from workloads.manifests.network import job_peers
from workloads.manifests.objects import Context, Step, image_check

REPORT = "fabric-acceptance.json"
TIMEOUT_SECONDS = WORKER_WAIT_SECONDS + CHECKS_SECONDS
"""What `pulumi up` waits at most: the workers' wait (a node replaced meanwhile), then the checks."""
# Where the Neuron runtime exposes a trn2u node's UltraServer ids for the 4-node configuration
# (the Neuron UltraServer init script reads them: tests/upstream/nccom-test-2.32.0.yaml).
SERVER_ID, NODE_ID = "/sys/class/neuron_device/server_id_4", "/sys/class/neuron_device/node_id_4"
NO_SERVER = "0000000000000000"


def ultraserver_check(ctx: Context, nodes: int) -> str:
    """On UltraServer members: every node reports its UltraServer (server id and node id of the
    4-node configuration), and the nodes form whole UltraServers, four to a server id with four
    different node ids. Empty for other instance types."""
    us = ctx.node_group.instance.ultraserver
    if us is None:
        return ""
    per_node = (
        '[ "${OMPI_COMM_WORLD_LOCAL_RANK:-0}" = 0 ] || exit 0\n'
        f"s=$(cat {SERVER_ID} 2>/dev/null || echo {NO_SERVER}); n=$(cat {NODE_ID} 2>/dev/null || echo -1)\n"
        'echo "ULTRASERVER $(hostname) $s $n"'
    )
    return (
        'echo "== UltraServers: every node in a whole one"\n'
        f"$MPIRUN bash -c {shlex.quote(per_node)} | tee /tmp/us\n"
        f"grep -q ' {NO_SERVER} ' /tmp/us && {{ echo \"FAIL: a node reports no UltraServer (no {SERVER_ID}):"
        f' not a {us.ultraserver_type} member in its {us.instances}-node configuration"; exit 1; }}\n'
        f'awk \'$1 == "ULTRASERVER" {{ n[$3]++; ids[$3 " " $4]++ }} END {{ for (s in n) if (n[s] != {us.instances})'
        f' {{ printf "FAIL: UltraServer %s has %d of its {us.instances} nodes in this run\\n", s, n[s]; bad = 1 }};'
        f' for (k in ids) if (ids[k] > 1) {{ printf "FAIL: node id %s twice\\n", k; bad = 1 }}; exit bad }}\' /tmp/us\n'
        f'echo "OK: {nodes // us.instances} whole {us.ultraserver_type} UltraServer(s)"'
    )


def sweep(run: FabricAcceptanceRun, ctx: Context, size: str, env: dict[str, str]) -> str:
    """The all-reduce from fabric.SWEEP_FROM up to the gated size, doubling, kept as JSON in the run's
    directory for the record (nccl-tests -J, nccom-test --report-to-json-file); not gated."""
    ng = ctx.node_group
    if ng.accelerator == "nvidia":
        per_node = ng.instance.accelerator_count
        return (
            f"{mpirun_command(run.nodes, per_node, [], ctx.mpirun)}"
            " $(env | cut -d= -f1 | grep -E '^(FI_|NCCL_)' | sed 's/^/-x /' | tr '\\n' ' ')"
            f" {ALL_REDUCE_PERF} -b {fabric.SWEEP_FROM} -e {size} -f 2 -g 1 -c 1 -n {fabric.SWEEP_ITERS}"
            ' -J "$RUN_DIR/all_reduce_perf.json"'
        )
    total = ng.placement(run.nodes).ranks
    exported = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k.startswith(("FI_", "CCOM_")))
    remote = (
        f"PATH=$PATH LD_LIBRARY_PATH=$LD_LIBRARY_PATH {exported} NEURON_RT_ROOT_COMM_ID=$root:{NEURON_ROOT_COMM_PORT}"
        f" {NCCOM_TEST} -r {total} -N {run.nodes} -b {fabric.SWEEP_FROM} -e {size} -f 2 -d fp32 allr --hosts $ips"
        f" --report-to-json-file $RUN_DIR/nccom-test.json"
    )
    # $first, $ips and $root are the launcher's, set by the gate's nccom-test just before.
    return f'ssh {SSH_OPTIONS} "$first" "{remote}"'


def report(run: FabricAcceptanceRun, ctx: Context, size: str, floor: float, basis: str) -> str:
    """`fabric-acceptance.json` in the run's directory: instance type, nodes, size, measured and
    floor bus bandwidth, where the floor comes from, passed."""
    it = ctx.node_group.instance
    fields = (
        f'"instanceType": "{it.name}", "nodeGroup": "{run.node_group}", "nodes": {run.nodes},'
        f' "messageSize": "{size}", "busBandwidthGBPerSecond": %s, "floorGBPerSecond": {floor:g}, "floorBasis": "%s",'
        ' "passed": true'
    )
    return (
        f'printf {shlex.quote("{" + fields + "}" + chr(10))} "$bw" {shlex.quote(basis)}'
        f' > "$RUN_DIR/{REPORT}"\n'
        f'cat "$RUN_DIR/{REPORT}"\n'
        f'echo "PASS fabric acceptance: {run.nodes} x {it.name}, all-reduce bus bandwidth $bw GB/s at {size}'
        f' >= {floor:g} GB/s"'
    )


def acceptance_script(workload_name: str, run: FabricAcceptanceRun, ctx: Context, env: dict[str, str]) -> str:
    """The launcher's script: the UltraServer check, the training gate, the sweep, the report."""
    it = ctx.node_group.instance
    floor_fact = fabric.FLOORS[it.name]
    size = run.health_check.message_size or floor_fact.message_size
    floor = run.health_check.min_bus_bandwidth_gb_per_second or floor_fact.min_bus_bandwidth_gb_per_second
    basis = (
        "healthCheck.minBusBandwidthGBPerSecond"
        if run.health_check.min_bus_bandwidth_gb_per_second
        else floor_fact.basis
    )
    header = (
        f"== fabric acceptance: {run.nodes} x {it.name} ({run.node_group}); floor {floor:g} GB/s at {size}: {basis}"
    )
    parts = [
        f'echo {shlex.quote(header)}\nmkdir -p "$RUN_DIR"',
        ultraserver_check(ctx, run.nodes),
        health_gate(run, ctx, env).rstrip("\n"),
        'echo "== all-reduce sweep for the record"',
        sweep(run, ctx, size, env) if run.sweep else 'echo "(sweep off)"',
        report(run, ctx, size, floor, basis),
    ]
    return "\n".join(p for p in parts if p) + "\n"


def acceptance_steps(workload_name: str, run: AcceptanceRun, ctx: Context, script: str, timeout: int) -> list[Step]:
    """Image check -> an acceptance MPIJob running `script`, awaited up to `timeout` (and its
    NetworkPolicy before it): what every acceptance recipe renders (fabric-*, fsx-read)."""
    name = f"{workload_name}-{run.run_id}-accept"
    image = image_check(workload_name, ctx, run)
    spec = MPIJobSpec(
        name,
        "accept",
        script,
        awaited=True,
        timeout_seconds=timeout,
        backoff_limit=0,  # a failed acceptance is the answer, not something to retry
    )
    peers = Step(f"{name}-peers", "accept", job_peers(name, ctx))
    return [image, peers, Step(name, "accept", mpijob(workload_name, run, ctx, spec), after=(image.name, peers.name))]


def steps(workload_name: str, run: FabricAcceptanceRun, ctx: Context) -> list[Step]:
    """Image check -> the acceptance MPIJob, awaited (and its NetworkPolicy before it)."""
    env = base_env(workload_name, run, ctx, f"{workload_name}-{run.run_id}-accept")
    return acceptance_steps(workload_name, run, ctx, acceptance_script(workload_name, run, ctx, env), TIMEOUT_SECONDS)
