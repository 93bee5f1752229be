"""Stand-in for get_dataset.py of neuronx-distributed v2.28.0 (examples/training/llama): its one option,
the corpus from the Hub (datasets.load_dataset(wikicorpus, raw_en): its loading script is fetched
from the stand-in Hub, so the pod needs egress), the tokenizer read from the working directory
(AutoTokenizer.from_pretrained(os.getcwd()): the tokenizer files must be there), and the tokenized
blocks saved under ~/examples_datasets/wikicorpus_llama3_tokenized_8k (HOME decides where)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import _hub
from _common import fail, job, record

p = argparse.ArgumentParser()
p.add_argument("--llama-version", type=int, default=3)
a = p.parse_args()
record("get_dataset", args=vars(a))
dataset = job()["nxd"]["data"]["get_dataset"]["dataset"][0]
try:
    with tempfile.TemporaryDirectory() as cache:
        _hub.snapshot(Path(cache), "dataset", dataset, "main", [f"{dataset}.py"], None)
except OSError as e:
    fail(f"ConnectionError: Couldn't reach '{dataset}' on the Hub ({e})")
if not os.path.exists(os.path.join(os.getcwd(), "tokenizer_config.json")):
    fail(f"OSError: Can't load tokenizer for '{os.getcwd()}': no tokenizer files in the working directory")
out = os.path.expanduser(f"~/{job()['rules']['tokenizedDir']}")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "dataset_info.json"), "w") as f:
    json.dump({"block_size": 8192 if a.llama_version == 3 else 4096}, f)
print(len(range(16)), flush=True)
