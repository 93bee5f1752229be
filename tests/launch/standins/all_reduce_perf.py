"""Stand-in for nccl-tests' all_reduce_perf, one MPI rank: checks the world mpirun made and the
GPUs this pod has, then loads the NCCL net plugin as NCCL does (dlopen of libnccl-net.so,
found through LD_LIBRARY_PATH). Without it NCCL falls back to its socket transport, silently
at NCCL_DEBUG=WARN, and the bandwidth is what TCP gives. At NCCL_DEBUG=INFO every rank logs
`NCCL INFO Using network <name>` (NCCL init.cc; aws-ofi-nccl's network is named "Libfabric":
tests/upstream/aws-ofi-nccl-v1.13.2-aws.yaml), and the plugin logs the provider it selected with
the EFA devices it found: the ones this pod was given (/dev/infiniband/uverbs*). Rank 0 prints the
nccl-tests table and `# Avg bus bandwidth    : <value> ` (nccl-tests src/util.cu), and with `-J
<file>.json` the results as JSON there (nccl-tests 2.18)."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import socket
import sys

from _common import accelerator_init, fail, job, record

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "-1"))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "0"))
local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "0"))
if rank < 0:
    fail("all_reduce_perf: not started by mpirun")
accelerator_init()  # CUDA: the node's NVIDIA driver against the image's CUDA
gpus = len([d for d in glob.glob("/dev/nvidia*") if d[len("/dev/nvidia") :].isdigit()])
if local > gpus:
    fail(f"all_reduce_perf: {local} ranks on this node, {gpus} GPUs")
try:
    ctypes.CDLL("libnccl-net.so")
    transport = "NET/OFI"
except OSError:
    transport = "NET/Socket"
facts = job()
record("all_reduce_perf", rank=rank, size=size, transport=transport)
if os.environ.get("NCCL_DEBUG") == "INFO":
    network = facts["ncclPluginNetwork"] if transport == "NET/OFI" else "Socket"
    local_rank = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    prefix = f"{socket.gethostname()}:{os.getpid()}:{os.getpid()} [{local_rank}]"
    if transport == "NET/OFI":
        line = facts["ofiProviderLine"]
        nics = len(glob.glob("/dev/infiniband/uverbs*"))
        print(f"{prefix} {line % (*('efa', 'efa-direct')[: line.count('%s')], nics)}", flush=True)
    print(f"{prefix} NCCL INFO Using network {network}", flush=True)
if rank == 0:
    bw = float(facts["busBandwidthGBPerSecond"]) if transport == "NET/OFI" else 1.2
    print("#  Rank  0 Group  0 Pid ... on localhost device  0 [0x10] NVIDIA A100-SXM4-80GB")
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong")
    print(f"  2147483648     536870912     float     sum      -1   1000.0   {bw:.2f}   {bw:.2f}      0")
    print("# Out of bounds values : 0 OK")
    print(f"# Avg bus bandwidth    : {bw:g} ", flush=True)
    if "-J" in sys.argv:
        with open(sys.argv[sys.argv.index("-J") + 1], "w") as f:
            json.dump({"average_bus_bandwidth": {"bandwidth": bw, "okay": "unchecked"}}, f)
