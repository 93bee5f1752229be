"""Stand-in for nemo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py of
neuronx-nemo-megatron 0.8.0: its options, the input JSONL (each line has the --json-keys), a
Hugging Face tokenizer directory, and its outputs `<output prefix>_<key>_document.bin/.idx`
(tests/upstream/training-resume-rules.yaml)."""

from __future__ import annotations

import argparse
import json
import os

from _common import fail, job, record

p = argparse.ArgumentParser()
p.add_argument("--input", required=True)
p.add_argument("--json-keys", nargs="+", default=["text"])
for flag in ("--split-sentences", "--keep-newlines", "--text_file", "--append-eod", "--retrieval-db", "--need-pad-id"):
    p.add_argument(flag, action="store_true")
p.add_argument(
    "--tokenizer-library", required=True, choices=["yttm", "sentencepiece", "megatron", "huggingface", "tabular"]
)
for option in ("--tokenizer-type", "--tokenizer-model", "--vocab-file", "--merge-file", "--delimiter"):
    p.add_argument(option)
p.add_argument("--files-filter", default="**/*.json*")
p.add_argument("--output-prefix", required=True)
p.add_argument("--dataset-impl", default="mmap", choices=["lazy", "cached", "mmap", "retmmap"])
p.add_argument("--workers", type=int, default=1)
p.add_argument("--chunk_size", type=int, default=64)
p.add_argument("--log-interval", type=int, default=100)
p.add_argument("--preproc-folder", action="store_true")
p.add_argument("--apply-ftfy", action="store_true")
a = p.parse_args()
record("preprocess", args=vars(a))
if not os.path.exists(a.input):
    fail(f"AssertionError: File does not exist: {a.input}")
if a.tokenizer_library == "huggingface" and not os.path.isfile(f"{a.tokenizer_type}/tokenizer_config.json"):
    fail(f"OSError: Can't load tokenizer for '{a.tokenizer_type}'")
with open(a.input) as f:
    docs = [json.loads(line) for line in f if line.strip()]
missing = [k for k in a.json_keys for d in docs if k not in d]
if not docs or missing:
    fail(f"KeyError: {missing[:1] or 'no documents'} in {a.input}")
print(f"Output prefix: {a.output_prefix}", flush=True)
for key in a.json_keys:
    for pattern in job()["rules"]["tokenizedFiles"]:
        with open(pattern.format(output_prefix=a.output_prefix, key=key), "w") as f:
            f.write(f"{len(docs)} documents\n")
