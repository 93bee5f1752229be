"""Resume only from a checkpoint known to be complete.

A node lost while a checkpoint is being written leaves the newest checkpoint incomplete; a
training script that resumes from the newest one then fails on it at every retry (and Kueue
requeues it until its backoff runs out). Each recipe's launcher makes sure, before training
starts, that the newest checkpoint its script will pick is a complete one; an incomplete one
is moved aside (never deleted) to `<run dir>/incomplete/<time>/`:

- neuronx-nemo-megatron (Llama 2 on Trainium) resumes from the newest `*.ckpt` by modification
  time (exp_manager.check_resume) and an xser checkpoint is a directory of many files written by
  every data-parallel rank. Its checkpoint IO logs "... saving of checkpoint <name> fully
  completed" only after a rendezvous of every rank once the save is done (NLPCheckpointIOState,
  removal protection on by default): the launcher reads its output and writes a marker per
  checkpoint at that line (`mark_saved`), and before training moves aside every checkpoint
  without one (`neuronx_guard`).
- BERT (aws-neuron-samples) resumes from the highest ckpt_<step>.pt; each is one torch.save
  file, a zip archive whose central directory is written last, so a torn file does not open as
  a zip (`bert_guard`). The same step keeps the newest `--num_ckpts_to_keep` complete ones:
  the script counts only the files its own process wrote, so every restart left more.
- NeMo r2.0.0rc1 (GPU) needs nothing: NeMoModelCheckpoint writes `<checkpoint>-unfinished`
  before a save and removes it after, check_resume skips a checkpoint with it and rank 0 removes
  unfinished ones at start (tests/upstream/training-resume-rules.yaml).
"""

from __future__ import annotations

import shlex

COMPLETE_DIR = ".complete"
"""Beside the checkpoints: one empty file per checkpoint name whose save fully completed."""
SAVED_LINE = "saving of checkpoint {name} fully completed"
"""neuronx-nemo-megatron's log line once every rank has written a checkpoint (synchronous or
asynchronous saving both end with it)."""


def _aside(run_dir: str) -> str:
    return f'aside="{run_dir}/incomplete/$(date +%Y%m%dT%H%M%S)"'


def mark_saved(checkpoint_dir: str) -> str:
    """A filter the training output is piped through: it passes every line on at once and marks
    each checkpoint whose save the log says fully completed (an awk program: the images' awk)."""
    before, after = SAVED_LINE.split("{name}")
    marks = f"{checkpoint_dir}/{COMPLETE_DIR}"
    program = (
        "{ print; fflush() }"
        f" /{before}[^ ]+{after}/"
        ' { for (i = 1; i < NF; i++) { j = i + 1; if ($i == "checkpoint" && $j ~ /^[A-Za-z0-9._=-]+$/)'
        ' system("mkdir -p " d " && : > " d "/" $j) } }'
    )
    return f"awk -v d={marks} {shlex.quote(program)}"


def neuronx_guard(checkpoint_dir: str, run_dir: str) -> str:
    """Before training: every `*.ckpt` (in the checkpoint directory or a model-parallel rank
    folder under it) without its marker is moved aside with the files named after it (its
    `.tensors` directory). A run whose checkpoints predate the markers (no marker directory) is
    left as it is, and from then on its saves are marked."""
    marks = f"{checkpoint_dir}/{COMPLETE_DIR}"
    return (
        f"mkdir -p {checkpoint_dir}\n"
        f"if [ -d {marks} ]; then\n"
        f"  {_aside(run_dir)}\n"
        f"  for f in {checkpoint_dir}/*.ckpt {checkpoint_dir}/*/*.ckpt; do\n"
        '    [ -e "$f" ] || continue\n'
        f'    [ -e "{marks}/${{f##*/}}" ] && continue\n'
        f'    rel=${{f#{checkpoint_dir}/}}; to="$aside/$rel"; to="${{to%/*}}"; mkdir -p "$to"\n'
        '    echo "incomplete checkpoint (its save never finished): moving $rel to $aside"\n'
        '    for p in "$f" "$f".*; do if [ -e "$p" ]; then mv "$p" "$to/"; fi; done\n'
        "  done\n"
        f"else mkdir -p {marks}; fi\n"
    )


_BERT_CHECK = (
    "import glob, os, re, sys, zipfile\n"
    "ckpt, aside, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
    "step = lambda p: int(re.fullmatch(r'ckpt_(\\d+)\\.pt', os.path.basename(p)).group(1))\n"
    "found = sorted(glob.glob(os.path.join(ckpt, 'ckpt_*.pt')), key=step)\n"
    "complete = []\n"
    "for p in found:\n"
    "    try:\n"
    "        zipfile.ZipFile(p).close(); complete.append(p)\n"
    "    except (zipfile.BadZipFile, OSError):\n"
    "        os.makedirs(aside, exist_ok=True); os.rename(p, os.path.join(aside, os.path.basename(p)))\n"
    "        print(f'incomplete checkpoint (a torn save): moved {p} to {aside}')\n"
    "for p in complete[:-keep] if keep > 0 else []:\n"
    "    os.remove(p); print(f'keeping the newest {keep} checkpoints: removed {p}')\n"
)


def bert_guard(checkpoint_dir: str, run_dir: str, keep: int) -> str:
    """Before training: torn ckpt_<step>.pt files moved aside, then only the newest `keep`
    complete ones kept (keep < 1: all)."""
    return (
        f"mkdir -p {checkpoint_dir}\n{_aside(run_dir)}\n"
        f'python3 -c {shlex.quote(_BERT_CHECK)} {checkpoint_dir} "$aside" {keep}\n'
    )
