"""Stand-in for `hf download` of huggingface-hub 1.24.0 (the nemo:26.08 image's;
tests/upstream/huggingface-hub-1.24.0.yaml, job facts "hf"): its options (one value per repeated
--include), --cache-dir and --local-dir exclusive, the CLI's update-check file written into
HF_HOME (which must be writable), then a real download from the stand-in Hub over the network
(tests/launch/internet.py), which needs the pod's egress and, for a gated `meta-llama/`
repository, a token (HF_TOKEN, or the file HF_TOKEN_PATH names, default $HF_HOME/token). The
files matching --include go into the cache in the library's layout; prints the snapshot."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import _hub
from _common import fail, job, record

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
home = Path(os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")))
try:  # the CLI's update check
    home.mkdir(parents=True, exist_ok=True)
    (home / ".check_for_update_done").write_text("1")
except OSError as e:
    fail(f"hf: {e}")
token_file = Path(os.environ.get("HF_TOKEN_PATH", str(home / "token")))
token = a.token or os.environ.get("HF_TOKEN") or (token_file.read_text().strip() if token_file.exists() else None)
if _hub.offline():
    fail("Cannot download: offline mode is enabled (HF_HUB_OFFLINE=1).")
cache = Path(a.cache_dir) if a.cache_dir else _hub.cache_dir()
try:
    snapshot = _hub.snapshot(cache, "model", a.repo_id, a.revision or "main", a.include, token)
except _hub.HubError as e:
    if e.status == 401:
        fail(f"401 Client Error. Cannot access gated repo for url https://huggingface.co/{a.repo_id}: log in first")
    fail(str(e))
except OSError as e:
    fail(f"httpx.ConnectError: ({e}); the Hub ({_hub.endpoint()}) cannot be reached")
print(snapshot, flush=True)
