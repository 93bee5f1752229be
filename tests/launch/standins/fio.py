"""Stand-in for fio 3.42 on one node (one mpirun rank per node): checks that every option the
builder passes is one fio 3.42 defines (tests/upstream/fio-3.42.yaml, in the job facts), that it
reads sequentially with O_DIRECT in the directory it was given on /shared, then writes what the
launcher sums: fio's JSON output (`--output`), one `jobs` entry under group_reporting, whose
`read.bw_bytes` is the job facts' `fioReadBytesPerSecond` (the harness's stand-in figure)."""

from __future__ import annotations

import json
import os
import sys

from _common import fail, job, record

facts = job()["fio"]
given = {}
for word in sys.argv[1:]:
    if not word.startswith("--"):
        fail(f"fio: {word!r} is not an option")
    name, _, value = word[2:].partition("=")
    if name not in facts["options"]:
        fail(f"fio: --{name} is not an option of fio 3.42")
    given[name] = value
if given.get("rw") != "read" or given.get("direct") != "1":
    fail(f"fio: sequential O_DIRECT reads expected, got rw={given.get('rw')} direct={given.get('direct')}")
if not os.path.isdir(given.get("directory", "")):
    fail(f"fio: directory {given.get('directory')!r} does not exist (the builder makes it first)")
record("fio", options=given)
bw = int(facts["readBytesPerSecond"])
doc = {"fio version": "fio-3.42", "jobs": [{"jobname": given["name"], "read": {"bw_bytes": bw, "io_bytes": bw * 60}}]}
with open(given["output"], "w") as f:
    json.dump(doc, f)
