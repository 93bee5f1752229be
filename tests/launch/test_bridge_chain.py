"""Megatron Bridge's chain end to end on the local cluster (tests/launch/README.md), for each SFT run
of the example (Llama 3.1 at `main`, Qwen3 at the commit its recipes pin, read offline as
huggingface-hub 1.24.0 reads a cache: the whole listing kept, a tokenizer snapshot and a revision
resolved by the conversion worker checked against it): the Hub staging, the Hugging Face -> Megatron import, fine-tuning that starts from the import, and the
export of the last checkpoint to Hugging Face format; then a launcher restart after the run has
finished, which loads the last checkpoint, trains nothing and leaves the finished export alone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch import plans
from tests.launch.harness import RESUME_LOG, Faults, WorkloadRun
from tests.launch.test_launch_chain import _why_not, tail

if _why_not:
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)

SFT = [
    (s, w)
    for s, w, recipe in plans.workloads()
    if recipe == "megatron-bridge" and "--mode sft" in plans.script(plans.training_job(plans.steps(s, w, 2)))
]


@pytest.fixture(params=SFT, ids=[w for _, w in SFT])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WorkloadRun]:
    stack, workload = request.param
    r = WorkloadRun(tmp_path / workload, stack, workload, 2, False)
    yield r
    r.close()


def _on_shared(run: WorkloadRun, path: str) -> Path:
    return run.shared / path.removeprefix("/shared/")


def test_sft_fine_tunes_the_import_and_exports_its_last_checkpoint_once(run: WorkloadRun) -> None:
    results = run.pipeline(Faults())
    assert all(r.succeeded for r in results), tail(run.log())
    (imp,) = [j["metadata"]["name"] for j in run.jobs if "-import-" in j["metadata"]["name"]]
    (conversion,) = run.records(imp, "run_conversion")
    assert conversion["command"] == "import", conversion
    imported = _on_shared(run, conversion["args"]["--megatron-path"])
    assert (imported / "iter_0000000").is_dir() and (imported / "latest_checkpointed_iteration.txt").read_text() == "0"

    name = run.training["metadata"]["name"]
    log = results[-1].attempts[-1].log
    assert f"Attempting to finetune with checkpoint in {conversion['args']['--megatron-path']}" in log, tail(log)
    assert "lm loss:" in log, tail(log)
    assert {r["resumedFrom"] for r in run.records(name, "bridge")} == {0}
    env = {e["name"]: e.get("value") for e in plans.containers(run.training)["env"]}
    ckpt, run_dir = _on_shared(run, str(env["CHECKPOINT_DIR"])), _on_shared(run, str(env["RUN_DIR"]))
    last = int((ckpt / "latest_checkpointed_iteration.txt").read_text())
    (export,) = run.records(name, "run_conversion")
    assert export["command"] == "export" and export["args"]["--megatron-path"].endswith(f"/iter_{last:07d}"), export
    assert (run_dir / "hf" / "config.json").is_file() and (run_dir / f".exported-iter_{last:07d}").is_file()

    # The launcher restarted after a finished run: it resumes at the last step and exports nothing.
    (again,) = run.pipeline(Faults(max_attempts=1), training_only=True)[-1:]
    log = again.attempts[-1].log
    assert again.succeeded, tail(log)
    assert re.search(re.escape(RESUME_LOG["megatron-bridge"].split("{")[0]), log), tail(log)
    assert "lm loss:" not in log, tail(log)  # no step trained
    assert f"iter_{last:07d} already exported" in log, tail(log)
