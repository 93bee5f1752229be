"""A converted folder carries the training run's tokenizer and its special token ids.

NeMo's converter (NeMo r2.0.0rc1 `scripts/checkpoint_converters/convert_llama_nemo_to_hf.py`)
writes only the weights when given `--output_path` alone: the tokenizer only with
`--hf_output_path` and a Llama `--input_tokenizer`. The config.json the conversion writes had no
`bos_token_id`/`eos_token_id`, so transformers fills LlamaConfig's defaults (bos 1, eos 2:
`models/llama/configuration_llama.py`, v4.44.0) and vLLM stops at token id 2 (the GPT-2
tokenizer's `#`). The conversion now saves every tokenizer the run can use into the folder and
writes the ids of its special tokens; the harness's vLLM stand-in refuses a folder without them.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import resources, run_plan, stack_values
from workloads.manifests.convert import special_tokens

STACK = "p5-train-serve"
JOB = "kubernetes:batch/v1:Job"
OUT = "/shared/chat/data/models/llama-run-001"
GPT2_EOS = 50256
"""`<|endoftext|>`, bos and eos of the GPT-2 tokenizer (its tokenizer_config.json on the Hub)."""


def convert_script(tokenizer: dict[str, Any] | None) -> str:
    values = copy.deepcopy(stack_values(STACK))
    if tokenizer is not None:
        values["llm-training-eks:workloads"]["llama"]["tokenizer"] = tokenizer
    plan = run_plan(values, STACK)
    (job,) = [r["inputs"] for r in resources(plan, JOB) if r["name"].startswith("chat-convert-")]
    return str(job["spec"]["template"]["spec"]["containers"][0]["command"][-1])


@pytest.mark.parametrize(
    ("tokenizer", "loads"),
    [
        (None, "AutoTokenizer.from_pretrained('gpt2')"),
        (
            {"library": "sentencepiece", "model": "/shared/tok/tokenizer.model"},
            "LlamaTokenizer(vocab_file='/shared/tok/tokenizer.model'",
        ),
        ({"library": "huggingface", "type": "/shared/tok/llama"}, "AutoTokenizer.from_pretrained('/shared/tok/llama'"),
    ],
)
def test_the_conversion_saves_the_runs_tokenizer(tokenizer: dict[str, Any] | None, loads: str) -> None:
    script = convert_script(tokenizer)
    (line,) = [ln for ln in script.splitlines() if loads in ln]
    assert f".save_pretrained('{OUT}')" in line, line
    # The ids are written after the tokenizer is in the folder, and before it is marked done.
    assert script.index(line) < script.index("special tokens: bos") < script.index(f"touch {OUT}/.done")


def play(folder: Path, files: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    return subprocess.run(["bash", "-c", special_tokens(str(folder))], capture_output=True, text=True, timeout=60)


LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 50304}


def test_the_gpt2_tokenizer_gives_its_own_ids(tmp_path: Path) -> None:
    eos = {"content": "<|endoftext|>", "special": True}
    done = play(
        tmp_path / "m",
        {
            "config.json": LLAMA_CONFIG,
            "vocab.json": {"<|endoftext|>": GPT2_EOS, "#": 2},
            "merges.txt": "",
            "tokenizer_config.json": {
                "bos_token": "<|endoftext|>",
                "eos_token": "<|endoftext|>",
                "added_tokens_decoder": {str(GPT2_EOS): eos},
            },
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"]) == (GPT2_EOS, GPT2_EOS)


def test_a_sentencepiece_tokenizer_gives_its_ids(tmp_path: Path) -> None:
    decoder = {"1": {"content": "<s>"}, "2": {"content": "</s>"}, "0": {"content": "<unk>"}}
    files = {
        "config.json": LLAMA_CONFIG,
        "tokenizer.model": "spm",
        "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "added_tokens_decoder": decoder},
    }
    done = play(tmp_path / "m", files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "m" / "config.json").read_text())["eos_token_id"] == 2


def test_a_folder_without_a_tokenizer_fails_the_conversion(tmp_path: Path) -> None:
    done = play(tmp_path / "m", {"config.json": LLAMA_CONFIG})
    assert done.returncode == 1 and "no tokenizer" in done.stderr, done.stdout + done.stderr


STAND_IN = Path(__file__).parents[1] / "launch" / "standins"


@pytest.mark.parametrize("ids", [{}, {"bos_token_id": GPT2_EOS, "eos_token_id": GPT2_EOS}])
def test_the_server_stand_in_refuses_a_folder_without_the_ids(ids: dict[str, int], tmp_path: Path) -> None:
    folder = tmp_path / "m"
    play(folder, {"config.json": {**LLAMA_CONFIG, **ids}, "model.safetensors": "w", "tokenizer.json": "{}"})
    check = (
        "import argparse, pathlib, vllm\n"
        f"folder = pathlib.Path('{folder}')\n"
        "vllm.check_model(argparse.Namespace(model=str(folder)), folder,"
        " {'allow_patterns': ['*.safetensors'], 'no_weights_error': '{model}'})\n"
    )
    done = subprocess.run([sys.executable, "-c", check], cwd=STAND_IN, capture_output=True, text=True, timeout=60)
    if ids:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1 and "has no bos_token_id or eos_token_id" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("files", "load", "eos"),
    [
        (
            {"config.json": {"model_type": "gpt2"}, "tokenizer_config.json": {"model_max_length": 1024}},
            "AutoTokenizer.from_pretrained('{src}')",
            GPT2_EOS,
        ),
        ({"tokenizer.model": "spm"}, "LlamaTokenizer(vocab_file='{src}/tokenizer.model', legacy=False)", 2),
    ],
)
def test_the_harness_tokenizer_saves_the_ids_the_conversion_reads(
    files: dict[str, Any], load: str, eos: int, tmp_path: Path
) -> None:
    """The harness's transformers stand-in saves a tokenizer as transformers does (its special
    tokens, from the config or the class's defaults, in tokenizer_config.json), so the harness's
    conversion gets the ids the real one would."""
    src, out = tmp_path / "src", tmp_path / "out"
    play(src, {**files, "vocab.json": {"<|endoftext|>": GPT2_EOS}, "merges.txt": ""})
    save = f"from transformers import AutoTokenizer, LlamaTokenizer; {load.format(src=src)}.save_pretrained('{out}')"
    path = f"{STAND_IN / 'pylib'}:{STAND_IN}"
    saved = subprocess.run([sys.executable, "-c", save], env={"PYTHONPATH": path}, capture_output=True, text=True)
    assert saved.returncode == 0, saved.stderr
    done = play(out, {"config.json": LLAMA_CONFIG})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((out / "config.json").read_text())["eos_token_id"] == eos
