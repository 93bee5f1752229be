"""Serving a run of a recipe that writes its own Hugging Face export (Megatron Bridge, NxD Llama 3,
TorchTitan Neuron): the conversion Job copies the newest complete export into the served folder
in the form vLLM loads, and a serving run of a training run whose export is off is refused,
naming the training run's key."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import plan_exit, resources, run_plan, stack_values

NS = "llm-training-eks:"
JOB = "kubernetes:batch/v1:Job"

# (stack, training workload, its node group, the export key, the folder the export leaves, weights file)
EXPORTS = [
    ("p5en-megatron-bridge", "sft", "p5en", "export", "hf", "model.safetensors"),
    ("trn1-llama3", "llama3", "trn1", "convertToHuggingFace", "hf/step_100", "checkpoint.pt"),
    ("trn2-torchtitan", "titan", "trn2", "huggingFaceExport", "checkpoints/step-1000", "model-00001.safetensors"),
]


def _served(stack: str, trained: str, group: str, **train_keys: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    workloads = values[NS + "workloads"]
    workloads[trained].update(train_keys)
    workloads["serve"] = {
        "recipe": "vllm-serve",
        "nodeGroup": group,
        "runId": "v1",
        "model": {"workload": trained},
        "replicas": 1,
        "tensorParallel": {"trn1": 32, "trn2": 4}.get(group, 8),
        "maxModelLen": 4096,
        "clients": {"podLabels": {"role": "client"}},
    }
    values.setdefault(NS + "queueing", {}).update(podsReadyTimeoutMinutes=120, recoveryTimeoutMinutes=120)
    return values


def _convert_script(stack: str, trained: str, group: str) -> str:
    plan = run_plan(_served(stack, trained, group), stack)
    (job,) = [r["inputs"] for r in resources(plan, JOB) if r["name"].startswith("serve-convert-")]
    return job["spec"]["template"]["spec"]["containers"][0]["command"][-1]


@pytest.mark.parametrize(("stack", "trained", "group", "key", "folder", "weights"), EXPORTS)
def test_the_conversion_copies_the_runs_own_export_into_a_folder_vllm_loads(
    stack: str, trained: str, group: str, key: str, folder: str, weights: str, tmp_path: Path
) -> None:
    """Play the conversion Job's script on a folder laid out as the run leaves it: an unfinished
    export (no completion mark) is refused, a finished one lands as config.json + weights vLLM
    loads (`*.safetensors` or `pytorch_model*.bin`)."""
    script = _convert_script(stack, trained, group)
    shared = "/shared"
    root = tmp_path / "shared"
    local = script.replace(shared, str(root)).replace("sleep 60", "true")
    run_dir = root / "runs" / trained / "run-001"  # objects.run_dir: /shared/runs/<workload>/<runId>
    trained_marker = next(w for w in local.split() if w.endswith("/.trained"))
    Path(trained_marker).parent.mkdir(parents=True, exist_ok=True)
    Path(trained_marker).touch()
    export = run_dir / folder
    export.mkdir(parents=True)
    # The export's config.json and tokenizer as the Hub repository's (with the special token ids).
    files = {"config.json": '{"bos_token_id": 1, "eos_token_id": 2}', "tokenizer.json": "{}", weights: "x"}
    for name, text in files.items():
        (export / name).write_text(text)
    first = subprocess.run(["bash", "-c", local], capture_output=True, text=True, timeout=60)
    assert first.returncode == 1 and "no complete Hugging Face export" in first.stdout, first.stdout
    _mark_complete(stack, run_dir, export)
    done = subprocess.run(["bash", "-c", local], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    out = root / "serve" / "data" / "models" / f"{trained}-run-001"
    served = {p.name for p in out.iterdir()}
    assert {"config.json", "tokenizer.json", ".done"} <= served, served
    assert any(n.endswith(".safetensors") or (n.startswith("pytorch_model") and n.endswith(".bin")) for n in served)


def _mark_complete(stack: str, run_dir: Path, export: Path) -> None:
    """What each run writes once its export is whole."""
    if stack == "p5en-megatron-bridge":
        (run_dir / ".exported-iter_0000100").touch()
    elif stack == "trn1-llama3":
        (export / ".done").touch()
    else:
        (export / "model.safetensors.index.json").write_text("{}")


@pytest.mark.parametrize(("stack", "trained", "group", "key", "folder", "weights"), EXPORTS)
def test_serving_a_run_whose_export_is_off_is_refused_naming_its_key(
    stack: str, trained: str, group: str, key: str, folder: str, weights: str, tmp_path: Path
) -> None:
    code, err = plan_exit(_served(stack, trained, group, **{key: False}), tmp_path)
    assert code == 2, err
    assert f"workloads.{trained}.{key}" in err and "Traceback" not in err
