"""Recipe `fsx-read`: the shared file system's read acceptance (config/workloads/fsx_read.py). With
the image of images/fio (fio 3.42 on Horovod's CPU image), on every node of the run at once
(one mpirun rank per node): fio lays out `jobsPerNode` files of `fileSizeGib` in the run's
directory on /shared, reads them back with O_DIRECT (so the node's page cache, which holds what it
just wrote, does not answer) for `readSeconds` after a ramp, writes its JSON and deletes its files.
The launcher sums the nodes' read bytes per second (fio's `bw_bytes`) and passes when the sum
reaches `minShare` of the file system's provisioned throughput (capacity TiB x MB/s per TiB).

`pulumi up` waits for it (condition Succeeded, bounded); the report, `fsx-read.json` in the run's
directory, says what was measured against what. Options and JSON fields: tests/upstream/fio-3.42.yaml.
"""

from __future__ import annotations

import shlex

from config.workloads.fabric import CHECKS_SECONDS
from config.workloads.fsx_read import BLOCK_SIZE, RAMP_SECONDS, FsxReadRun
from workloads.manifests.fabric import acceptance_steps
from workloads.manifests.mpijob import WORKER_WAIT_SECONDS
from workloads.manifests.objects import Context, Step

MODEL = FsxReadRun
REPORT = "fsx-read.json"
FIO = "/usr/local/bin/fio"
"""Where images/fio installs fio (its `make install`, prefix /usr/local)."""
TIMEOUT_SECONDS = WORKER_WAIT_SECONDS + CHECKS_SECONDS
"""What `pulumi up` waits at most: the workers' wait, then the reads (their model must fit: problems_on)."""
# Sums every node's JSON: fio 3.42's jobs[].read.bw_bytes (bytes/s; group_reporting: one entry per node).
SUM = (
    "import glob, json, sys; found = glob.glob(sys.argv[1] + '/*.json'); print(len(found),"
    ' round(sum(j["read"]["bw_bytes"] for f in found for j in json.load(open(f))["jobs"]) / 1e6))'
)


def fio_command(run: FsxReadRun) -> str:
    """One node's fio job, then its files deleted (a later run lays out its own; /shared keeps only the JSON)."""
    options = [
        "--name=read",
        '--directory="$d"',
        "--rw=read",
        f"--bs={BLOCK_SIZE}",
        f"--size={run.file_size_gib}G",
        f"--numjobs={run.jobs_per_node}",
        "--ioengine=psync",
        "--direct=1",
        f"--ramp_time={RAMP_SECONDS}",
        f"--runtime={run.read_seconds}",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
        '--output="$d.json"',
    ]
    run_fio = f"{FIO} {' '.join(options)} || rc=$?"
    return f'd="$RUN_DIR/reads/$(hostname)"; mkdir -p "$d"; rc=0; {run_fio}; rm -rf "$d"; exit $rc'


def read_script(workload_name: str, run: FsxReadRun, ctx: Context) -> str:
    """The launcher's script: fio on every node at once, the sum against the provisioned throughput, the report."""
    it = ctx.node_group.instance
    provisioned = round(ctx.file_system_mb_per_second)
    floor = round(provisioned * run.min_share)
    header = (
        f"== fsx-read: {run.nodes} x {it.name} ({run.node_group}), {run.jobs_per_node} read jobs each;"
        f" provisioned {provisioned} MB/s, pass at >= {floor} MB/s ({run.min_share:g})"
    )
    fields = (
        f'"nodeGroup": "{run.node_group}", "nodes": %s, "jobsPerNode": {run.jobs_per_node},'
        f' "readMBPerSecond": %s, "provisionedMBPerSecond": {provisioned}, "minShare": {run.min_share:g},'
        ' "passed": true'
    )
    return (
        f"echo {shlex.quote(header)}\n"
        # A replaced MPIJob plays again in the same directory: an earlier play's JSON (of a worker
        # this play may not have) would be summed with this one's.
        f'rm -rf "$RUN_DIR/reads" "$RUN_DIR/{REPORT}"\nmkdir -p "$RUN_DIR/reads"\n'
        f"$MPIRUN bash -c {shlex.quote(fio_command(run))}\n"
        f'sums=$(python -c {shlex.quote(SUM)} "$RUN_DIR/reads")\n'
        'n=$(echo "$sums" | cut -d" " -f1); mb=$(echo "$sums" | cut -d" " -f2)\n'
        f'[ "$n" -eq {run.nodes} ] || {{ echo "FAIL: $n of {run.nodes} nodes reported"; exit 1; }}\n'
        f'[ "$mb" -ge {floor} ] || {{ echo "FAIL: the nodes read $mb MB/s, under {floor} MB/s'
        f' ({run.min_share:g} of {provisioned} provisioned)"; exit 1; }}\n'
        f'printf {shlex.quote("{" + fields + "}" + chr(10))} "$n" "$mb" > "$RUN_DIR/{REPORT}"\n'
        f'cat "$RUN_DIR/{REPORT}"\n'
        f'echo "PASS fsx-read: {run.nodes} x {it.name} read $mb MB/s >= {floor} MB/s"\n'
    )


def steps(workload_name: str, run: FsxReadRun, ctx: Context) -> list[Step]:
    """Image check -> the read MPIJob, awaited (and its NetworkPolicy before it)."""
    return acceptance_steps(workload_name, run, ctx, read_script(workload_name, run, ctx), TIMEOUT_SECONDS)
