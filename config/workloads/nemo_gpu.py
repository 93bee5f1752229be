"""Recipe `nemo-gpu`: NVIDIA NeMo Llama pretraining on GPU nodes (its builder:
workloads/manifests/nemo_gpu.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from config.base import Refusal
from config.training import NemoTokenizerConfig
from config.workloads.megatron import MegatronRun
from config.workloads.recipe import Arguments, Conversion, Converter, ExampleStacks, HeldAgainst, RecipeDocs, Support
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.model import LLAMA2_VOCAB, llama_parameters, padded_vocab
from estimates.startup import NO_COMPILE, CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from facts import instances, needs

GPT2_VOCAB = 50257
"""GPT-2's BPE vocabulary (transformers' GPT2Config vocab_size)."""
MAKE_VOCAB_DIVISIBLE_BY = 128
"""NeMo's llama config: model.make_vocab_size_divisible_by."""


class NemoGpuWorkload(MegatronRun):
    """NVIDIA NeMo pretraining on GPU nodes (p4de, p5)."""

    RECIPE: ClassVar[str] = "nemo-gpu"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "nvidia"
    REPOSITORY: ClassVar[str | None] = "nemo"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "hub", "train", "tensorboard")
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        12,
        "NeMo's llama config trains bf16-mixed without megatron_amp_O2, so the weights are fp32 and"
        " fused_adam's two moments fp32",
        # save_last=True beside save_top_k (monitor step, mode max): Lightning 2.3's ModelCheckpoint
        # saves the new top-k checkpoint, then a full `last` copy (not a link): two writes per
        # interval, and the last kept beside the top k.
        written_per_interval=2,
        kept_beyond=1,
    )
    COMPILE: ClassVar[CompileTime] = NO_COMPILE
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "no published measurement of this configuration (NeMo 2.0.0rc1's Llama config on p4de or p5 over EFA)"
        " is recorded in the project; set stepSeconds from a measured step"
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="NVIDIA NeMo 2.0.0rc1 (NGC `nemo:24.07`): `megatron_gpt_pretraining.py` with"
        " `conf/megatron_llama_config.yaml`",
        image="NGC nemo:24.07 + EFA installer 1.37.0, aws-ofi-nccl 1.13.2, nccl-tests 2.13.10",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "hub": "Hub Job (the GPT-2 tokenizer's repository onto `/shared/hf-hub`, the ranks run offline)",
            "train": "training MPIJob (health gate with nccl-tests over EFA, NeMo training)",
            "tensorboard": "TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "p4de, p5, p5e, p5en",
            "NeMo 2.0.0rc1 (NGC nemo:24.07), EFA installer 1.37.0, aws-ofi-nccl 1.13.2",
            "seed",
            "the NeMo 24.07 tutorial the project was seeded from, kept as it was",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("p4de-nemo", "p5-train-serve")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("nemo-r2.0.0rc1",),
        "the Hydra overrides of megatron_gpt_pretraining.py composed against megatron_llama_config.yaml and the"
        " exp_manager schema of NeMo r2.0.0rc1",
    )
    CONVERSION: ClassVar[Converter] = Conversion(
        "NVIDIA NeMo 2.0.0rc1: `scripts/checkpoint_converters/convert_llama_nemo_to_hf.py` on the run's"
        " `.nemo` (saved at the end of training)",
        "nemo-r2.0.0rc1",
    )

    recipe: Literal["nemo-gpu"] = Field(description="nemo-gpu")
    data_prefix: str | None = Field(
        None,
        description="Megatron data prefix under /shared (tokenized .bin/.idx); default: NeMo mock data.",
        json_schema_extra={"x-default": "NeMo mock data"},
    )
    tokenizer: NemoTokenizerConfig = Field(
        default_factory=NemoTokenizerConfig, description="The tokenizer the data was made with."
    )
    config_name: Literal["megatron_llama_config"] = Field(
        "megatron_llama_config", description="NeMo Hydra config of megatron_gpt_pretraining.py."
    )
    repo_dir: str = Field("/opt/NeMo", description="The NeMo checkout in the image (examples/ is under it).")
    overrides: dict[str, str] = Field(default_factory=dict, description="Extra Hydra overrides (key: value).")
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")

    @property
    def checkpoint_parameters(self) -> int:
        return llama_parameters(self.decoder, self._vocabulary()[0])

    @property
    def model_vocabulary(self) -> int:
        return self._vocabulary()[0]

    @property
    def checkpoint_assumes(self) -> str:
        return self._vocabulary()[1]

    def _vocabulary(self) -> tuple[int, str]:
        """The padded vocabulary the model is built with, and how the plan names it. GPT-2's BPE
        (the default tokenizer) has 50257 tokens; another tokenizer's size is not known here, so
        Llama 2's 32000 is assumed and said."""
        tp = self.model.tensor_parallel
        if self.tokenizer.library == "megatron" and self.tokenizer.effective_type == "GPT2BPETokenizer":
            vocab, name = GPT2_VOCAB, "GPT-2 BPE"
        else:
            vocab, name = LLAMA2_VOCAB, "Llama 2's (the tokenizer's own size is not known to the plan)"
        padded = padded_vocab(vocab, MAKE_VOCAB_DIVISIBLE_BY, tp)
        return padded, f"vocabulary {name} {vocab} padded to {padded} (x {MAKE_VOCAB_DIVISIBLE_BY} x TP {tp})"

    @property
    def hub_repos(self) -> tuple[needs.HubRepo, ...]:
        return tuple(r for r in [self.tokenizer.hub_repo] if r)

    @field_validator("data_prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/shared/"):
            raise Refusal(f"{v!r} must be a path under /shared/ (the FSx file system every worker mounts)", "invalid")
        return v
