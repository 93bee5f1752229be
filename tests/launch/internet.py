"""The stand-in internet of a cluster: one host in a network namespace of its own on the
cluster's bridge, at an address outside the pods' range (ADDRESS), that serves as the Hugging
Face Hub and S3 (standins/hub_server.py) on the port the real ones use for HTTPS. The cluster's
DNS (the hosts file) resolves the public names the programs contact to it, as CoreDNS would
(every pod may ask DNS: the namespaces' allow-dns policy). Whether a pod reaches it is its
NetworkPolicies' decision (netpolicy.reaches_internet); a pod that may not gets a blackhole
route to it, so its connections fail at once (on EKS they time out).

What it serves: the repositories the recipes read (their file names from the upstream facts of
the programs that read them; contents are placeholders), the gated ones (Llama 2's, Llama 3's and 3.1's)
refusing a request without a token, the datasets (RedPajama's sample, NxD's wikicorpus) and the
BERT tutorial's dataset object.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from config.workloads.llama3_nxd import Llama3NxdData
from config.workloads.torchtitan_neuron import TorchTitanModel
from tests import upstream

ADDRESS = "127.20.0.1"
NETWORK = "127.20.0.0/24"
PORT = 443
HUB = upstream.facts("huggingface-hub-0.24.5")
BERT = upstream.facts("dp-bert-hf-pretrain-v2.27.0")
NEMO = upstream.facts("nemo-r2.0.0rc1")
BRIDGE = upstream.facts("megatron-bridge-0.6.0")
NXD = upstream.facts("neuronx-distributed-v2.28.0")["data"]["get_dataset"]
TITAN_ASSETS = upstream.facts("torchtitan-config-cli")["download_hf_assets"]["assets"]
HOSTS = (str(urlsplit(HUB["endpoint"]).hostname), "s3.amazonaws.com")
"""The public names the stand-ins contact (the Hub's endpoint; S3, which the VPC's gateway
endpoint serves at S3's public addresses)."""
SERVER = Path(__file__).with_name("standins") / "hub_server.py"


def _json(doc: dict) -> str:
    return json.dumps(doc)


def _repo(name: str, files: dict[str, str], gated: bool = False, sha: str | None = None) -> dict:
    return {"sha": sha or hashlib.sha1(name.encode()).hexdigest(), "gated": gated, "files": files}


def content() -> dict:
    """What the stand-in Hub and S3 serve."""
    bert = BERT["hub"]["repo"]
    gpt2 = NEMO["tokenizer"]["megatron_gpt2_bpe"]["hub_repo"]
    lines = "".join(_json({"text": f"document {i}"}) + "\n" for i in range(3))
    s3_key = BERT["data"]["download"].split()[0].removeprefix("s3://")
    bert_files = (*BERT["hub"]["files"], "model.safetensors", "vocab.txt", "tokenizer_config.json")
    # gpt2's tokenizer config names no tokenizer class, so AutoTokenizer reads its config.json.
    gpt2_files = {
        "config.json": _json({"model_type": "gpt2"}),
        "tokenizer_config.json": _json({"model_max_length": 1024}),
    }
    gpt2_files.update(
        {
            "vocab.json": _json({"<|endoftext|>": 50256}),
            "merges.txt": "#version: 0.2\n",
            "tokenizer.json": "{}",
            "model.safetensors": "w",
        }
    )
    llama = "meta-llama/Llama-2-7b-hf"
    llama_files = (
        "tokenizer.model",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "config.json",
    )
    # The Trainium recipes' default repositories: Llama 3's (gated; a fast tokenizer, no
    # tokenizer.model at the top) and Qwen3's (ungated; TorchTitan's asset files it has).
    llama3 = Llama3NxdData.model_fields["tokenizer"].default
    llama3_files = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")
    qwen3 = TorchTitanModel.model_fields["hugging_face_repo"].default
    qwen3_files = [f for kind in TITAN_ASSETS.values() for f in kind if f not in ("tokenizer.model", "vocab.txt")]
    wikicorpus = NXD["dataset"][0]  # datasets' loading script of the legacy dataset id
    # A Llama 3.1 repository as Megatron Bridge's recipes name it: config, tokenizer, two weight
    # shards with their index, and the original consolidated weights no step should fetch.
    llama31 = "meta-llama/Meta-Llama-3.1-8B"
    llama31_files = (
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "original/consolidated.00.pth",
    )
    # Qwen/Qwen3-8B serves both TorchTitan (its assets, at main) and Megatron Bridge (config,
    # tokenizer and weights, at the commit its Qwen3 recipes pin): one revision here, that commit.
    bridge_qwen3 = BRIDGE["recipes"]["qwen3_8b_sft_config"]
    assert bridge_qwen3["hf_repo"] == qwen3
    qwen3_files = sorted({*qwen3_files, *llama31_files[:-1]})
    qwen3_sha = bridge_qwen3["hf_revision"]
    # Its weights too, for the server that serves it (trn2-serve): safetensors shards with their
    # index, as the Hub lists such a model (names not read from the Hub here).
    qwen3_repo = {f: _json({"model_type": "qwen3"}) for f in qwen3_files}
    qwen3_repo["model.safetensors.index.json"] = "{}"
    # What the Hub lists of every model repository beside the model's own files: a snapshot of
    # every file (a Bridge export given --hf-revision) needs them too.
    qwen3_repo.update({".gitattributes": "", "LICENSE": "", "README.md": ""})
    # Llama 3.1 405B Instruct as the multi-node server (p5-serve-405b) serves it: gated, config,
    # tokenizer, shards with their index, and the original weights its staging filters out.
    llama405 = "meta-llama/Llama-3.1-405B-Instruct"
    llama405_files = {f: _json({"model_type": "llama"}) for f in llama31_files}
    llama405_files["model.safetensors.index.json"] = "{}"
    return {
        "models": {
            llama405: _repo(llama405, llama405_files, gated=True),
            llama31: _repo(llama31, {f: _json({"model_type": "llama"}) for f in llama31_files}, gated=True),
            qwen3: _repo(qwen3, qwen3_repo, sha=qwen3_sha),
            bert: _repo(bert, {f: _json({"model_type": "bert"}) for f in bert_files}),
            gpt2: _repo(gpt2, gpt2_files),
            llama: _repo(llama, {f: _json({"tokenizer_class": "LlamaTokenizer"}) for f in llama_files}, gated=True),
            llama3: _repo(llama3, {f: _json({"model_type": "llama"}) for f in llama3_files}, gated=True),
        },
        "datasets": {
            "togethercomputer/RedPajama-Data-1T-Sample": _repo(
                "togethercomputer/RedPajama-Data-1T-Sample", {"part-00000.jsonl": lines, "part-00001.jsonl": lines}
            ),
            wikicorpus: _repo(wikicorpus, {f"{wikicorpus}.py": "# datasets loading script", "README.md": ""}),
        },
        "s3": {s3_key: 16},
    }


def start(netns: str, workdir: Path, preexec_fn: Callable[[], None]) -> subprocess.Popen[bytes]:
    """The stand-in internet's server, in its network namespace (plugged by pods.Cluster)."""
    doc = workdir / "internet.json"
    doc.write_text(json.dumps(content()))
    log = (workdir / "internet.log").open("ab")
    return subprocess.Popen(
        ["ip", "netns", "exec", netns, sys.executable, "-S", str(SERVER), ADDRESS, str(PORT), str(doc)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
