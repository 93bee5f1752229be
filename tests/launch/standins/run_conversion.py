"""Stand-in for Megatron Bridge 0.6.0's scripts/conversion/run_conversion.py (the in-job worker
of convert.sh): its commands and options, the CPU backend's rules, the Hugging Face repository
read from the staged cache offline (a --hf-revision resolved as main() does: an import by
model_info, an export by a snapshot of every file; a local snapshot folder read as is), an import that writes iteration 0 with Bridge's tracker, an
export that needs a run_config.yaml under --megatron-path, and destinations that must be empty
unless --overwrite. Facts from /harness/job.json (tests/upstream/megatron-bridge-0.6.0.yaml)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import _hub
from _bridge import hub_file, save
from _common import fail, job, record

facts = job()["bridge"]
conv = facts["conversion"]
command, words = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
if command not in conv["commands"]:
    fail(f"run_conversion.py: error: argument command: invalid choice: {command!r}")
flags = {w for w in words if w.startswith("-")}
if flags - set(conv["commands"][command]):
    fail(f"run_conversion.py: error: unrecognized arguments: {sorted(flags - set(conv['commands'][command]))}")
missing = set(conv["required"][command]) - flags
if missing:
    fail(f"run_conversion.py: error: the following arguments are required: {sorted(missing)}")
value = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--") and not words[i + 1].startswith("-")}
if value["--device"] == "cpu" and any(value.get(f, "1") != "1" for f in ("--tp", "--pp", "--ep", "--etp")):
    fail("ValueError: CPU conversion requires TP=PP=EP=ETP=1.")
repo, megatron = value["--hf-model"], Path(value["--megatron-path"])
revision = value.get("--hf-revision")
record("run_conversion", command=command, args=value)
# main(): a --hf-revision (a Hub id only) is resolved before converting, an import's by
# HfApi().model_info, an export's by a snapshot of every file (bridge facts revisionResolution).
local = Path(repo).is_dir()
if revision is not None:
    if local:
        fail("ValueError: --hf-revision applies only to Hugging Face Hub model IDs, not local paths.")
    try:
        if facts["revisionResolution"][command] == "model_info":
            revision = _hub.model_info(repo, revision)
        else:
            repo, local = str(_hub.snapshot_offline(repo, revision, None, None)), True
    except OSError as e:
        fail(str(e))


def read(name: str) -> Path:
    """A file of the model: from the folder given, or the Hub id's cached file at the revision."""
    if not local:
        return hub_file(repo, name, revision or "main")
    found = sorted(Path(repo).glob(name))
    if not found:
        fail(f"OSError: {repo} does not appear to have a file named {name}.")
    return found[0]


def destination(path: Path) -> None:
    if path.exists() and any(path.iterdir()):
        if "--overwrite" not in flags:
            fail(f"FileExistsError: {path} is not empty; pass --overwrite")
        shutil.rmtree(path)
    path.mkdir(parents=True)


if command == "import":
    for name in ("config.json", *facts["tokenizerFiles"], *facts["weightFiles"]):
        read(name)
    destination(megatron)
    save(facts, megatron, 0, -1)
    print(f"CPU import complete: {megatron}", flush=True)
else:
    read("config.json")
    if not megatron.exists():
        fail(f"FileNotFoundError: Megatron checkpoint does not exist: {megatron}")
    if not list(megatron.rglob(facts["runConfig"])):
        fail(
            f"FileNotFoundError: Could not find run_config.yaml in {megatron}. Ensure this is a valid Megatron checkpoint."
        )
    out = Path(value["--hf-path"])
    destination(out)
    (out / "config.json").write_text(read("config.json").read_text())
    (out / "model.safetensors").write_text(f"exported from {megatron}")
    print(f"CPU export complete: {out}", flush=True)
