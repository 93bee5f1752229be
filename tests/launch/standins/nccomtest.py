"""Stand-in for nccom-test (aws-neuronx-tools; tests/upstream/nccom-test-2.29.1.yaml, and the options
of 2.32.0 the fabric acceptance run adds: `-f FACTOR`, `--report-to-json-file PATH`): `-r RANKS
[-N NODES] -b SIZE -e SIZE [-f FACTOR] -d TYPE allr [--hosts H ...] [--report-to-json-file PATH]`. One node: needs RANKS NeuronCores
among this pod's /dev/neuron* devices. Several nodes: needs NEURON_RT_ROOT_COMM_ID set to
`<IP of the first listed host>:<port>`, one host per node, each resolving. Prints a result
table and `Avg bus bandwidth`. Its own MPI launch onto the hosts is not modelled. Like every
Neuron program it starts the runtime first (nrt_init), which refuses a driver its runtime
library cannot use (_common.accelerator_init)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket

from _common import accelerator_init, fail, job, record

p = argparse.ArgumentParser(prog="nccom-test")
p.add_argument("-r", "--nworkers", type=int, required=True)
p.add_argument("-N", "--nnodes", type=int, default=1)
p.add_argument("-b", "--minbytes", default="8")
p.add_argument("-e", "--maxbytes", default="8")
p.add_argument("-f", "--stepfactor", type=int)
p.add_argument("-d", "--datatype", default="fp32")
p.add_argument("--report-to-json-file")
p.add_argument("--hosts", nargs="*", default=[])
p.add_argument("operation")
a = p.parse_args()
facts = job()
record(
    "nccom-test",
    nodes=a.nnodes,
    ranks=a.nworkers,
    hosts=a.hosts,
    host_ip=socket.gethostbyname(socket.gethostname()),
    sizes=[a.minbytes, a.maxbytes],
    report=a.report_to_json_file,
)
accelerator_init()  # nrt_init: the node's Neuron driver against the image's runtime library
if a.nnodes > 1:
    if not os.environ.get("NEURON_RT_ROOT_COMM_ID"):
        fail("nccom-test: NEURON_RT_ROOT_COMM_ID=<first host>:<port> must be set to run on more than one node")
    if len(a.hosts) != a.nnodes:
        fail(f"nccom-test: {len(a.hosts)} hosts for -N {a.nnodes}")
    root, _, port = os.environ["NEURON_RT_ROOT_COMM_ID"].rpartition(":")
    if root != a.hosts[0] or not port.isdigit():
        fail(
            f"nccom-test: NEURON_RT_ROOT_COMM_ID={os.environ['NEURON_RT_ROOT_COMM_ID']} is not <first host {a.hosts[0]}>:<port>"
        )
    for host in a.hosts:
        try:
            socket.gethostbyname(host)
        except OSError:
            fail(f"nccom-test: cannot resolve host {host}")
cores = len(glob.glob("/dev/neuron*")) * int(facts["neuronCoresPerDevice"])
if a.nworkers % a.nnodes or a.nworkers // a.nnodes > cores:
    fail(f"nccom-test: {a.nworkers} workers on {a.nnodes} nodes, {cores} NeuronCores on this one")
bw = float(facts["busBandwidthGBPerSecond"])
print("       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)")
print(f"    {a.maxbytes:>10}    {'-':>12}    {a.datatype}    {1000.0:>8}    {bw:>11.2f}    {bw:>11.2f}")
print(f"Avg bus bandwidth:\t{bw:.4f}GB/s", flush=True)
if a.report_to_json_file:
    with open(a.report_to_json_file, "w") as f:
        json.dump({"results": [{"size(B)": a.maxbytes, "busbw(GB/s)": bw}]}, f)
