"""A crash during a save never poisons the retries: the rendered launcher of every example
stack whose recipe resumes from its newest checkpoint resumes from a complete one.

Each case runs the launcher script's training part as rendered (the shared file system moved to
a temporary directory), with `$MPIRUN` replaced by a stand-in training program that follows the
upstream script (tests/upstream/training-checkpoint-completion.yaml, training-resume-rules.yaml):
the first attempt writes one complete checkpoint and is killed while writing the next; the
retry reports the checkpoint the script's own resume rule would load.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests import upstream
from tests.conftest import EXAMPLE_STACKS, stack_plan, stack_values
from tools import plan as plan_mod

COMPLETION = upstream.facts("training-checkpoint-completion")
RESUME = upstream.facts("training-resume-rules")
SHARED = "/shared"


def _launchers(stack: str, recipe: str) -> list[str]:
    out = []
    for obj in plan_mod.kubernetes_objects(stack_plan(stack)):
        if obj["kind"] == "MPIJob" and obj["metadata"]["name"].endswith("-train"):
            script = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
            if recipe == _recipe(script):
                out.append(script)
    return out


def _recipe(script: str) -> str:
    if "dp_bert_large_hf_pretrain_hdf5.py" in script:
        return "bert"
    return "neuronx" if "+model.save_xser=True" in script else ""


def _stacks(recipe: str) -> list[str]:
    return [s for s in EXAMPLE_STACKS if _launchers(s, recipe)]


def _run(script: str, tmp: Path, stand_in: str) -> subprocess.CompletedProcess[str]:
    training = script[script.index('echo "== training"') :].replace(SHARED, str(tmp))
    fake = tmp / "mpirun"
    fake.write_text("#!/bin/bash\n" + stand_in)
    fake.chmod(0o755)
    env = {**os.environ, "MPIRUN": str(fake)}
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + training], env=env, capture_output=True, text=True, timeout=60
    )


def _checkpoint_dir(script: str, tmp: Path) -> Path:
    """Where the training run writes and resumes: exp_manager's `<explicit_log_dir>/checkpoints`,
    or BERT's `--output_dir` (of the last run of the script: the training, not the precompile)."""
    words = script.replace("'", " ").split()
    logs = [w.split("=", 1)[1] + "/checkpoints" for w in words if w.startswith("exp_manager.explicit_log_dir=")]
    outputs = [w.split("=", 1)[1] for w in words if w.startswith("--output_dir=")]
    return Path((logs or outputs)[-1].replace(SHARED, str(tmp)))


NEURONX_ATTEMPT = """
ckpt={ckpt}
mkdir -p $ckpt/tp_rank_00_pp_rank_000 $ckpt/tp_rank_01_pp_rank_000
for r in 00 01; do
  f=$ckpt/tp_rank_${{r}}_pp_rank_000/megatron_llama--step=100-consumed_samples=25600.0.ckpt
  mkdir -p $f.tensors && echo t > $f.tensors/tensor_0.pt && echo ref > $f
done
echo "{saved}"
sleep 1
for r in 00 01; do
  f=$ckpt/tp_rank_${{r}}_pp_rank_000/megatron_llama--step=200-consumed_samples=51200.0.ckpt
  mkdir -p $f.tensors && echo t > $f.tensors/tensor_0.pt
done
[ $r = 01 ] && echo ref > $f
echo "node lost during the save" >&2; exit 1
"""
# check_resume: the newest *.ckpt by modification time, two levels under checkpoints/.
NEURONX_RESUME = "ls -t {ckpt}/*.ckpt {ckpt}/*/*.ckpt 2>/dev/null | head -1 | xargs -r basename\n"


def _printed(stdout: str) -> list[str]:
    """What the stand-in printed, without the launcher's end-of-run line (`== done`, before the
    `.trained` marker a conversion step waits for)."""
    return [line for line in stdout.strip().splitlines() if line != "== done"]


@pytest.mark.parametrize("stack", _stacks("neuronx"))
def test_neuronx_resumes_from_the_last_fully_saved_checkpoint(stack: str, tmp_path: Path) -> None:
    (script,) = _launchers(stack, "neuronx")
    ckpt = _checkpoint_dir(script, tmp_path)
    saved = COMPLETION["neuronx-nemo-megatron"]["fullyCompletedLogs"][0].format(
        tag="megatron_llama--step=100-consumed_samples=25600.0.ckpt"
    )
    first = _run(script, tmp_path, NEURONX_ATTEMPT.format(ckpt=ckpt, saved=saved))
    assert first.returncode != 0 and saved in first.stdout, first.stdout + first.stderr
    retry = _run(script, tmp_path, NEURONX_RESUME.format(ckpt=ckpt))
    assert retry.returncode == 0, retry.stderr
    assert _printed(retry.stdout)[-1] == "megatron_llama--step=100-consumed_samples=25600.0.ckpt", retry.stdout
    aside = list((tmp_path / ckpt.parent.relative_to(tmp_path) / "incomplete").rglob("*step=200*"))
    assert aside, "the torn checkpoint is kept aside, not deleted"


def _torch_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")


BERT_RESUME = (
    # The script's rule without --resume_ckpt_path: the highest step among *.pt in --output_dir.
    'ls {ckpt} | grep "\\.pt$" | sed "s/ckpt_\\([0-9]*\\).pt/\\1/" | sort -n | tail -1\n'
    "ls {ckpt} | grep -c '\\.pt$'\n"
)


@pytest.mark.parametrize("stack", _stacks("bert"))
def test_bert_resumes_from_a_complete_checkpoint_and_keeps_its_count(stack: str, tmp_path: Path) -> None:
    for script in _launchers(stack, "bert"):
        ckpt = _checkpoint_dir(script, tmp_path)
        ckpt.mkdir(parents=True, exist_ok=True)
        keep = int(next(w for w in script.split() if w.startswith("--num_ckpts_to_keep=")).split("=")[1].strip("'"))
        # Earlier attempts each kept `keep` of their own (the script counts only its own files),
        # then a node was lost while ckpt_900.pt was being written.
        for step in range(100, 100 * (keep + 3), 100):
            _torch_zip(ckpt / f"ckpt_{step}.pt")
        whole = (ckpt / f"ckpt_{100 * (keep + 2)}.pt").read_bytes()
        (ckpt / "ckpt_900.pt").write_bytes(whole[: len(whole) // 2])
        retry = _run(script, tmp_path, BERT_RESUME.format(ckpt=ckpt))
        assert retry.returncode == 0, retry.stderr
        resumed, count = _printed(retry.stdout)[-2:]
        assert resumed == str(100 * (keep + 2)), retry.stdout
        assert int(count) == keep, f"{stack}: {count} checkpoints after the restart, the plan keeps {keep}"


def test_nemo_skips_unfinished_checkpoints_itself() -> None:
    """NeMo r2.0.0rc1 marks a checkpoint unfinished for the length of its save and resumes past
    such ones: the GPU recipe needs no guard of its own (the fact the docs rely on)."""
    nemo = COMPLETION["nemo"]
    assert nemo["skipsUnfinishedOnResume"] and nemo["unfinishedSuffix"] == "-unfinished"
    assert RESUME["nemo"]["resume"] == "last"


def test_each_resuming_recipe_is_covered() -> None:
    recipes = {r.get("recipe") for s in EXAMPLE_STACKS for r in _runs(stack_values(s))}
    assert {"llama2-neuron", "bert-neuron"} <= recipes
    assert _stacks("neuronx") and _stacks("bert")


def _runs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in (values.get("llm-training-eks:workloads") or {}).values() if isinstance(r, dict)]
