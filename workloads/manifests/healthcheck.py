"""The health gate at the start of every training launch, on the nodes and with the image that
train: per-node checks (devices, EFA, a short self-test), then a collective all-reduce that
fails below a bus-bandwidth floor (and, on GPUs, when NCCL does not use the EFA plugin). A CPU
run (the system node group) checks each node's view of the shared file system instead.

It runs in the training MPIJob's launcher before training, so it tests exactly the nodes
Kueue admitted for training, every time the launcher (re)starts, and a failure fails that
launch at once with `FAIL ...` in the launcher log (no separate job, no timeout to wait out).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from config.workloads import RunConfig
from facts import drivers
from facts.fabric import FLOORS, GATE_ITERS, SELFTEST_SIZE, size_bytes
from facts.nodegroups import NodeGroup
from workloads.manifests.mpijob import (
    HOSTFILE,
    SSH_OPTIONS,
    MPIJobSpec,
    base_env,
    mpijob,
    mpirun_command,
    secret_env_name,
)
from workloads.manifests.network import job_peers
from workloads.manifests.objects import SECRET_ENV, Context, Step, adopt_run_dir, labels, secret, trained_marker

NCCOM_TEST = "/opt/aws/neuron/bin/nccom-test"
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
RUN_AS_ROOT = ("OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
NEURON_ROOT_COMM_PORT = 29400
"""Port of NEURON_RT_ROOT_COMM_ID for the multi-node nccom-test (any free port): outside Linux's
ephemeral range (see mpijob.MASTER_PORT); the Neuron docs' example uses 45654, inside it."""
# What NCCL (init.cc, "Using network %s") logs when aws-ofi-nccl (network name "Libfabric")
# carries the traffic; without the plugin it says "Socket" (tests/upstream/aws-ofi-nccl-v1.13.2-aws.yaml).
NCCL_EFA_EVIDENCE = "Using network Libfabric"
# What aws-ofi-nccl logs once it has chosen a libfabric provider: "Selected Provider is %s (found %d
# nics)" before 1.15.0 and "Selected provider is %s, fabric is %s (found %d nics)" from it (src/
# nccl_ofi_net.c(pp), tests/upstream/aws-ofi-nccl-v1.21.1.yaml); the count is every EFA device the
# rank sees. An extended regular expression for both, case-insensitive.
OFI_PROVIDER_LINE = r"selected provider is efa[^(]*\(found [0-9]+ nics\)"


def cpu_node_check() -> str:
    """Per-node check of a CPU run (the system node group): the shared file system is mounted
    and writable from this node (the FSx CSI mount is what a CPU node can lack). Prints
    `FAIL <host>: ...` and exits 1, or `OK <host>: ...` with the node's online CPUs (getconf,
    which OMP_NUM_THREADS does not change, unlike nproc)."""
    return (
        "h=$(hostname)\n"
        'probe="$SHARED_DIR/.health-check-$h"\n'
        '{ echo "$h" > "$probe" && [ "$(cat "$probe")" = "$h" ] && rm -f "$probe"; }'
        ' || { echo "FAIL $h: the shared file system is not writable at $SHARED_DIR"; exit 1; }\n'
        'echo "OK $h: $SHARED_DIR writable, $(getconf _NPROCESSORS_ONLN) CPUs online"'
    )


def driver_check(ctx: Context) -> str:
    """Per-node: print the node's accelerator driver and hold it to the range the image's runtime
    works with (facts.drivers): the Neuron driver the kernel module reports, against the image's
    Neuron runtime library (driver 2.29 and later need runtime 2.33; nrt_init fails otherwise);
    the NVIDIA driver against the image's CUDA. Unknown runtime (an image this project does not
    describe): printed, not gated. Sets $drv for the OK line."""
    ng, rt = ctx.node_group, ctx.runtime
    if ng.accelerator == "neuron":
        read = f"drv=$(cat {drivers.DRIVER_VERSION_FILE} 2>/dev/null || echo none)"
        kind, runtime = "Neuron", f"Neuron runtime {rt.neuron_runtime}"
        wanted = drivers.neuron_driver_range(rt.neuron_runtime, ng.instance.family) if rt.neuron_runtime else None
    else:
        read = "drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
        kind, runtime = "NVIDIA", f"CUDA {rt.cuda_major}"
        wanted = drivers.nvidia_driver_range(rt.cuda_major) if rt.cuda_major else None
    if wanted is None or wanted.describe() == "any":
        return read

    # The lower of the driver and a bound (sort -V; "2.29" sorts before "2.29.0.0"): the driver is
    # at or past the bound exactly when the bound is the lower one.
    def lower(bound: str) -> str:
        return f'"$(printf \'%s\\n%s\\n\' "$drv" {bound} | sort -V | head -n 1)"'

    tests = [f"[ {lower(wanted.minimum)} = {wanted.minimum} ]" if wanted.minimum else ""]
    tests.append(f"[ {lower(wanted.below)} != {wanted.below} ]" if wanted.below else "")
    fail = (
        f"echo \"FAIL $h: {kind} driver $drv, but the image's {runtime} needs driver {wanted.describe()}"
        " (the node group's AMI release, nodeGroups[].releaseVersion, sets the driver)\"; exit 1"
    )
    return f"{read}\n{{ {' && '.join(t for t in tests if t)}; }} || {{ {fail}; }}"


def node_check(ctx: Context) -> str:
    """Per-node checks, run once on every node: the device count and the EFA device count the
    pod was given (against the catalog), the accelerator driver against the image's runtime,
    then a short accelerator self-test. Prints `FAIL <host>: ...` and exits 1 on the first
    problem.

    Device counts are read from /dev, where the device plugins put exactly what the pod
    was allocated. Self-test: Neuron, a single-node nccom-test all-reduce over every
    NeuronCore (Amazon Search M5's "tensor ops on each device"; HyperPod's nccom local
    test); NVIDIA, DCGM diagnostics level 1 when the image has dcgmi, else a check that no
    GPU reports uncorrectable ECC errors. Not run on hardware in this repository: the
    commands follow the Neuron and DCGM documentation.
    """
    ng = ctx.node_group
    want_dev, want_efa = ng.instance.accelerator_count, ng.instance.efa_interfaces
    if ng.accelerator == "neuron":
        count = "ls /dev/neuron* 2>/dev/null | wc -l"
        kind = "Neuron devices"
        ranks = ng.instance.ranks_per_node
        selftest = (
            f"{NCCOM_TEST} -r {ranks} -b {SELFTEST_SIZE} -e {SELFTEST_SIZE} -d fp32 allr > /tmp/selftest.out 2>&1"
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
    driver = "Neuron driver" if ng.accelerator == "neuron" else "NVIDIA driver"
    return (
        "h=$(hostname)\n"
        f"dev=$({count})\n"
        f'[ "$dev" -eq {want_dev} ] || {{ echo "FAIL $h: $dev of {want_dev} {kind}"; exit 1; }}\n'
        "efa=$(ls /dev/infiniband/uverbs* 2>/dev/null | wc -l)\n"
        f'[ "$efa" -eq {want_efa} ] || {{ echo "FAIL $h: $efa of {want_efa} EFA devices"; exit 1; }}\n'
        f"{driver_check(ctx)}\n"
        f"{selftest}\n"
        f'echo "OK $h: {want_dev} {kind}, {want_efa} EFA devices, {driver} $drv, self-test passed"'
    )


def _neuron_collective(run: RunConfig, ng: NodeGroup, size: str, env: dict[str, str]) -> str:
    """nccom-test across the nodes, started on the first worker (as the Neuron docs say) with
    NEURON_RT_ROOT_COMM_ID set to that worker's IP, by absolute path. nccom-test starts its own
    MPI processes on the hosts, so the session gets the image's PATH and LD_LIBRARY_PATH (the
    launcher runs the same image) and the EFA settings explicitly: ssh gives sshd's defaults."""
    total = ng.placement(run.nodes).ranks
    exported = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k.startswith(("FI_", "CCOM_")))
    # One double-quoted string: $PATH, $LD_LIBRARY_PATH, $root and $ips expand on the launcher.
    # nccom-test runs Open MPI's mpirun itself, as root over ssh: mpirun refuses root unless both
    # variables are set (orterun(1) "Running as root"); our own mpirun passes --allow-run-as-root.
    remote = (
        f"PATH=$PATH LD_LIBRARY_PATH=$LD_LIBRARY_PATH {exported} {' '.join(RUN_AS_ROOT)}"
        f" NEURON_RT_ROOT_COMM_ID=$root:{NEURON_ROOT_COMM_PORT}"
        f" {NCCOM_TEST} -r {total} -N {run.nodes} -b {size_bytes(size)} -e {size_bytes(size)} -d fp32 allr --hosts $ips"
    )
    return (
        f'first=$(head -n 1 {HOSTFILE} | cut -d" " -f1)\n'
        f'ips=$(for w in $(cut -d" " -f1 {HOSTFILE}); do getent hosts "$w" | cut -d" " -f1; done | tr "\\n" " ")\n'
        "root=${ips%% *}\n"
        f'ssh {SSH_OPTIONS} "$first" "{remote}" | tee /tmp/out\n'
        "bw=$(awk '/Avg bus bandwidth/ {v=$NF; sub(/GB\\/s/, \"\", v); print v}' /tmp/out)"
    )


def _nvidia_collective(run: RunConfig, ctx: Context, size: str) -> str:
    """nccl-tests all-reduce, one rank per GPU, with NCCL's log on to prove the EFA plugin is used
    and saw exactly the node's EFA devices (an old EFA device plugin hands p6-b200 pods NVLink
    controllers as EFA devices). The library path goes with the ranks (ssh starts them with
    sshd's environment). The bandwidth is the footer's value after the colon (nccl-tests
    src/util.cu: `# Avg bus bandwidth    : %g %s`, the %s an OK/FAILED only under NCCL_TESTS_MIN_BW)."""
    ng = ctx.node_group
    per_node, want = ng.instance.accelerator_count, ng.instance.efa_interfaces
    return (
        f"{mpirun_command(run.nodes, per_node, [], ctx.mpirun)} -x NCCL_DEBUG=INFO"
        " $(env | cut -d= -f1 | grep -E '^(FI_|NCCL_)' | grep -v '^NCCL_DEBUG$' | sed 's/^/-x /' | tr '\\n' ' ')"
        f" {ALL_REDUCE_PERF} -b {size} -e {size} -f 2 -g 1 -c 1 -n {GATE_ITERS} | tee /tmp/out\n"
        f'grep -q {shlex.quote(NCCL_EFA_EVIDENCE)} /tmp/out || {{ echo "FAIL: NCCL did not use EFA (no'
        f" '{NCCL_EFA_EVIDENCE}' in its log): check aws-ofi-nccl in the image\"; exit 1; }}\n"
        f"nics=$(grep -ioE {shlex.quote(OFI_PROVIDER_LINE)} /tmp/out | head -n 1"
        " | grep -oE '[0-9]+ nics' | cut -d' ' -f1)\n"
        f'[ "${{nics:-0}}" -eq {want} ] || {{ echo "FAIL: aws-ofi-nccl found ${{nics:-no}} EFA devices, a'
        f" {ng.instance.name} has {want}: check the EFA device plugin and the pod's vpc.amazonaws.com/efa\";"
        " exit 1; }\n"
        "bw=$(awk -F': *' '/Avg bus bandwidth/ {split($2, v, \" \"); print v[1]}' /tmp/out)"
    )


def health_gate(run: RunConfig, ctx: Context, env: dict[str, str]) -> str:
    """The launcher script's gate (empty when the run turns the health check off): per-node
    checks on every node through `$MPIRUN`, then the collective test and its floor."""
    if not run.health_check.enabled:
        return ""
    ng = ctx.node_group
    if not ng.accelerated:
        # CPUs: the node checks only; the run's own gloo all-reduce is the collective test.
        per_node = f'[ "${{OMPI_COMM_WORLD_LOCAL_RANK:-0}}" = 0 ] || exit 0\n{cpu_node_check()}'
        return f'echo "== health check: every node"\n$MPIRUN bash -c {shlex.quote(per_node)}\n'
    default = FLOORS[ng.instance.name]
    size = run.health_check.message_size or default.message_size
    floor = run.health_check.min_bus_bandwidth_gb_per_second or default.min_bus_bandwidth_gb_per_second
    basis = (
        "healthCheck.minBusBandwidthGBPerSecond" if run.health_check.min_bus_bandwidth_gb_per_second else default.basis
    )
    collective = (
        _neuron_collective(run, ng, size, env) if ng.accelerator == "neuron" else _nvidia_collective(run, ctx, size)
    )
    gate = (
        f'awk -v bw="${{bw:-0}}" -v min={floor:g} \'BEGIN {{ if (bw + 0 < min) {{ printf "FAIL: all-reduce bus'
        f' bandwidth %s GB/s is below %s GB/s\\n", bw, min; exit 1 }}; printf "OK: all-reduce bus bandwidth'
        f" %s GB/s >= %s GB/s\\n\", bw, min }}'"
    )
    # One check per node, whatever the processes per node of the job's mpirun.
    per_node = f'[ "${{OMPI_COMM_WORLD_LOCAL_RANK:-0}}" = 0 ] || exit 0\n{node_check(ctx)}'
    return (
        'echo "== health check: every node"\n'
        f"$MPIRUN bash -c {shlex.quote(per_node)}\n"
        'echo "== health check: all-reduce across the nodes"\n'
        f"{collective}\necho {shlex.quote(f'floor {floor:g} GB/s: {basis}')}\n{gate}\n"
    )


def training(
    workload_name: str,
    run: RunConfig,
    ctx: Context,
    phases: str,
    *,
    env: Mapping[str, str] | None = None,
    after: tuple[str, ...] = (),
    processes_per_node: int = 1,
) -> list[Step]:
    """The run's training MPIJob: the health gate, then `phases` (precompile, training) in one
    launcher script, restarted up to `maxRetries` times, each start resuming from the latest
    checkpoint. Never awaited: `pulumi up` returns once it is created. Before it, the
    NetworkPolicy that lets its pods reach each other, and the Secret of its `secretEnv`."""
    name = f"{workload_name}-{run.run_id}-train"
    extra = dict(env or {})
    gate = health_gate(run, ctx, {**base_env(workload_name, run, ctx, name), **extra, **run.env})
    # The finished run marks itself, so a conversion for serving knows its checkpoints are final.
    done = f'echo "== done"\ntouch {trained_marker(ctx, workload_name, run.run_id)}\n'
    # A run started before run outputs moved under runs/ resumes from its moved checkpoints: the
    # launcher is the first of a run's steps to write its directory (the Jobs before it write
    # only the workload's data), so it moves the old one before anything else.
    adopt = adopt_run_dir(ctx, workload_name, run.run_id)
    spec = MPIJobSpec(
        name,
        "train",
        adopt + gate + phases + done,
        awaited=False,
        env=extra,
        processes_per_node=processes_per_node,
        backoff_limit=run.max_retries,
    )
    before = [Step(f"{name}-peers", "train", job_peers(name, ctx))]
    if run.secret_env:
        data = {k: f"{SECRET_ENV}{k}" for k in sorted(run.secret_env)}
        before.insert(0, secret(secret_env_name(workload_name), ctx, labels(workload_name, "secret"), "train", data))
    after = (*after, *(step.name for step in before))
    return [*before, Step(name, "train", mpijob(workload_name, run, ctx, spec), after=after, awaited=False)]
