"""Recipe `bert-neuron`: BERT-large phase-1 pretraining on Trainium, data parallel (its builder:
workloads/manifests/bert_neuron.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from config.problems import problem
from config.training import BertDataConfig, BertTrainingConfig
from config.workloads.base import TrainingRun
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, NoConversion, RecipeDocs, Support
from estimates.checkpoints import CheckpointModel, CheckpointSize
from estimates.schedule import Schedule
from estimates.startup import CompileTime
from estimates.step_time import StepTime, UnknownStepTime
from facts import instances, needs, versions
from facts.nodegroups import placement

BERT_LARGE_PARAMETERS = 335_000_000
"""BERT-large with its pretraining heads (Devlin et al. 2019: 340M; bert-large-uncased: 335M)."""


class BertNeuronWorkload(TrainingRun):
    """BERT-large phase-1 pretraining on Trainium, data parallel (the Neuron BERT tutorial)."""

    RECIPE: ClassVar[str] = "bert-neuron"
    ACCELERATOR: ClassVar[instances.Accelerator | None] = "neuron"
    REPOSITORY: ClassVar[str | None] = "bert-neuronx"
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "hub", "dataset", "train", "tensorboard")
    NEURON_FRAMEWORK: ClassVar[versions.Framework | None] = "pytorch-xla"
    CHECKPOINTS: ClassVar[CheckpointModel] = CheckpointSize(
        10, "the model in bf16 (model.to(torch.bfloat16)) and AdamW_FP32OptimParams's two fp32 moments: 2 + 8"
    )
    # aws-neuron/aws-neuron-sdk 81ce03ae archive/nxd-training/bert.rst: "~13 minutes to compile the
    # BERT-Large model training step using the pre-compilation script".
    COMPILE: ClassVar[CompileTime] = CompileTime(13, "Neuron SDK BERT-Large tutorial, one trn1.32xlarge")
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "no published measurement of phase 1 on trn1 is recorded in the project; set stepSeconds from a measured step"
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="the Neuron BERT-large tutorial (aws-neuron-samples `v2.27.0`, `dp_bert_hf_pretrain`, phase 1)",
        image="Neuron SDK 2.22.0 DLC, PyTorch 2.5.1",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "hub": "Hub Job (`bert-large-uncased` onto `/shared/hf-hub`, the ranks run offline)",
            "dataset": "dataset Job (tokenized WikiCorpus shards onto `/shared`)",
            "train": "training MPIJob (health gate, precompile, training)",
            "tensorboard": "TensorBoard",
        },
        beside=("tensorboard",),
        support=Support(
            "trn1, trn1n",
            "Neuron SDK 2.22.0, PyTorch 2.5.1 (PyTorch/XLA)",
            "end of support",
            "PyTorch/XLA training ended with Neuron 2.30; the seed tutorial, kept as it was",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("trn1-bert", "trn1-shared", "trn1-shared-runs")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("dp-bert-hf-pretrain-v2.27.0",),
        "the options passed to dp_bert_large_hf_pretrain_hdf5.py (its argparse) and the tutorial's phase-1 global"
        " batch",
    )
    CONVERSION: ClassVar[Converter] = NoConversion(
        "BERT-large is a masked-language encoder pretrained for fine-tuning, not a text generator vLLM serves"
    )

    recipe: Literal["bert-neuron"] = Field(description="bert-neuron")
    training: BertTrainingConfig = Field(default_factory=BertTrainingConfig, description="Steps and schedule.")
    data: BertDataConfig = Field(default_factory=BertDataConfig, description="Tokenized dataset.")
    repo_dir: str = Field(
        "/opt/aws-neuron-samples",
        description="The aws-neuron-samples checkout in the image (the BERT example is under it).",
    )
    tensorboard: bool = Field(True, description="TensorBoard over /shared/<workload>.")

    @property
    def hub_repos(self) -> tuple[needs.HubRepo, ...]:
        return needs.PROGRAMS["dp_bert_large_hf_pretrain_hdf5.py"].hub

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @property
    def lr_schedule(self) -> Schedule:
        """dp_bert_large_hf_pretrain_hdf5.py's get_linear_schedule_with_warmup over --max_steps: linear
        warm-up, then linear decay to 0 at the last step (aws-neuron-samples v2.27.0)."""
        t = self.training
        return Schedule(t.max_steps, t.warmup_steps, t.max_steps, 0.0, "linear", "training.warmupSteps, maxSteps")

    @property
    def checkpoint_interval(self) -> None:
        return None  # the script checkpoints per dataset shard, not per step

    @property
    def checkpoints_kept(self) -> int:
        return self.training.checkpoints_to_keep

    @property
    def checkpoint_parameters(self) -> int:
        return BERT_LARGE_PARAMETERS

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        ranks = placement(instance, self.nodes).ranks
        if self.training.grad_accum(ranks) is None:
            t = self.training
            return [
                problem(
                    f"{key}.training.globalBatchSize",
                    "conflict",
                    f"{t.global_batch_size} is not divisible by {ranks} NeuronCores x"
                    f" batchSize {t.batch_size} = {ranks * t.batch_size}",
                )
            ]
        return []
