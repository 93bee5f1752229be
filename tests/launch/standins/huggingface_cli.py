"""Stand-in for `huggingface-cli download` of the image's huggingface-hub (0.22.2 under
neuronx-nemo-megatron's `<0.23` pin, tests/upstream/huggingface-hub-0.22.2.yaml; 0.27.1 in
images/neuronx-distributed, which copies files whatever --local-dir-use-symlinks says): its options,
a gated `meta-llama/` repository refusing a request without a token, and `--local-dir` with
`--local-dir-use-symlinks auto` (the default) leaving files over 5 MB as symlinks into the
pod's own cache (HF_HOME, default ~/.cache/huggingface), real files with `False`. Files: the
ones named, or for a dataset a few JSONL files of the size of real corpus shards."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
from pathlib import Path

from _common import fail, job, record

facts = job()["huggingface"]
p = argparse.ArgumentParser(prog="huggingface-cli")
sub = p.add_subparsers(dest="command", required=True)
d = sub.add_parser("download")
d.add_argument("repo_id")
d.add_argument("filenames", nargs="*")
for option in facts["download_options"]:
    if option == "--quiet" or option in facts.get("flags_without_value", []):
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
token_file = Path(facts["token_file"].format(HF_HOME=home))  # read as get_token() does: an unreadable one raises
token = a.token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
token = token or (token_file.read_text().strip() if token_file.exists() else None)
if a.repo_id.startswith("meta-llama/") and not token:
    fail(f"401 Client Error. Cannot access gated repo for url https://huggingface.co/{a.repo_id}: log in first")
if a.repo_type == "dataset":
    names = [n for n in ("part-00000.jsonl", "part-00001.jsonl") if fnmatch.fnmatch(n, (a.include or ["*"])[0])]
    big = True  # corpus shards are hundreds of MB
elif a.filenames:
    names, big = a.filenames, False  # tokenizer files are under 5 MB
else:  # a model repository's files that --include matches
    files = ("tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors")
    names, big = [n for n in files if any(fnmatch.fnmatch(n, pat) for pat in (a.include or ["*"]))], False
symlinks = a.local_dir_use_symlinks or facts["local_dir_use_symlinks_default"]
hub = os.environ.get("HF_HUB_CACHE", facts["cache_env"]["HF_HUB_CACHE"].format(HF_HOME=home))
cache = Path(hub) / a.repo_id.replace("/", "--")
for name in names:
    content = "".join(json.dumps({"text": f"document {i} of {name}"}) + "\n" for i in range(3))
    target = Path(a.local_dir) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if symlinks == "True" or (symlinks == "auto" and big):
        blob = cache / "blobs" / name
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(content)
        target.unlink(missing_ok=True)
        target.symlink_to(blob)
    else:
        target.write_text(content)
    print(str(target), flush=True)
