"""Megatron Bridge as the NeMo Framework 26.08 container carries it: where its programs are, the
library recipes the `megatron-bridge` recipe runs, the shapes of the models they build, the
checkpoints they write, and the published throughput the plan estimates step times from.

Every value is held against its upstream source by tests/unit/test_megatron_bridge_facts.py:
- the container's contents: awslabs/awsome-distributed-ai's lock of nvcr.io/nvidia/nemo:26.08
  (tests/upstream/nemo-framework-26.08.yaml): Megatron Bridge 0.6.0 at commit c9325115 (branch
  r0.6.0; the v0.6.0 tag is 12 files later, DeepSeek V4 only), Megatron Core 0.19.0, NCCL 2.30.7;
- recipes, override syntax, checkpoint layout, conversion worker: NVIDIA-NeMo/Megatron-Bridge at
  that commit (tests/upstream/megatron-bridge-0.6.0.yaml), and Megatron Core core_r0.19.0
  (tests/upstream/megatron-lm-core_r0.19.0.yaml);
- published throughput: the Megatron Bridge performance summary at that commit
  (tests/upstream/megatron-bridge-performance.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from facts import needs
from facts.instances import CUDA_ARCH

CONTAINER = "nvcr.io/nvidia/nemo:26.08"
BRIDGE_VERSION = "0.6.0"
BRIDGE_COMMIT = "c93251151adeeadbae3ff2a2bf5ee7a1c34cff01"
MCORE_VERSION = "0.19.0"
MCORE_COMMIT = "16ad357ee7973af32916fc1ca39d71065e5f03d4"
CONTAINER_NCCL = "2.30.7"
"""The NCCL runtime the container ships (its PyTorch is built against 2.30.5)."""

BRIDGE_DIR = "/opt/Megatron-Bridge"
"""The Megatron Bridge checkout in the container (a git work tree at BRIDGE_COMMIT)."""
RUN_RECIPE = "scripts/training/run_recipe.py"
"""The rank-local training entry point: one process per GPU under torchrun."""
RUN_CONVERSION = "scripts/conversion/run_conversion.py"
"""The in-job conversion worker behind convert.sh (import / export), without NeMo Run."""

Mode = Literal["pretrain", "sft"]
Precision = Literal["bf16", "fp8-cs"]
MIXED_PRECISION: dict[str, str] = {
    "bf16": "bf16_mixed",
    "fp8-cs": "bf16_with_fp8_current_scaling_mixed",
}
"""`precision` -> the registered mixed-precision recipe `mixed_precision=` names."""

HUB_CONFIG_FILES = ("config.json",)
"""What AutoBridge.from_hf_pretrained reads when a recipe builds its model (AutoConfig), on
every rank, before anything trains."""
HUB_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
HUB_OPTIONAL_FILES = ("generation_config.json", "special_tokens_map.json")
HUB_TOKENIZER_SNAPSHOT_PATTERNS = ("config.json", *needs.HUB_TOKENIZER_PATTERNS, "*.py")
"""What a recipe that pins a tokenizer revision (Qwen3's `hf_tokenizer_kwargs`) reads first, through
huggingface_hub's snapshot_download: offline, every file of the repository these match (less the
weights) must be staged, or huggingface-hub 1.24.0 raises IncompleteSnapshotError on every rank
(src/megatron/bridge/training/tokenizers/tokenizer.py lines 47-73, 87-120)."""
HUB_WEIGHT_FILES = ("model.safetensors.index.json", "*.safetensors")
"""What an import reads besides the config: the safetensors shards and their index."""


@dataclass(frozen=True)
class ModelShape:
    """A Llama-style decoder's shape (untied embedding and output layer); Qwen3 adds an RMSNorm
    of the head dimension on each query and key head (`qk_norm`)."""

    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int
    vocab: int
    qk_norm: bool = False

    @property
    def parameters(self) -> int:
        """Embedding and output layer, per layer attention (q and o full, k and v per KV head),
        the SwiGLU MLP's three matrices and two RMSNorms (and the q/k norms), and the final norm."""
        h = self.hidden
        kv = h // self.heads * self.kv_heads
        per_layer = 2 * h * h + 2 * h * kv + 3 * h * self.ffn_hidden + 2 * h
        per_layer += 2 * (h // self.heads) if self.qk_norm else 0
        return 2 * self.vocab * h + self.layers * per_layer + h

    @property
    def hf_tensors(self) -> int:
        """Tensors of the Hugging Face checkpoint: embedding, output layer, final norm, and per
        layer q, k, v, o, the MLP's three, two norms (and the q/k norms)."""
        return 3 + self.layers * (9 + (2 if self.qk_norm else 0))


@dataclass(frozen=True)
class RecipeSchedule:
    """A library recipe's learning-rate schedule and validation, as its function and its base
    (`_pretrain_common`, `_sft_common` in recipes/common.py) set them: warm-up and decay in steps
    (`scheduler.lr_warmup_iters`, `scheduler.lr_decay_iters`; None: the run's `train.train_iters`,
    ConfigContainer.validate), the run length they are written for, the peak and floor
    (`optimizer.lr`, `optimizer.min_lr`), cosine decay; validation every `eval_interval` steps
    for `eval_iters` forward iterations (`validation.*`)."""

    warmup_iters: int
    decay_iters: int | None
    train_iters: int
    lr: float
    min_lr: float
    eval_interval: int
    eval_iters: int


@dataclass(frozen=True)
class LibraryRecipe:
    """One Megatron Bridge library recipe (its exported name) and the values it sets that the
    project's config defaults to."""

    name: str
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    virtual_pipeline: int | None
    sequence_parallel: bool
    seq_length: int
    global_batch_size: int
    micro_batch_size: int
    save_interval: int
    schedule: RecipeSchedule


LLAMA31_PRETRAIN = RecipeSchedule(2000, None, 1168251, 3e-4, 3e-5, 2000, 32)
"""llama31_{8b,70b}_pretrain_config (recipes/llama/h100/llama3.py): warm-up 2,000 of 1,168,251 steps,
eval every 2,000; _pretrain_common's lr 3e-4, min_lr 3e-5, 32 eval iterations, decay over the run."""
LLAMA31_SFT = RecipeSchedule(50, None, 1000, 5e-6, 0.0, 30, 32)
"""llama31_{8b,70b}_sft_config: warm-up 50 of 1,000 steps, eval every 30 steps for 32 iterations;
_sft_common's lr 5e-6, min_lr 0, decay over the run."""
QWEN3_PRETRAIN = RecipeSchedule(40, 100, 100, 3e-4, 3e-5, 500, 32)
"""qwen3_8b_pretrain_config (= qwen3_8b_pretrain_16gpu_h100_bf16_config, recipes/qwen/h100/qwen3.py): warm-up
40, decay ending at step 100; _pretrain_common's eval every 500 steps for 32 iterations."""
QWEN3_SFT = RecipeSchedule(10, 100, 100, 5e-6, 0.0, 30, 32)
"""qwen3_8b_sft_config: warm-up 10, decay ending at step 100 to min_lr 0, eval every 30 steps (32
iterations, _sft_common's)."""


@dataclass(frozen=True)
class BridgeModel:
    """A model the recipe trains: its Hugging Face repository (the one the library recipe builds
    the model from, so the staged cache is the one it reads), its shape and its two recipes."""

    key: str
    hf_repo: str
    gated: bool
    shape: ModelShape
    pretrain: LibraryRecipe
    sft: LibraryRecipe
    revision: str = "main"
    """The revision the library recipes read the repository at (the model's config and tokenizer):
    Qwen3's pin a commit; the Llama recipes read `main`."""

    def recipe(self, mode: Mode) -> LibraryRecipe:
        return self.pretrain if mode == "pretrain" else self.sft


LLAMA31_VOCAB = 128256
"""The Llama 3 tokenizer's vocabulary; the recipe pads it to a multiple of 128 (it is one)."""

QWEN3_VOCAB = 151936
"""The Qwen3 tokenizer's vocabulary (151936 = 1187 x 128: no padding)."""

MODELS: dict[str, BridgeModel] = {
    m.key: m
    for m in (
        BridgeModel(
            "llama31_8b",
            "meta-llama/Meta-Llama-3.1-8B",
            True,
            ModelShape(32, 4096, 14336, 32, 8, LLAMA31_VOCAB),
            LibraryRecipe("llama31_8b_pretrain_config", 1, 1, 2, None, False, 8192, 512, 1, 500, LLAMA31_PRETRAIN),
            LibraryRecipe("llama31_8b_sft_config", 2, 1, 1, None, False, 4096, 8, 1, 50, LLAMA31_SFT),
        ),
        BridgeModel(
            "llama31_70b",
            "meta-llama/Meta-Llama-3.1-70B",
            True,
            ModelShape(80, 8192, 28672, 64, 8, LLAMA31_VOCAB),
            LibraryRecipe("llama31_70b_pretrain_config", 4, 4, 2, 5, True, 131072, 512, 1, 500, LLAMA31_PRETRAIN),
            LibraryRecipe("llama31_70b_sft_config", 8, 4, 1, None, False, 4096, 8, 1, 50, LLAMA31_SFT),
        ),
        BridgeModel(
            "qwen3_8b",
            "Qwen/Qwen3-8B",
            False,
            ModelShape(36, 4096, 12288, 32, 8, QWEN3_VOCAB, qk_norm=True),
            LibraryRecipe("qwen3_8b_pretrain_config", 1, 1, 1, None, False, 4096, 1024, 1, 50, QWEN3_PRETRAIN),
            LibraryRecipe("qwen3_8b_sft_config", 4, 1, 1, None, False, 2048, 32, 1, 100, QWEN3_SFT),
            revision="b968826d9c46dd6066d109eabc6255188de91218",
        ),
    )
}
"""Model key -> what its library recipes build."""

CHECKPOINT_BYTES_PER_PARAMETER = 14
"""What a torch_dist checkpoint holds per parameter with the recipes' optimizer settings: the
bf16 model weights (2 bytes) and the distributed optimizer's fp32 main parameter, exp_avg and
exp_avg_sq (4 bytes each; main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype = float32)."""
WEIGHT_BYTES_PER_PARAMETER = 2
"""A bf16 weights-only checkpoint (what an import writes and an export reads)."""
ITERATION_DIR = "iter_{:07d}"
TRACKER_FILE = "latest_checkpointed_iteration.txt"
TRAIN_STATE_FILE = "latest_train_state.pt"
RUN_CONFIG_FILE = "run_config.yaml"


@dataclass(frozen=True)
class PublishedRun:
    """One row of NVIDIA's Megatron Bridge performance tables."""

    model: str
    system: str
    container: str
    mode: Mode
    precision: Precision
    gpus: int
    global_batch_size: int
    micro_batch_size: int
    seq_length: int
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    virtual_pipeline: int | None
    fsdp: int
    tokens_per_second_per_gpu: float
    model_tflops_per_gpu: float

    @property
    def shape(self) -> str:
        vp = f" VP{self.virtual_pipeline}" if self.virtual_pipeline else ""
        fsdp = f" FSDP{self.fsdp}" if self.fsdp else ""
        return (
            f"{self.gpus} GPUs, GBS {self.global_batch_size}, MBS {self.micro_batch_size}, seq {self.seq_length},"
            f" TP{self.tensor_parallel} PP{self.pipeline_parallel} CP{self.context_parallel}{vp}{fsdp}"
        )


PUBLISHED: tuple[PublishedRun, ...] = (
    PublishedRun(
        "llama31_8b", "DGX-H100", "25.11", "pretrain", "fp8-cs", 8, 128, 1, 8192, 1, 1, 1, None, 8, 14451, 744
    ),
    PublishedRun(
        "llama31_8b", "DGX-B200", "25.11", "pretrain", "fp8-cs", 8, 128, 2, 8192, 1, 1, 1, None, 0, 30624, 1576
    ),
    PublishedRun(
        "llama31_70b", "DGX-H100", "26.04.01", "pretrain", "fp8-cs", 64, 256, 1, 8192, 4, 8, 1, 5, 0, 1664, 731
    ),
    PublishedRun("llama31_70b", "DGX-H100", "26.06", "sft", "fp8-cs", 32, 32, 1, 4096, 4, 4, 1, 5, 0, 1638, 710),
)
"""NVIDIA's rows for Llama 3 8B / 70B (LLAMA3_8B, LLAMA3_70B: Llama 3.1 has the same layers, so
the same FLOPs per token; the tables carry no Llama 3.1 rows of these sizes and no BF16 Llama rows)."""

SYSTEM_OF_INSTANCE: dict[str, str] = {
    "p5.48xlarge": "DGX-H100",
    "p5e.48xlarge": "DGX-H100",
    "p5en.48xlarge": "DGX-H100",
    "p6-b200.48xlarge": "DGX-B200",
}
"""Which published system's figure an instance type's estimate uses. H200 (p5e, p5en) uses the
H100 figure: the same GH100 compute (989.4 dense BF16 TFLOPS), more and faster HBM, so the H100
figure is a floor; no H200 row is published. p6-b300 has no published Llama row."""

GPU_SM: dict[str, str] = {gpu: f"sm_{arch}" for gpu, arch in CUDA_ARCH.items()}
"""Each GPU's compute capability as an SM target, the instance catalog's (held to NVIDIA's CUDA GPUs
page: tests/upstream/nvidia-cuda-gpus-2026-11.yaml)."""
IMAGE_SM_TARGETS = ("sm_90", "sm_100", "sm_103")
"""What images/nemo-megatron-bridge builds NCCL and nccl-tests for (its NVCC_GENCODE, SASS only: no
PTX of an older target), so the GPUs the recipe can run on; a test holds the two equal."""
