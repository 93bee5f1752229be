"""What the Megatron Bridge stand-ins share: reading the staged Hub cache the way
huggingface-hub does offline (refs/<revision> naming a snapshot), and Bridge's checkpoint layout
(iter_NNNNNNN directories, the tracker file, latest_train_state.pt, run_config.yaml) from the
facts the harness hands over (tests/upstream/megatron-bridge-0.6.0.yaml)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from _common import fail

OFFLINE_MISS = (
    "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the"
    " cached files. Checkout your internet connection or see how to run the library in offline mode."
)


def offline() -> None:
    """The ranks and the conversion have no egress: only the staged cache, read offline."""
    if os.environ.get("HF_HUB_OFFLINE") != "1" and os.environ.get("TRANSFORMERS_OFFLINE") != "1":
        fail("ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): the pod has no egress")


def hub_file(repo: str, name: str, revision: str = "main") -> Path:
    """A file of `repo` in HF_HUB_CACHE, or the failure transformers raises offline."""
    cache = Path(os.environ.get("HF_HUB_CACHE", os.path.expanduser("~/.cache/huggingface/hub")))
    folder = cache / ("models--" + repo.replace("/", "--"))
    ref = folder / "refs" / revision
    snapshot = folder / "snapshots" / (ref.read_text().strip() if ref.exists() else revision)
    found = sorted(snapshot.glob(name))
    if not found:
        fail(f"{OFFLINE_MISS} ({repo}: {name} in {cache})")
    return found[0]


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
