"""Every Megatron Bridge program that reads the staged Hub cache offline finds what it reads, as
huggingface-hub 1.24.0 reads a cache offline (tests/upstream/huggingface-hub-1.24.0.yaml
`offline`, played with the real wheel): a snapshot read checks every file of the repository's
cached listing its patterns select, and a revision is resolved by a Hub call.

- The Qwen3 recipes pin a tokenizer revision, so every rank first takes a tokenizer snapshot
  (Megatron Bridge 0.6.0 c9325115, src/megatron/bridge/training/tokenizers/tokenizer.py lines
  47-73, 87-120): staging keeps every file those patterns select (vocab.json and merges.txt too).
- The conversion worker resolves `--hf-revision` before converting (scripts/conversion/
  run_conversion.py lines 121-142, utils.py lines 30-83): an import by HfApi().model_info
  (OfflineModeIsEnabled), an export by a snapshot of every file (IncompleteSnapshotError). Both
  are given the staged snapshot folder instead.
- A failed export leaves no "exported" marker (the launcher would skip it on every restart).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
from pathlib import Path

import pytest

from facts import megatron_bridge as bridge
from facts import needs
from tests import upstream
from tests.unit.test_recipes import built_with
from tests.upstream.arguments import containers, script
from workloads.manifests.objects import Step

BRIDGE = upstream.facts("megatron-bridge-0.6.0")
HUB = upstream.facts("huggingface-hub-1.24.0")
RUNS = [(m, mode) for m in ("llama31_8b", "qwen3_8b") for mode in ("pretrain", "sft")]
# A model repository's files as the Hub lists them (the cached listing offline reads check).
LISTING = [
    ".gitattributes", "LICENSE", "README.md", "config.json", "generation_config.json", "merges.txt",
    "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "vocab.json", "chat_template.jinja", "special_tokens_map.json",
]  # fmt: skip


def _selected(names: list[str], allow: list[str], ignore: list[str]) -> list[str]:
    return [
        n for n in names if any(fnmatch.fnmatch(n, p) for p in allow) and not any(fnmatch.fnmatch(n, p) for p in ignore)
    ]


def _steps(model: str, mode: str) -> list[Step]:
    data = {"data": {"source": "mock"}} if mode == "pretrain" else {}
    return built_with("megatron-bridge", {"model": model, "mode": mode, **data})


def test_the_tokenizer_snapshot_patterns_are_bridges() -> None:
    assert sorted(bridge.HUB_TOKENIZER_SNAPSHOT_PATTERNS) == sorted(BRIDGE["tokenizer_snapshot"]["allow_patterns"])
    assert HUB["offline"]["snapshot_incomplete"] == "IncompleteSnapshotError"
    assert HUB["offline"]["model_info"] == "OfflineModeIsEnabled"


@pytest.mark.parametrize(("model", "mode"), RUNS)
def test_staging_keeps_every_file_a_tokenizer_snapshot_reads(model: str, mode: str) -> None:
    (hub,) = [s for s in _steps(model, mode) if s.role == "hub"]
    text = script(containers([hub.obj])[0][1])
    staged = [p.strip("'") for p in text.split("--include ")[1:]]
    staged = [p.split()[0].strip("'") for p in staged]
    snap = BRIDGE["tokenizer_snapshot"]
    wanted = _selected(LISTING, snap["allow_patterns"], snap["ignore_patterns"])
    missing = [f for f in wanted if not any(fnmatch.fnmatch(f, p) for p in staged)]
    assert not missing, f"{model} {mode}: a tokenizer snapshot offline would miss {missing}"


@pytest.mark.parametrize(("model", "mode"), RUNS)
def test_the_conversion_worker_reads_the_staged_snapshot_folder(model: str, mode: str) -> None:
    folder = f"/shared/hf-hub/{needs.cache_folder(bridge.MODELS[model].hf_repo)}/snapshots/"
    commands = [
        line
        for step in _steps(model, mode)
        for _, c in containers([step.obj])
        for line in script(c).splitlines()
        if "run_conversion.py" in line
    ]
    assert any(" export " in c for c in commands) and any(" import " in c for c in commands) == (mode == "sft")
    for command in commands:
        assert "--hf-revision" not in command, command
        given = command.split("--hf-model ", 1)[1].split(" --megatron-path")[0].strip('"')
        assert given.startswith(folder), command
        revision = bridge.MODELS[model].revision
        assert given == folder + revision if len(revision) == 40 else f"refs/{revision}" in given, command


def test_a_failed_export_leaves_no_marker(tmp_path: Path) -> None:
    (train,) = [s for s in _steps("qwen3_8b", "sft") if s.obj["kind"] == "MPIJob"]
    (launcher,) = [c for role, c in containers([train.obj]) if role == "launcher"]
    export = script(launcher).split('echo "== export to Hugging Face format"\n', 1)[1].split('\necho "== done"')[0]
    bin_dir, ckpt, run_dir = tmp_path / "bin", tmp_path / "ckpt", tmp_path / "run"
    for d in (bin_dir, ckpt, run_dir):
        d.mkdir()
    (ckpt / bridge.TRACKER_FILE).write_text("12")
    fake = bin_dir / "python3"
    fake.write_text("#!/bin/sh\necho 'IncompleteSnapshotError' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MPIRUN": "", "CHECKPOINT_DIR": str(ckpt)}
    done = subprocess.run(["bash", "-c", export], env={**env, "RUN_DIR": str(run_dir)}, capture_output=True, text=True)
    assert done.returncode != 0, done.stdout
    assert not list(run_dir.glob(".exported-*")), "a failed export was marked done"


def test_the_serving_staging_keeps_every_tokenizer_file_and_template() -> None:
    """The siblings: a server's staged model has every tokenizer file and chat template of the
    repository, whatever kind its tokenizer is (the patterns Bridge's tokenizer snapshot reads)."""
    from config.workloads.vllm_serve import HUB_MODEL_PATTERNS

    snap = BRIDGE["tokenizer_snapshot"]
    wanted = _selected(LISTING, [p for p in snap["allow_patterns"] if p != "*.py"], snap["ignore_patterns"])
    assert "chat_template.jinja" in wanted and "merges.txt" in wanted
    missing = [f for f in wanted if not any(fnmatch.fnmatch(f, p) for p in HUB_MODEL_PATTERNS)]
    assert not missing, f"a served model's staging would miss {missing}"
    assert set(needs.HUB_TOKENIZER_PATTERNS) <= set(snap["allow_patterns"])
