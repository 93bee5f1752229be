"""Recipe `llama2-neuron`: Llama2 pretraining on Trainium with neuronx-nemo-megatron (its builder:
workloads/manifests/llama2_neuron.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from config.training import Llama2DataConfig
from config.workloads.megatron import MegatronRun
from config.workloads.recipe import Arguments, Conversion, Converter, ExampleStacks, HeldAgainst, RecipeDocs, Support
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.startup import CompileTime
from estimates.step_time import PerNodeSample, PublishedStepTime, SampleRun, StepTime
from facts import instances, versions

LLAMA2_7B_SEQ_PER_SECOND_PER_TRN1_NODE = 49.75 / 16
"""Neuron performance sample (aws-neuron-sdk trn1_trn1n_nlp_data.csv, Neuron 2.13.1): Llama2-7B,
TP=8, global batch 256, 16 trn1.32xlarge nodes: 49.75 sequences/s, scaled linearly per node."""
TRN1_TYPES = ("trn1.32xlarge", "trn1n.32xlarge")


SAMPLE = PerNodeSample(
    LLAMA2_7B_SEQ_PER_SECOND_PER_TRN1_NODE,
    "7b",
    TRN1_TYPES,
    "Neuron 2.13.1 sample: Llama2-7B, 16 trn1.32xlarge, TP 8, global batch 256, seq 4096, BF16: 49.75 sequences/s",
    nodes=16,
    global_batch_size=256,
)
"""A 7B step on trn1 nodes: the global batch at the sample's sequences per second per node."""


class Llama2NeuronWorkload(MegatronRun):
    """Llama2 pretraining on Trainium with neuronx-nemo-megatron (the Data on EKS Llama2 example)."""

    RECIPE: ClassVar[str] = "llama2-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "neuronx-nemo-megatron"
    STEPS: ClassVar[tuple[str, ...]] = (
        "image",
        "dirs",
        "secret",
        "tokenizer",
        "dataset",
        "tokenize",
        "train",
        "tensorboard",
        "shell",
    )
    HUGGING_FACE_TOKEN_FOR: ClassVar[str | None] = "downloads the gated Llama tokenizer"
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = "nemo-megatron"
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        12,
        "neuronx-nemo-megatron's bf16SR mode (XLA_USE_BF16=1, optimizer adamw; train_setup.sh) keeps tensors"
        " float32 on the host side, so weights, exp_avg and exp_avg_sq are saved in fp32",
    )
    # awslabs/ai-on-eks 41a979ee website/docs/ai/training/Neuron/Llama2.md (this recipe's tutorial):
    # "Pre-compilation will take ~10 minutes when using 4 trn1.32xlarge nodes".
    COMPILE: ClassVar[CompileTime] = CompileTime(10, "ai-on-eks Llama2 tutorial, 4 x trn1.32xlarge")
    STEP_TIME: ClassVar[StepTime] = PublishedStepTime(
        source="aws-neuron-sdk trn1_trn1n_nlp_data.csv, Neuron 2.13.1: Llama2-7B, TP=8, global batch 256, 16"
        " trn1.32xlarge nodes: 49.75 sequences/s (7b on trn1/trn1n only, scaled linearly per node)",
        basis="estimated from the Neuron 2.13.1 Llama2-7B sample",
        estimate=SAMPLE.step_seconds,
        setup=SAMPLE.setup,
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="neuronx-nemo-megatron 0.8.0 (`2.21_release`, commit `d760e20`): `llama_7b.sh` / `llama_13b.sh` /"
        " `llama_70b.sh`, `train_setup.sh`; the Data on EKS Llama2 blueprint",
        image="Neuron SDK 2.22.0 DLC, PyTorch 2.5.1",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "secret": "Secret (HF token)",
            "tokenizer": "tokenizer Job",
            "dataset": "dataset Job (RedPajama-Data-1T-Sample)",
            "tokenize": "tokenize Job",
            "train": "training MPIJob (health gate, `neuron_parallel_compile` precompile, training)",
            "tensorboard": "TensorBoard",
            "shell": "optional shell pod",
        },
        beside=("tensorboard", "shell"),
        support=Support(
            "trn1, trn1n",
            "Neuron SDK 2.22.0, PyTorch 2.5.1 (PyTorch/XLA), neuronx-nemo-megatron 0.8.0",
            "end of support",
            "neuronx-nemo-megatron is not supported from Neuron 2.23 on; the seed tutorial, kept as it was",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("trn1-llama2", "trn1-llama2-runs")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("neuronx-nemo-megatron-2.21", "huggingface-hub-0.22.2"),
        "the Hydra overrides of megatron_gpt_pretraining.py composed against the configs and exp_manager schema"
        " of the image's checkout; the compile-only run's switches; huggingface-cli download's options",
    )
    CONVERSION: ClassVar[Converter] = Conversion(
        "neuronx-nemo-megatron 0.8.0 (`2.21_release`, commit `d760e20`):"
        " `checkpoint_conversion/convert_nemo_checkpoint_to_hf_llama.py --is_xser --trn`",
        "neuronx-nemo-megatron-2.21",
    )

    recipe: Literal["llama2-neuron"] = Field(description="llama2-neuron")
    data: Llama2DataConfig = Field(default_factory=Llama2DataConfig, description="Tokenizer and dataset.")
    repo_dir: str = Field(
        "/neuronx-nemo-megatron",
        description="The neuronx-nemo-megatron checkout in the image (examples and scripts are under it).",
    )
    precompile_steps: int = Field(
        4, ge=1, description="Steps neuron_parallel_compile traces (upstream's compile-only run uses 4)."
    )
    tensorboard: bool = Field(True, description="TensorBoard Deployment and Service over /shared/<workload>.")
    shell: bool = Field(False, description="A shell pod with /shared mounted.")

    @property
    def step_input(self) -> SampleRun:
        """What the Neuron sample is matched on (the preset) and the batch a step trains."""
        return SampleRun(self.nodes, self.model.global_batch_size, self.model.preset)
