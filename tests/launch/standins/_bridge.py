"""What the Megatron Bridge stand-ins share: a Hub repository's files read as transformers reads
them (the shared client, _hub.py: offline the cache only, online a download that falls back to
the cache when the pod cannot connect), and Bridge's checkpoint layout (iter_NNNNNNN directories,
the tracker file, latest_train_state.pt, run_config.yaml) from the facts the harness hands over
(tests/upstream/megatron-bridge-0.6.0.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _hub
from _common import fail


def hub_file(repo: str, name: str, revision: str = "main") -> Path:
    """A file of `repo` (a pattern: the first match in the cached snapshot, as the safetensors
    index lists the shards), or the OSError transformers raises."""
    if "*" in name:
        cache = _hub.cache_dir()
        found = _hub.cached(cache, "model", repo, revision, "config.json")
        matches = sorted(found.parent.glob(name)) if found else []
        if not matches:
            fail(_hub.facts()["missing_error"].format(endpoint=_hub.endpoint(), repo_id=repo, filename=name))
        return matches[0]
    try:
        path = _hub.cached_file(repo, name, revision=revision)
    except OSError as e:
        fail(f"OSError: {e}")
    assert path is not None
    return path


def iteration_dir(facts: dict[str, Any], root: Path, step: int) -> Path:
    return root / facts["iterationDir"].replace("{:07d}", f"{step:07d}")


def latest(facts: dict[str, Any], root: Path) -> int | None:
    """The step Bridge's tracker names in `root`, or None when it has no checkpoint."""
    tracker = root / facts["tracker"]
    return int(tracker.read_text().strip()) if tracker.exists() else None


def save(facts: dict[str, Any], root: Path, step: int, keep: int) -> Path:
    """Rank 0's part of a synchronous save: the iteration directory with its run_config.yaml,
    then the train state and the tracker, then every iter_* but the `keep` newest deleted (rglob
    under the save directory, as cleanup_old_non_persistent_checkpoint does; keep -1 keeps all)."""
    d = iteration_dir(facts, root, step)
    d.mkdir(parents=True, exist_ok=True)
    (d / "metadata.json").write_text(f'{{"step": {step}}}')
    (d / facts["trainState"].removeprefix("latest_")).write_text(str(step))
    (d / facts["runConfig"]).write_text(f"train:\n  step: {step}\n")
    (root / facts["trainState"]).write_text(str(step))
    (root / facts["tracker"]).write_text(str(step))
    if keep > -1:
        iters = sorted(root.rglob("iter_*"), key=lambda p: int(p.name.removeprefix("iter_")))
        for old in iters[: len(iters) - keep]:
            for f in sorted(old.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            old.rmdir()
    return d
