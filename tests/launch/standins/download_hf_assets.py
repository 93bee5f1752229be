"""Stand-in for TorchTitan's scripts/download_hf_assets.py: its options
(tests/upstream/torchtitan-config-cli.yaml), and the asset files of each kind written under
<--local_dir>/<the repo id's name after the slash>/."""

from __future__ import annotations

import argparse
import json
import os

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
if "/" not in a.repo_id:
    fail(f"ValueError: Invalid repo_id format: '{a.repo_id}'. Expected format: 'organization/model-name'")
target = os.path.join(a.local_dir, a.repo_id.split("/")[-1].strip())
os.makedirs(target, exist_ok=True)
for kind in a.assets:
    if kind not in facts["assets"]:
        fail(f"ValueError: Unknown asset type {kind}")
    for name in facts["assets"][kind][:2]:  # the first files of a kind (the repo has them)
        with open(os.path.join(target, name), "w") as f:
            json.dump({"repo": a.repo_id, "file": name}, f)
print(f"downloaded {a.assets} of {a.repo_id} to {target}", flush=True)
