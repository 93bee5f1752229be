"""Stand-in for megatron_gpt_pretraining.py (NeMo r2.0.0rc1 and neuronx-nemo-megatron): reads
the Hydra overrides, joins the torchrun rendezvous over gloo, resumes the way that framework's
exp_manager does, trains `trainer.max_steps` steps and saves checkpoints under the names that
framework gives them. The framework comes from the image (/harness/job.json).

Resume rules (check_resume in nemo/utils/exp_manager.py):
- NeMo r2.0.0rc1 (579983fb): with resume_if_exists, the `*last` checkpoint (distributed
  checkpoint directories, or `*last.ckpt` files) in <log dir>/checkpoints, skipping ones with an
  `-unfinished` marker; none: train from scratch if resume_ignore_no_checkpoint, else
  NotFoundError. save_last defaults to true (CallbackParams); filename
  `megatron_gpt--{val_loss:.2f}-{step}-{consumed_samples}` (conf/megatron_llama_config.yaml).
- neuronx-nemo-megatron (f4743cef): with resume_if_exists, the newest `*.ckpt` (by mtime, two
  levels deep) in <log dir>/checkpoints, under mp_rank_XX/ (TP>1) or tp_rank_XX_pp_rank_XXX/
  (PP>1); none: from scratch if resume_ignore_no_checkpoint, else an error. Its
  megatron_llama_config.yaml: save_last False, save_top_k 1, filename
  `megatron_llama--{step}-{consumed_samples}`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

from _common import fail, job, record, rendezvous, step

DEFAULTS = {
    "nemo": {"save_last": True, "save_top_k": 10, "filename": "megatron_gpt--{val_loss:.2f}-{step}-{consumed_samples}"},
    "neuronx-nemo-megatron": {
        "save_last": False,
        "save_top_k": 1,
        "filename": "megatron_llama--{step}-{consumed_samples}",
    },
}


def overrides(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for arg in argv:
        if arg.startswith("--"):
            continue
        key, _, value = arg.partition("=")
        out[key.lstrip("+")] = value
    return out


def truthy(value: str | None, default: bool = False) -> bool:
    return default if value is None else value.strip().lower() in ("true", "1", "yes")


def format_name(pattern: str, step_: int, consumed: float) -> str:
    name = pattern.replace("{val_loss:.2f}", "val_loss=0.00")
    return name.replace("{step}", f"step={step_}").replace("{consumed_samples}", f"consumed_samples={consumed}")


def latest(framework: str, ckdir: Path) -> Path | None:
    """The checkpoint that framework's exp_manager resumes from, or None."""
    if not ckdir.exists():
        return None
    if framework == "nemo":
        unfinished = {p.name[: -len("-unfinished")] for p in ckdir.glob("*-unfinished")}
        dirs = [d for d in ckdir.glob("*") if d.is_dir() and d.name.endswith("last") and d.name not in unfinished]
        lasts = dirs or [p for p in ckdir.rglob("*last.ckpt") if p.name not in unfinished]
        if len(lasts) > 1:
            fail(f"ValueError: Multiple checkpoints {lasts} that matches *last.ckpt.")
        return lasts[0] if lasts else None
    found = sorted(
        (p for p in ckdir.rglob("*.ckpt") if len(p.relative_to(ckdir).parts) <= 2), key=lambda p: p.stat().st_mtime
    )
    return found[-1] if found else None


def resume_step(framework: str, o: dict[str, str], ckdir: Path) -> int:
    if not truthy(o.get("exp_manager.resume_if_exists")):
        return 0
    found = latest(framework, ckdir)
    if found is None:
        if truthy(o.get("exp_manager.resume_ignore_no_checkpoint")):
            print(f"There were no checkpoints found in checkpoint_dir :{ckdir}. Training from scratch.", flush=True)
            return 0
        fail(f"NotFoundError: There were no checkpoints found in checkpoint_dir :{ckdir}. Cannot resume.")
    print(f"Resuming from {found}", flush=True)
    m = re.search(r"step=(\d+)", found.name)
    if not m:
        fail(f"cannot tell the step of {found}")
    return int(m.group(1))


def save(framework: str, o: dict[str, str], ckdir: Path, step_: int, tp: int, pp: int) -> None:
    d = DEFAULTS[framework]
    prefix = "exp_manager.checkpoint_callback_params."
    pattern = o.get(prefix + "filename", d["filename"]).strip("'\"")
    save_last = truthy(o.get(prefix + "save_last"), d["save_last"])
    top_k = int(o.get(prefix + "save_top_k", d["save_top_k"]))
    consumed = float(step_ * int(o.get("model.global_batch_size", "1")))
    name = format_name(pattern, step_, consumed)
    ckdir.mkdir(parents=True, exist_ok=True)
    if framework == "nemo":  # mcore distributed checkpoints: one directory each
        marker = ckdir / f"{name}-unfinished"
        marker.touch()
        for n in [name, *([f"{name}-last"] if save_last else [])]:
            shutil.rmtree(ckdir / n, ignore_errors=True)
            (ckdir / n).mkdir()
            (ckdir / n / "metadata.json").write_text(f'{{"step": {step_}}}')
        for old in sorted(p for p in ckdir.glob("*") if p.is_dir() and not p.name.endswith("last"))[:-top_k]:
            shutil.rmtree(old)
        marker.unlink()
        return
    ranks = (
        [""]
        if tp * pp == 1
        else [
            f"mp_rank_{t:02d}" if pp == 1 else f"tp_rank_{t:02d}_pp_rank_{p:03d}" for t in range(tp) for p in range(pp)
        ]
    )
    for r in ranks:
        sub = ckdir / r if r else ckdir
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{name}.ckpt").write_text(f"step {step_}\n")
        if save_last:
            (sub / f"{name}-last.ckpt").write_text(f"step {step_}\n")
        kept = sorted(
            (p for p in sub.glob("*.ckpt") if not p.name.endswith("last.ckpt")), key=lambda p: p.stat().st_mtime
        )
        for old in kept[:-top_k]:
            old.unlink()


def main() -> None:
    facts = job()
    o = overrides(sys.argv[1:])
    framework = facts["framework"]
    extracting = os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY") == "1"
    if o.get("trainer.num_nodes") != os.environ["NNODES"]:
        fail(f"trainer.num_nodes={o.get('trainer.num_nodes')} but NNODES={os.environ['NNODES']}")
    if o.get("trainer.devices") != facts["renderedNprocPerNode"]:
        fail(
            f"trainer.devices={o.get('trainer.devices')} but the job renders {facts['renderedNprocPerNode']} ranks per node"
        )
    dist, rank, world = rendezvous()
    log_dir = Path(o["exp_manager.explicit_log_dir"])
    ckdir = log_dir / "checkpoints"
    start = resume_step(framework, o, ckdir) if rank == 0 else 0
    import torch

    t = torch.tensor([start])
    dist.broadcast(t, 0)
    start = int(t.item())
    max_steps = int(o["trainer.max_steps"])
    every = int(o.get("exp_manager.checkpoint_callback_params.every_n_train_steps", "0") or 0)
    tp, pp = int(o.get("model.tensor_model_parallel_size", "1")), int(o.get("model.pipeline_model_parallel_size", "1"))
    record("megatron", rank=rank, world=world, resumedFrom=start, extracting=extracting, framework=framework)
    for s in range(start + 1, max_steps + 1):
        step(dist)
        if rank == 0:
            print(
                f"Epoch 0: global_step={s} reduced_train_loss={10.0 / s:.3f} consumed_samples={s * int(o.get('model.global_batch_size', '1'))}",
                flush=True,
            )
            if every and s % every == 0:
                save(framework, o, ckdir, s, tp, pp)
        dist.barrier()
    if rank == 0:
        record("megatron-done", steps=max_steps, resumedFrom=start, extracting=extracting)
        print(f"`Trainer.fit` stopped: `max_steps={max_steps}` reached.", flush=True)
    dist.destroy_process_group()
    time.sleep(0)


if __name__ == "__main__":
    main()
