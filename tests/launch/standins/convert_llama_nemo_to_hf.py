"""Stand-in for NeMo r2.0.0rc1's scripts/checkpoint_converters/convert_llama_nemo_to_hf.py (job
facts "nemoHfConverter": tests/upstream/nemo-r2.0.0rc1.yaml `hf_converter`): its argparse (the
options upstream's parser declares, the required ones; `--cpu-only` a flag), then the .nemo
that training saved at its end (a tar with model_config.yaml, as the megatron stand-in writes
it) read, and a Hugging Face Llama state dict written with torch.save at --output_path: the
embedding and output layer of the model's shape (stride-0 tensors, so nothing large is
written) under transformers' names."""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

from _common import fail, job, record

facts = job()["nemoHfConverter"]
p = argparse.ArgumentParser(prog=facts["script"], allow_abbrev=False)
for option in facts["options"]:
    if option == "--cpu-only":
        p.add_argument(option, action="store_true")
    else:
        p.add_argument(option, required=option in facts["required"])
a = p.parse_args()
record("nemo-hf-converter", args=vars(a))
source = Path(a.input_name_or_path)
if not source.exists():
    fail(f"FileNotFoundError: {source}")
if not a.cpu_only:
    fail("RuntimeError: No CUDA GPUs are available (the conversion Job takes no GPU: --cpu-only)")
try:
    with tarfile.open(source) as tar:
        member = tar.extractfile("./model_config.yaml") or tar.extractfile("model_config.yaml")
        assert member is not None
        config = dict(line.split(": ", 1) for line in member.read().decode().splitlines() if ": " in line)
except (tarfile.TarError, KeyError, AssertionError) as e:
    fail(f"not a .nemo archive with model_config.yaml: {source}: {e}")
import torch  # noqa: E402  (after the argument checks, as the script's imports are slow)

hidden, vocab = int(config["hidden_size"]), int(config["padded_vocab_size"])
row = torch.zeros(1, dtype=torch.bfloat16)
state = {
    "model.embed_tokens.weight": row.expand(vocab, hidden),
    "lm_head.weight": row.expand(vocab, hidden),
    "model.norm.weight": row.expand(hidden),
}
torch.save(state, a.output_path)
print(f"Weights saved to {a.output_path}", flush=True)
sys.exit(0)
