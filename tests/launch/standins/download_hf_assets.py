"""Stand-in for TorchTitan's scripts/download_hf_assets.py: its options
(tests/upstream/torchtitan-config-cli.yaml); the repository's file list from the Hub
(list_repo_files), the files whose base name is one of the asked asset kinds' names, each
downloaded from the stand-in Hub (hf_hub_download with local_dir) into
<--local_dir>/<the repo id's name after the slash>/. Over the network: the pod needs egress,
and a gated repository refuses a request without --hf_token."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import _hub
from _common import fail, job, record

facts = job()["torchtitan"]["download_hf_assets"]
p = argparse.ArgumentParser()
p.add_argument("--repo_id", required=True)
p.add_argument("--hf_token")
p.add_argument("--local_dir", default="assets/hf/")
p.add_argument("--assets", nargs="+", default=[])
p.add_argument("--additional_patterns", nargs="+", default=[])
p.add_argument("--all", action="store_true")
a = p.parse_args()
record("download_hf_assets", args=vars(a))
if not a.all and not a.assets and not a.additional_patterns:
    p.error("At least one of --all, --assets or --additional_patterns must be specified.")
if "/" not in a.repo_id:
    fail(f"ValueError: Invalid repo_id format: '{a.repo_id}'. Expected format: 'organization/model-name'")
target = Path(a.local_dir) / a.repo_id.split("/")[-1].strip()
names: set[str] = set()
for kind in a.assets:
    if kind not in facts["assets"]:
        fail(f"ValueError: Unknown asset type {kind}")
    names.update(facts["assets"][kind])
try:
    _, available = _hub.listing("model", a.repo_id, "main", a.hf_token)
    found = [f for f in available if a.all or os.path.basename(f) in names]
    if not found:
        print(f"Warning: No matching files found in {a.repo_id}", flush=True)
    with tempfile.TemporaryDirectory() as cache:  # local_dir downloads keep no shared cache
        for name in found:
            path = _hub.download(Path(cache), "model", a.repo_id, "main", name, a.hf_token)
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / name)
except _hub.HubError as e:
    if e.status == 401:
        print("You need to pass a valid `--hf_token=...` to download private checkpoints.", flush=True)
    fail(f"requests.exceptions.HTTPError: {e}")
except OSError as e:
    fail(f"requests.exceptions.ConnectionError: ({e}); the Hub ({_hub.endpoint()}) cannot be reached")
print(f"Successfully downloaded {len(found)} files to: {target}", flush=True)
