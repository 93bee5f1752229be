"""A served Hub model whose shape the plan does not know is checked by its staging Job.

The plan refuses `maxModelLen` above a recorded model's positions and a `tensorParallel` that does
not split its heads (config/checks/serving_fit.py, facts/served_models.py). For any other Hub model
the staging Job reads the config.json it downloaded and fails with the reason, naming the stack key
and the config.json key (vLLM 0.24.0 refuses both at start: a max_model_len above the model's
max_position_embeddings, and heads or KV heads the tensor-parallel size does not divide; the keys
are transformers' PretrainedConfig names). The test runs the rendered Job script, as planned, with
bash and python3 against a fake staged cache. Over time: the check runs at every run of the Job,
staged already or not, and an edit of maxModelLen replaces the Job, so the new value is checked.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

NS = "llm-training-eks:"
STACK = "trn2-serve"
MODEL = "acme/unrecorded-20b"
"""Not in facts/served_models.py: its shape is unknown at plan time."""


def _values(**server: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    values[f"{NS}workloads"]["qwen"]["model"] = {"hub": MODEL, "revision": "main", "parametersBillions": 20}
    values[f"{NS}workloads"]["qwen"].update(server)
    return values


def _hub_script(plan: dict[str, Any]) -> str:
    (job,) = [r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "Job" and "-hub-" in r["name"]]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/bash", "-c"], command
    return str(command[-1])


def _run_staged(script: str, root: Path, config: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The Job's script with /shared at `root`, the model already staged there (no download)."""
    script = script.replace("/shared/", f"{root}/")
    cache = root / "hf-hub"
    folder = cache / "models--acme--unrecorded-20b"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("c0ffee")
    (folder / "snapshots" / "c0ffee").mkdir(parents=True)
    (folder / "snapshots" / "c0ffee" / "config.json").write_text(json.dumps(config))
    (marker,) = re.findall(r"if \[ -f (\S+) \]", script)
    Path(marker).parent.mkdir(parents=True, exist_ok=True)
    Path(marker).touch()
    return subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, timeout=60)


def _config(positions: int = 32768, heads: int = 32, kv: int = 8) -> dict[str, Any]:
    return {"max_position_embeddings": positions, "num_attention_heads": heads, "num_key_value_heads": kv}


def test_a_max_length_beyond_the_models_positions_fails_the_staging_job(tmp_path: Path) -> None:
    """maxModelLen 8192 (trn2-serve's) against a model of 4096 positions."""
    done = _run_staged(_hub_script(run_plan(_values(), STACK)), tmp_path, _config(positions=4096))
    assert done.returncode == 1, done
    assert "workloads.qwen.maxModelLen: 8192" in done.stdout and "max_position_embeddings" in done.stdout, done


def test_heads_tensor_parallel_does_not_split_fail_it_too(tmp_path: Path) -> None:
    """A 20-head model at TP 8 (the issue's trained 20-head model)."""
    values = _values(tensorParallel=8, replicas=1)
    values[f"{NS}nodeGroups"][0]["instanceType"] = "trn1.32xlarge"  # TP 8: 4 of its devices
    values.setdefault(f"{NS}addons", {})["neuronScheduler"] = True
    done = _run_staged(_hub_script(run_plan(values, STACK)), tmp_path, _config(heads=20, kv=4))
    assert done.returncode == 1, done
    assert "workloads.qwen.tensorParallel: 8" in done.stdout and "num_attention_heads" in done.stdout, done


def test_a_model_that_fits_stages(tmp_path: Path) -> None:
    done = _run_staged(_hub_script(run_plan(_values(), STACK)), tmp_path, _config())
    assert done.returncode == 0 and "FAIL" not in done.stdout, done


def test_a_recorded_model_is_checked_by_the_plan_not_the_job() -> None:
    assert "python3" not in _hub_script(stack_plan(STACK))


def test_a_new_max_length_reruns_the_check_on_the_staged_model() -> None:
    """The edit re-renders the Job, which is replaced and runs again: the model is staged, the
    download is skipped, the check runs."""
    update = day2.diff(run_plan(_values(), STACK), run_plan(_values(maxModelLen=4096), STACK))
    (hub,) = [s for u, s in update.steps.items() if "batch/v1:Job::qwen-hub-" in u]
    assert hub.op == "replace", hub
