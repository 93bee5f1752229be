"""The health gate before training: per-node checks on every node (devices, EFA, a short
self-test), then a collective all-reduce that fails below a bus-bandwidth floor."""

from __future__ import annotations

import shlex

from config.workloads import RunConfig
from facts.instances import HEALTH_CHECK_FLOORS
from infra.platform import NodeGroupFacts
from workloads.manifests.mpijob import HOSTFILE, MPIJobSpec, mpijob, mpirun_command
from workloads.manifests.objects import Context, Obj, Step


def node_check(ng: NodeGroupFacts) -> str:
    """Per-node checks, run once on every node before the collective test: the device count
    and the EFA device count the pod was given (against the catalog), then a short
    accelerator self-test. Prints `FAIL <host>: ...` and exits 1 on the first problem.

    Device counts are read from /dev, where the device plugins put exactly what the pod
    was allocated. Self-test: Neuron, a single-node nccom-test all-reduce over every
    NeuronCore (Amazon Search M5's "tensor ops on each device"; HyperPod's nccom local
    test); NVIDIA, DCGM diagnostics level 1 when the image has dcgmi, else a check that no
    GPU reports uncorrectable ECC errors. Not run on hardware in this repository: the
    commands follow the Neuron and DCGM documentation.
    """
    want_dev, want_efa = ng.instance.accelerator_count, ng.instance.efa_interfaces
    if ng.accelerator == "neuron":
        count = "ls /dev/neuron* 2>/dev/null | wc -l"
        kind = "Neuron devices"
        ranks = ng.instance.ranks_per_node
        selftest = (
            f"nccom-test -r {ranks} -b 64M -e 64M -d fp32 allr > /tmp/selftest.out 2>&1"
            ' || { echo "FAIL $h: single-node nccom-test all-reduce failed"; tail -20 /tmp/selftest.out; exit 1; }'
        )
    else:
        count = "nvidia-smi -L | grep -c '^GPU '"
        kind = "GPUs"
        selftest = (
            "if command -v dcgmi >/dev/null; then\n"
            "  nv-hostengine >/dev/null 2>&1 || true\n"
            '  dcgmi diag -r 1 > /tmp/selftest.out 2>&1 || { echo "FAIL $h: dcgmi diag -r 1 failed";'
            " cat /tmp/selftest.out; exit 1; }\n"
            "else\n"
            "  nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits"
            " | awk '$1 + 0 > 0 { bad = 1 } END { exit bad }'"
            ' || { echo "FAIL $h: a GPU reports uncorrectable ECC errors"; exit 1; }\n'
            "fi"
        )
    return (
        "h=$(hostname)\n"
        f"dev=$({count})\n"
        f'[ "$dev" -eq {want_dev} ] || {{ echo "FAIL $h: $dev of {want_dev} {kind}"; exit 1; }}\n'
        "efa=$(ls /dev/infiniband/uverbs* 2>/dev/null | wc -l)\n"
        f'[ "$efa" -eq {want_efa} ] || {{ echo "FAIL $h: $efa of {want_efa} EFA devices"; exit 1; }}\n'
        f"{selftest}\n"
        f'echo "OK $h: {want_dev} {kind}, {want_efa} EFA devices, self-test passed"'
    )


def health_check(workload_name: str, name: str, run: RunConfig, ctx: Context) -> Obj:
    """An MPIJob over the run's nodes: per-node checks on every node (devices, EFA, a short
    self-test), then the collective test, which fails below the bus-bandwidth threshold."""
    ng = ctx.node_group
    default = HEALTH_CHECK_FLOORS[ng.instance.name]
    size = run.health_check.message_size or default.message_size
    floor = run.health_check.min_bus_bandwidth_gbps or default.min_bus_bandwidth_gbps
    total = run.nodes * ng.instance.ranks_per_node
    if ng.accelerator == "neuron":
        test = (
            f'hosts=$(cut -d" " -f1 {HOSTFILE} | tr "\\n" " ")\n'
            f"nccom-test -r {total} -N {run.nodes} -b {size} -e {size} -d fp32 allr --hosts $hosts | tee /tmp/out\n"
            "bw=$(awk '/Avg bus bandwidth/ {v=$NF; sub(/GB\\/s/, \"\", v); print v}' /tmp/out)"
        )
    else:
        per_node = ng.instance.accelerator_count
        test = (
            f"{mpirun_command(run.nodes, per_node, [])}"
            " $(env | cut -d= -f1 | grep -E '^(FI_|NCCL_)' | sed 's/^/-x /' | tr '\\n' ' ')"
            f" /opt/nccl-tests/build/all_reduce_perf -b {size} -e {size} -f 2 -g 1 -c 1 -n 50 | tee /tmp/out\n"
            "bw=$(awk '/Avg bus bandwidth/ {print $NF}' /tmp/out)"
        )
    gate = (
        f'awk -v bw="${{bw:-0}}" -v min={floor:g} \'BEGIN {{ if (bw + 0 < min) {{ printf "FAIL: all-reduce bus'
        f' bandwidth %s GB/s is below %s GB/s\\n", bw, min; exit 1 }}; printf "OK: all-reduce bus bandwidth'
        f" %s GB/s >= %s GB/s\\n\", bw, min }}'"
    )
    launch = f"$MPIRUN bash -c {shlex.quote(node_check(ng))}\n{test}\n{gate}"
    spec = MPIJobSpec(name, "health-check", launch, image=ctx.health_check_image, timeout_seconds=1800)
    return mpijob(workload_name, run, ctx, spec)


def gated_training(
    workload_name: str, run: RunConfig, ctx: Context, train: MPIJobSpec, *, after: tuple[str, ...]
) -> list[Step]:
    """The health check (when enabled) after `after`, then training after it; training is
    never awaited, so `pulumi up` does not block for the run."""
    steps: list[Step] = []
    if run.health_check.enabled:
        health_name = f"{workload_name}-{run.run_id}-healthcheck"
        steps.append(Step(health_name, "healthcheck", health_check(workload_name, health_name, run, ctx), after=after))
        after = (health_name,)
    steps.append(Step(train.name, "train", mpijob(workload_name, run, ctx, train), after=after, awaited=False))
    return steps
