"""Stand-in for convert_checkpoints.py of neuronx-distributed v2.28.0 (its CheckpointConverterBase):
its options, parsed with parse_known_args as upstream does, exactly one --convert_* flag, and
--convert_to_full_state reading every TP rank's model file of --input_dir and writing
<--output_dir>/checkpoint.pt."""

from __future__ import annotations

import argparse
import json
import os

from _common import fail, job, record

conv = job()["nxd"]["converter"]
p = argparse.ArgumentParser()
for option in conv["options"]:
    if option.startswith("--convert_"):
        p.add_argument(option, action="store_true")
    else:
        p.add_argument(option, required=option in conv["required"])
a, _ = p.parse_known_args()
record("convert_checkpoints", args=vars(a))
if sum(bool(getattr(a, o.lstrip("-"))) for o in conv["exactly_one_of"]) != 1:
    fail("AssertionError: Exactly one '--convert_*' flag must be specified")
if a.convert_to_full_state:
    for tp in range(int(a.tp_size or 1)):
        path = os.path.join(a.input_dir, f"dp_rank_00_tp_rank_{tp:02d}_pp_rank_00.pt")
        if not os.path.exists(path):
            fail(f"RuntimeError: Error: neither ... nor {path} exist")
    os.makedirs(a.output_dir, exist_ok=True)
    with open(os.path.join(a.output_dir, "checkpoint.pt"), "w") as f:
        json.dump({"from": a.input_dir}, f)
    print(f"Saving full checkpoint to {os.path.join(a.output_dir, 'checkpoint.pt')}", flush=True)
