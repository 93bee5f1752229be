"""Stand-in for neuron_parallel_compile (torch-neuronx): runs the given training command with
NEURON_EXTRACT_GRAPHS_ONLY=1 (graph extraction), then "compiles" the graphs into the
persistent cache at NEURON_COMPILE_CACHE_URL (neuronxcc-*/MODULE_*/model.neff)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from _common import fail, record

if len(sys.argv) < 2:
    fail("usage: neuron_parallel_compile <command> ...")
cache = os.environ.get("NEURON_COMPILE_CACHE_URL")
if not cache:
    fail("neuron_parallel_compile: NEURON_COMPILE_CACHE_URL is not set; graphs would go to /var/tmp of this pod")
code = subprocess.call(sys.argv[1:], env={**os.environ, "NEURON_EXTRACT_GRAPHS_ONLY": "1"})
if code != 0:
    fail(f"neuron_parallel_compile: the extraction run failed with exit code {code}", code)
module = hashlib.sha1(" ".join(sys.argv[1:]).encode()).hexdigest()[:16]
neff = Path(cache) / "neuronxcc-2.0.0" / f"MODULE_{module}" / "model.neff"
neff.parent.mkdir(parents=True, exist_ok=True)
neff.write_text("neff\n")
record("neuron_parallel_compile", cache=cache, neff=str(neff))
print("INFO: Total graphs: 1\nINFO: Total successful compilations: 1\nINFO: Total failed compilations: 0", flush=True)
