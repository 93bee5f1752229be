"""The staging Job's check of a served Hub model whose shape the plan does not know (pure).

The plan refuses `maxModelLen` above a model's positions and a `tensorParallel` that does not split
its heads where the shape is recorded (facts/served_models.py, config/checks/serving_fit.py). For
any other Hub model the shape is first known when its config.json lands on /shared: the staging
Job reads it there and fails with the reason, naming the stack key and the config.json key, so
`pulumi up` stops at the Job (its log says why) instead of a server that crash-loops after it.

The rules are the plan's (vLLM refuses both at start: a max_model_len above the derived maximum,
heads or KV heads its tensor-parallel size does not divide). A config whose `rope_scaling` has a
`factor` of a kind vLLM stretches the positions by is not refused here: vLLM may accept it.
The check runs at every run of the Job, staged already or not: an edit of `maxModelLen` or
`tensorParallel` re-renders the Job (it is replaced) and checks the new values.
"""

from __future__ import annotations

from config.workloads import VllmServeWorkload
from facts import needs
from facts.served_models import HUB_SHAPES

# Plain Python 3 in the server's image (every vLLM image has it), as a here-document of the Job's bash.
_CHECK = """\
import json, sys
path, key, max_len, tp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = json.load(open(path))
c = c.get("text_config", c) if "num_attention_heads" not in c else c
bad = []
positions = c.get("max_position_embeddings")
scaling = c.get("rope_scaling") or {}
kind = scaling.get("rope_type", scaling.get("type"))
stretched = scaling.get("factor") and kind not in ("default", "llama3", "su", "longrope")
if positions is not None and max_len > positions and not stretched:
    bad.append(f"{key}.maxModelLen: {max_len} is longer than the model's {positions} positions"
               f" (config.json max_position_embeddings); use at most {positions}")
heads = c.get("num_attention_heads")
kv = c.get("num_key_value_heads") or heads
if heads and not (heads % tp == 0 and (kv % tp == 0 if tp <= kv else tp % kv == 0)):
    bad.append(f"{key}.tensorParallel: {tp} does not split the model's {heads} attention heads and {kv}"
               " KV heads evenly (config.json num_attention_heads, num_key_value_heads); vLLM refuses it")
for line in bad:
    print("FAIL: " + line)
sys.exit(1 if bad else 0)
"""


def shape_check(workload_name: str, run: VllmServeWorkload, cache: str) -> str:
    """Bash that reads the staged config.json of the served Hub model under `cache` and fails,
    naming `workloads.<name>.maxModelLen` or `.tensorParallel`, where the model cannot take them;
    "" for a model whose shape is recorded (the plan checked it)."""
    repo = run.model.hub_repo
    if repo is None or repo.repo in HUB_SHAPES:
        return ""
    folder = f"{cache}/{needs.cache_folder(repo.repo)}"
    config = f'"{folder}/snapshots/$(cat {folder}/refs/{repo.revision})/config.json"'
    args = f"{config} workloads.{workload_name} {run.max_model_len} {run.tensor_parallel}"
    return f"python3 - {args} <<'SHAPE'\n{_CHECK}SHAPE\n"
