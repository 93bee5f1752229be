"""Stand-in for `hf download` of huggingface-hub 1.24.0 (the nemo:26.08 image's;
tests/upstream/huggingface-hub-1.24.0.yaml): its options (one value per repeated --include),
--cache-dir and --local-dir exclusive, offline mode refusing any download, a gated `meta-llama/`
repository refusing a request without a token (HF_TOKEN, or the file HF_TOKEN_PATH names), the
CLI's update-check file written into HF_HOME (which must be writable), and the Hub cache layout:
models--<owner>--<name>/refs/<revision> naming a snapshot that holds the files matching the
patterns (a model repository's config, tokenizer and two weight shards with their index)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path

from _common import fail, job, record

REPO_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "original/consolidated.00.pth",
)
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"

facts = job()["hf"]
if sys.argv[1:2] != ["download"]:
    fail(f"hf: only `hf download` is modelled here, not {sys.argv[1:2]}")
p = argparse.ArgumentParser(prog="hf download")
p.add_argument("repo_id")
p.add_argument("filenames", nargs="*")
for option in facts["options"]:
    if option in facts["repeated"]:
        p.add_argument(option, action="append")
    elif option in ("--force-download", "--dry-run"):
        p.add_argument(option, action="store_true")
    else:
        p.add_argument(option)
a = p.parse_args(sys.argv[2:])
record("hf", args=vars(a))
if a.cache_dir and a.local_dir:
    fail("Cannot use both `--local-dir` and `--cache-dir` at the same time.")
if os.environ.get("HF_HUB_OFFLINE") == "1":
    fail("Cannot reach https://huggingface.co: offline mode is enabled (HF_HUB_OFFLINE=1).")
home = Path(os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")))
try:  # the CLI's update check
    home.mkdir(parents=True, exist_ok=True)
    (home / ".check_for_update_done").write_text("1")
except OSError as e:
    fail(f"hf: {e}")
token_file = Path(os.environ.get("HF_TOKEN_PATH", str(home / "token")))
token = a.token or os.environ.get("HF_TOKEN") or (token_file.read_text().strip() if token_file.exists() else None)
if a.repo_id.startswith("meta-llama/") and not token:
    fail(f"401 Client Error. Cannot access gated repo for url https://huggingface.co/{a.repo_id}: log in first")
cache = Path(a.cache_dir or os.environ.get("HF_HUB_CACHE", str(home / "hub")))
folder = cache / ("models--" + a.repo_id.replace("/", "--"))
revision = a.revision or "main"
names = a.filenames or [n for n in REPO_FILES if any(fnmatch.fnmatch(n, pat) for pat in (a.include or ["*"]))]
snapshot = folder / "snapshots" / COMMIT
snapshot.mkdir(parents=True, exist_ok=True)
for name in names:
    target = snapshot / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"repo": a.repo_id, "file": name}))
(folder / "refs").mkdir(parents=True, exist_ok=True)
(folder / "refs" / revision).write_text(COMMIT)
print(snapshot, flush=True)
