"""Stand-in for `huggingface-cli download` of the image's huggingface-hub (0.22.2 under
neuronx-nemo-megatron's `<0.23` pin, else 0.24.5; job facts "hub"): its options, then a real
download from the stand-in Hub over the network (tests/launch/internet.py), which needs the
pod's egress: a gated `meta-llama/` repository refuses a request without a token (HF_TOKEN,
then $HF_HOME/token, read as get_token() does: an unreadable file raises). File names given:
those; else the repository's files matching --include. Into the Hub cache (--cache-dir, else
HF_HUB_CACHE, else $HF_HOME/hub) in the library's layout; with --local-dir also into that
directory, where `--local-dir-use-symlinks auto` (the default) leaves files over 5 MB (here: a
dataset's, corpus shards are hundreds of MB) as symlinks into the pod's own cache, `False` real
files. Prints what it downloaded, as the CLI does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import _hub
from _common import fail, job, record

facts = job()["hub"]
p = argparse.ArgumentParser(prog="huggingface-cli")
sub = p.add_subparsers(dest="command", required=True)
d = sub.add_parser("download")
d.add_argument("repo_id")
d.add_argument("filenames", nargs="*")
for option in facts["download_options"]:
    if option in ("--quiet", "--force-download", "--resume-download"):
        d.add_argument(option, action="store_true")
    elif option in ("--include", "--exclude"):
        d.add_argument(option, nargs="*")
    else:
        d.add_argument(option)
a = p.parse_args()
record("huggingface-cli", args=vars(a))
if a.local_dir_use_symlinks not in (None, *facts["local_dir_use_symlinks_choices"]):
    fail(f"huggingface-cli: --local-dir-use-symlinks {a.local_dir_use_symlinks}: not one of the choices")
home = os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface"))
token_file = Path(facts["token_file"].format(HF_HOME=home))
token = a.token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
token = token or (token_file.read_text().strip() if token_file.exists() else None)
kind = "dataset" if a.repo_type == "dataset" else "model"
cache = Path(a.cache_dir) if a.cache_dir else _hub.cache_dir()
revision = a.revision or "main"
try:
    if a.filenames:
        paths = [_hub.download(cache, kind, a.repo_id, revision, name, token) for name in a.filenames]
    else:
        snapshot = _hub.snapshot(cache, kind, a.repo_id, revision, a.include, token)
        paths = sorted(p for p in snapshot.rglob("*") if p.is_file())
except _hub.HubError as e:
    if e.status == 401:
        fail(f"401 Client Error. Cannot access gated repo for url https://huggingface.co/{a.repo_id}: log in first")
    fail(str(e))
except OSError as e:
    fail(f"requests.exceptions.ConnectionError: ({e}); the Hub ({_hub.endpoint()}) cannot be reached")
if not a.local_dir:
    print(str(paths[0].parent) if paths else str(cache), flush=True)
    sys.exit(0)
symlinks = a.local_dir_use_symlinks or facts["local_dir_use_symlinks_default"]
for path in paths:
    name = path.name
    target = Path(a.local_dir) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    big = kind == "dataset"  # corpus shards are hundreds of MB, tokenizer files under 5 MB
    if symlinks == "True" or (symlinks == "auto" and big):
        target.symlink_to(path.resolve())
    else:
        shutil.copyfile(path, target)
    print(str(target), flush=True)
