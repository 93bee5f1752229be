"""facts/megatron_bridge.py against its sources: the nemo:26.08 container's contents
(tests/upstream/nemo-framework-26.08.yaml, AWS's lock of the image), Megatron Bridge at the commit
it carries (megatron-bridge-0.6.0), Megatron Core core_r0.19.0 (megatron-lm-core_r0.19.0), NeMo's
Llama 3.1 configs (nemo-llama31-configs), NVIDIA's performance tables (megatron-bridge-performance)
the GPUs' peaks (gpu-peak-flops-2026-11) and compute capabilities (nvidia-cuda-gpus-2026-11); and the
image's Dockerfile against the same facts."""

from __future__ import annotations

import re

import pytest

from facts import images, instances
from facts import megatron_bridge as bridge
from tests import upstream

CONTAINER = upstream.facts("nemo-framework-26.08")
BRIDGE = upstream.facts("megatron-bridge-0.6.0")
MCORE = upstream.facts("megatron-lm-core_r0.19.0")


def test_the_pins_are_what_the_container_carries() -> None:
    assert CONTAINER["image"] == bridge.CONTAINER
    assert CONTAINER["megatron_bridge"] == {"version": bridge.BRIDGE_VERSION, "commit": bridge.BRIDGE_COMMIT}
    assert CONTAINER["megatron_core"] == {"version": bridge.MCORE_VERSION, "commit": bridge.MCORE_COMMIT}
    assert CONTAINER["nccl_runtime"] == bridge.CONTAINER_NCCL
    assert CONTAINER["bridge_checkout"] == bridge.BRIDGE_DIR
    # the facts were read at exactly those commits
    assert upstream.load("megatron-bridge-0.6.0")["source"]["commit"] == bridge.BRIDGE_COMMIT
    assert upstream.load("megatron-lm-core_r0.19.0")["source"]["commit"] == bridge.MCORE_COMMIT
    assert BRIDGE["run_recipe"]["path"] == bridge.RUN_RECIPE
    assert BRIDGE["conversion_worker"]["path"] == bridge.RUN_CONVERSION


def test_the_image_is_built_from_the_container_and_checks_the_bridge_it_carries() -> None:
    text = images.IMAGES["nemo-megatron-bridge"].dockerfile.read_text()
    assert f"ARG BASE={bridge.CONTAINER}\n" in text
    assert f"ARG BRIDGE_COMMIT={bridge.BRIDGE_COMMIT}\n" in text
    assert 'test "$(git -C /opt/Megatron-Bridge rev-parse HEAD)" = "${BRIDGE_COMMIT}"' in text
    nccl = re.search(r"ARG NCCL_VERSION=v(\d+)\.(\d+)\.(\d+)-1\n", text)
    assert nccl and ".".join(nccl.groups()) == bridge.CONTAINER_NCCL, "the NCCL built is the one PyTorch runs with"
    major, minor, patch = (int(x) for x in bridge.CONTAINER_NCCL.split("."))
    assert f"assert v.value == {major * 10000 + minor * 100 + patch}" in text
    for flag in CONTAINER["efa_installer_flags"]:
        assert f" {flag}" in text.split("./efa_installer.sh", 1)[1].split("\n", 1)[0]
    assert "/opt/amazon/ofi-nccl/lib/libnccl-net.so" in {p.replace("-ofi", "") for p in CONTAINER["ofi_nccl_paths"]}


@pytest.mark.parametrize("model", sorted(bridge.MODELS))
@pytest.mark.parametrize("mode", ["pretrain", "sft"])
def test_each_library_recipe_is_what_upstream_sets(model: str, mode: str) -> None:
    m = bridge.MODELS[model]
    r = m.recipe(mode)  # type: ignore[arg-type]
    upstream_recipe = BRIDGE["recipes"][r.name]
    sets = upstream_recipe["sets"]
    assert upstream_recipe["hf_repo"] == m.hf_repo
    assert upstream_recipe.get("hf_revision", "main") == m.revision, "the revision the recipe reads offline"
    assert upstream_recipe["base"] == {"pretrain": "_pretrain_common", "sft": "_sft_common"}[mode]
    assert (
        r.tensor_parallel,
        r.pipeline_parallel,
        r.context_parallel,
        r.virtual_pipeline,
        r.sequence_parallel,
        r.seq_length,
        r.global_batch_size,
        r.micro_batch_size,
        r.save_interval,
    ) == (
        sets["model.tensor_model_parallel_size"],
        sets["model.pipeline_model_parallel_size"],
        sets["model.context_parallel_size"],
        sets["model.virtual_pipeline_model_parallel_size"],
        sets["model.sequence_parallel"],
        sets["dataset.seq_length"],
        sets["train.global_batch_size"],
        sets["train.micro_batch_size"],
        sets["checkpoint.save_interval"],
    )


def test_the_shapes_are_the_llama31_configs() -> None:
    nemo = upstream.facts("nemo-llama31-configs")
    for model, cls in (("llama31_8b", "Llama31Config8B"), ("llama31_70b", "Llama31Config70B")):
        s, c = bridge.MODELS[model].shape, nemo[cls]
        assert (s.layers, s.hidden, s.ffn_hidden, s.heads) == (
            c["num_layers"],
            c["hidden_size"],
            c["ffn_hidden_size"],
            c["num_attention_heads"],
        )
        assert s.kv_heads == nemo["Llama3Config"]["num_query_groups"]
        assert s.vocab == BRIDGE["llama3_vocab_size"]
    m8 = MCORE["llama31_8b"]
    s8 = bridge.MODELS["llama31_8b"].shape
    assert (s8.layers, s8.hidden, s8.ffn_hidden, s8.kv_heads) == (
        m8["num-layers"],
        m8["hidden-size"],
        m8["ffn-hidden-size"],
        m8["num-query-groups"],
    )
    # the published sizes: Llama 3.1 8B and 70B
    assert round(bridge.MODELS["llama31_8b"].shape.parameters / 1e9, 2) == 8.03
    assert round(bridge.MODELS["llama31_70b"].shape.parameters / 1e9, 1) == 70.6


def test_the_qwen3_shape_is_the_one_bridge_is_tested_with() -> None:
    """Bridge's Qwen3 bridge test config for qwen3-8b, its QK layernorm, and the verification card's
    399 tensors and untied [151936, 4096] embedding and output head."""
    q, s = BRIDGE["qwen3_8b"], bridge.MODELS["qwen3_8b"].shape
    c = q["hf_config"]
    assert (s.layers, s.hidden, s.ffn_hidden, s.heads, s.kv_heads, s.vocab) == (
        c["num_hidden_layers"],
        c["hidden_size"],
        c["intermediate_size"],
        c["num_attention_heads"],
        c["num_key_value_heads"],
        c["vocab_size"],
    )
    assert c["tie_word_embeddings"] is False and s.qk_norm is q["qk_layernorm"]
    assert s.hf_tensors == q["hf_tensors"] and bridge.MODELS["llama31_8b"].shape.hf_tensors == 291
    assert q["card_revision"] == bridge.MODELS["qwen3_8b"].revision
    assert round(s.parameters / 1e9, 2) == 8.19
    assert s.vocab % 128 == 0, "Megatron pads the vocabulary to a multiple of 128: none here"


def test_no_published_qwen3_8b_row_so_no_estimate() -> None:
    assert BRIDGE["qwen3_dense_performance_rows"] == 0
    assert not [p for p in bridge.PUBLISHED if p.model == "qwen3_8b"]


def test_checkpoints_are_sized_and_named_as_bridge_writes_them() -> None:
    ck, state = BRIDGE["checkpoint"], MCORE["distributed_optimizer_state"]
    assert (
        ck["iteration_dir"],
        ck["tracker"],
        ck["train_state"],
        ck["run_config"],
    ) == (bridge.ITERATION_DIR, bridge.TRACKER_FILE, bridge.TRAIN_STATE_FILE, bridge.RUN_CONFIG_FILE)
    assert ck["recipes_format"] == "torch_dist"
    # bf16 weights + one fp32 tensor per optimizer state entry (fp32 main parameter, two moments)
    assert bridge.WEIGHT_BYTES_PER_PARAMETER + 4 * len(state["tensors"]) == bridge.CHECKPOINT_BYTES_PER_PARAMETER
    assert set(bridge.MIXED_PRECISION.values()) <= set(BRIDGE["mixed_precision"])


def test_the_published_rows_are_nvidias() -> None:
    rows = upstream.facts("megatron-bridge-performance")["rows"]
    names = {"LLAMA3_8B": "llama31_8b", "LLAMA3_70B": "llama31_70b"}
    published = {
        (
            names[r["model"]],
            r.get("system") or r["section"].rsplit("System: ", 1)[1],
            "sft" if "/ SFT /" in r["section"] else "pretrain",
            r["gpus"],
            r["gbs"],
            r["mbs"],
            r["seq"],
            r["tp"],
            r["pp"],
            r["cp"],
            r["vp"],
            r.get("fsdp", 0),
            r["tokens_per_sec_per_gpu"],
            r["model_tflops_per_gpu"],
        )
        for r in rows
        if r["precision"] in ("FP8", "FP8-CS")
    }
    ours = {
        (
            p.model,
            p.system,
            p.mode,
            p.gpus,
            p.global_batch_size,
            p.micro_batch_size,
            p.seq_length,
            p.tensor_parallel,
            p.pipeline_parallel,
            p.context_parallel,
            p.virtual_pipeline,
            p.fsdp,
            p.tokens_per_second_per_gpu,
            p.model_tflops_per_gpu,
        )
        for p in bridge.PUBLISHED
    }
    assert ours == published
    assert {p.precision for p in bridge.PUBLISHED} == {"fp8-cs"}
    assert "DGX-B300" not in upstream.facts("megatron-bridge-performance")["systems_with_llama_rows"]
    assert "p6-b300.48xlarge" not in bridge.SYSTEM_OF_INSTANCE


def test_the_hub_files_are_what_bridge_reads() -> None:
    files = BRIDGE["hub_files"]
    assert list(bridge.HUB_CONFIG_FILES) == files["recipe_model"]
    assert list(bridge.HUB_TOKENIZER_FILES) == files["hf_tokenizer"]
    assert [*bridge.HUB_CONFIG_FILES, *bridge.HUB_TOKENIZER_FILES, *bridge.HUB_WEIGHT_FILES] == files["import"]
    assert set(files["export"]) <= set(bridge.HUB_CONFIG_FILES)


def test_the_images_runtime_is_the_containers() -> None:
    runtime = images.IMAGES["nemo-megatron-bridge"].runtime
    assert runtime.cuda_major == CONTAINER["cuda_toolkit"].split(".")[0]
    assert runtime.open_mpi is not None and runtime.open_mpi.prefix == "/opt/amazon/openmpi"
    assert "test -x /opt/amazon/openmpi/bin/mpirun" in images.IMAGES["nemo-megatron-bridge"].dockerfile.read_text()


def test_the_gpus_the_recipe_takes_are_those_the_image_builds_nccl_for() -> None:
    """NCCL and nccl-tests are built for the Dockerfile's NVCC_GENCODE targets, as SASS only: a
    GPU of another compute capability has no kernel to run (PTX compiles forward only)."""
    text = images.IMAGES["nemo-megatron-bridge"].dockerfile.read_text()
    gencode = re.search(r'ARG NVCC_GENCODE="([^"]+)"', text)
    assert gencode is not None
    pairs = re.findall(r"-gencode=arch=compute_(\d+),code=(\w+)", gencode.group(1))
    assert all(code == f"sm_{arch}" for arch, code in pairs), "a PTX target would change which GPUs run it"
    assert tuple(code for _, code in pairs) == bridge.IMAGE_SM_TARGETS
    capability = upstream.facts("nvidia-cuda-gpus-2026-11")["compute_capability"]
    assert {gpu: "sm_" + cc.replace(".", "") for gpu, cc in capability.items()} == bridge.GPU_SM
    nvidia = {t.accelerator_name for t in instances.ACCELERATED.values() if t.accelerator == "nvidia"}
    assert nvidia <= set(bridge.GPU_SM), "an NVIDIA instance type whose GPU has no recorded compute capability"
