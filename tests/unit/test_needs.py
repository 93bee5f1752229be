"""The run-time needs of facts.needs held to the upstream sources that state them, and the Hub
staging the builders derive from them (the Hub files the BERT script and NeMo's GPT-2 tokenizer read)."""

from __future__ import annotations

import subprocess
from urllib.parse import urlsplit

import pytest

from config.workloads import RECIPES
from facts import instances, needs
from facts.nodegroups import NodeGroup
from tests import upstream
from workloads.manifests import hub
from workloads.manifests.objects import Context

HUB = upstream.facts("huggingface-hub-0.24.5")
TRANSFORMERS = upstream.facts("transformers-4.44.0")
BERT = upstream.facts("dp-bert-hf-pretrain-v2.27.0")
NEMO = upstream.facts("nemo-r2.0.0rc1")


def test_every_program_names_an_upstream_source() -> None:
    assert {p.source for p in needs.PROGRAMS.values()} <= set(upstream.names())


def test_the_hub_client_facts() -> None:
    """huggingface-hub 0.24.5 (and the 0.22.2 of neuronx-nemo-megatron): endpoint, offline mode, cache."""
    assert needs.HUB.host == urlsplit(HUB["endpoint"]).hostname and needs.HUB.port == 443
    for version in ("huggingface-hub-0.24.5", "huggingface-hub-0.22.2"):
        facts = upstream.facts(version)
        assert list(needs.OFFLINE_ENV) == facts["offline_env"]
        assert needs.CACHE_ENV in facts["cache_env"]
    assert needs.cache_folder("bert-large-uncased") == "models--bert-large-uncased"
    assert needs.cache_folder("meta-llama/Llama-2-7b-hf") == "models--meta-llama--Llama-2-7b-hf"
    assert (TRANSFORMERS["cache_version_file"], TRANSFORMERS["cache_version"]) == needs.CACHE_MARKER


def test_what_the_training_programs_read_from_the_hub() -> None:
    """The BERT script's get_model (config and .bin weights, use_safetensors=False); NeMo's
    GPT2BPETokenizer through AutoTokenizer("gpt2"), which needs config.json when the tokenizer
    config names no class."""
    bert = needs.PROGRAMS["dp_bert_large_hf_pretrain_hdf5.py"]
    (repo,) = bert.hub
    assert (repo.repo, list(repo.files)) == (BERT["hub"]["repo"], BERT["hub"]["files"])
    assert set(repo.files) == {TRANSFORMERS["config_file"], TRANSFORMERS["weights"]["use_safetensors_false"]}
    assert [e.host for e in bert.endpoints if e.optional] == [e["host"] for e in BERT["optional_endpoints"]]
    gpt2 = NEMO["tokenizer"]["megatron_gpt2_bpe"]
    tokenizer = needs.tokenizer_repo("megatron", gpt2["type"])
    assert tokenizer and tokenizer.repo == gpt2["hub_repo"]
    assert list(tokenizer.files) == TRANSFORMERS["auto_tokenizer"]["required_without_tokenizer_class"]
    assert set(TRANSFORMERS["auto_tokenizer"]["optional"]) <= set(tokenizer.optional)
    assert needs.tokenizer_repo("huggingface", "/shared/tok") is None
    assert needs.tokenizer_repo("sentencepiece", None) is None
    assert needs.PROGRAMS["megatron_gpt_pretraining.py"].tokenizer_overrides


@pytest.mark.parametrize(
    ("tokenizer", "repos"),
    [({}, ["gpt2"]), ({"library": "huggingface", "type": "org/tok"}, ["org/tok"]), ({"library": "sentencepiece", "model": "/shared/t.model"}, [])],
)  # fmt: skip
def test_a_nemo_run_stages_what_its_tokenizer_reads(tokenizer: dict[str, str], repos: list[str]) -> None:
    run = RECIPES["nemo-gpu"].model_validate(
        {"recipe": "nemo-gpu", "nodeGroup": "p4de", "nodes": 2, "runId": "r", "tokenizer": tokenizer}
    )
    assert [r.repo for r in run.hub_repos] == repos


def _ctx() -> Context:
    group = NodeGroup("g", instances.get("trn1.32xlarge"), 1, 1, "a", {})
    return Context("ns", "claim", "/shared", group, "img")


def test_the_staging_job_downloads_into_the_shared_cache_and_checks_the_required_files() -> None:
    step = hub.stage("bert", _ctx(), needs.PROGRAMS["dp_bert_large_hf_pretrain_hdf5.py"].hub, after=("bert-dirs",))
    container = step.obj["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][-1]
    assert (
        "huggingface-cli download bert-large-uncased --revision main --cache-dir /shared/hf-hub --include config.json pytorch_model.bin"
        in script
    )
    assert 'test -f "/shared/hf-hub/models--bert-large-uncased/snapshots/$commit/pytorch_model.bin"' in script
    assert "echo 1 > /shared/hf-hub/version.txt" in script
    assert step.obj["spec"]["template"]["metadata"]["labels"]["llm-training-eks/egress"] == "internet"
    assert subprocess.run(["bash", "-n", "-c", script], capture_output=True).returncode == 0
    assert hub.offline_env(_ctx()) == {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_CACHE": "/shared/hf-hub",
    }
