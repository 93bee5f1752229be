"""Workloads (`workloads`): one model per recipe, discriminated by `recipe`; the registry.

`workloads` is a map of named runs. Each run names its recipe; the recipe picks its model (a
union discriminated by `recipe`). A recipe is one module of this package: its config model,
subclass of the base of its kind (base.TrainingRun, ServingRun or AcceptanceRun, each with
only the interface of its kind: a server has no checkpoints), which states the recipe's facts
as class attributes (the accelerator it needs, the ECR repository its image is built into from
images/<repository>/, the steps it plans, a training run's checkpoint model, step-time source,
docs row, example stacks, the upstream facts its arguments are held against; base.RunConfig
lists them), and one builder in
workloads/manifests/. Checks that need the node groups or the storage (unknown node group,
accelerator mismatch, node count, ranks and parallelism, Neuron SDK versus instance family,
checkpoint space) run after parsing, in config/checks/, so each can name its key.

To add a recipe: docs/contributing.md ("Checklists"), and the tests it names.
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from config.workloads.base import RECIPE_FACTS, AcceptanceRun, Kind, RunConfig, ServingRun, TrainingRun
from config.workloads.bert_neuron import BertNeuronWorkload
from config.workloads.custom import CustomWorkload
from config.workloads.ddp_cpu import DdpCpuWorkload
from config.workloads.fabric_gpu import FabricGpuRun
from config.workloads.fabric_neuron import FabricNeuronRun
from config.workloads.fsx_read import FsxReadRun
from config.workloads.llama2_neuron import Llama2NeuronWorkload
from config.workloads.llama3_nxd import Llama3NxdWorkload
from config.workloads.megatron import MegatronRun
from config.workloads.megatron_bridge import MegatronBridgeWorkload
from config.workloads.nemo_gpu import NemoGpuWorkload
from config.workloads.torchtitan_neuron import TorchTitanNeuronWorkload
from config.workloads.vllm_serve import VllmServeWorkload

__all__ = [
    "RECIPES",
    "RECIPE_FACTS",
    "AcceptanceRun",
    "BertNeuronWorkload",
    "CustomWorkload",
    "DdpCpuWorkload",
    "FabricGpuRun",
    "FabricNeuronRun",
    "FsxReadRun",
    "Kind",
    "Llama2NeuronWorkload",
    "Llama3NxdWorkload",
    "MegatronBridgeWorkload",
    "MegatronRun",
    "NemoGpuWorkload",
    "Run",
    "RunConfig",
    "ServingRun",
    "TorchTitanNeuronWorkload",
    "TrainingRun",
    "VllmServeWorkload",
    "WorkloadConfig",
]

Run = (
    Llama2NeuronWorkload
    | NemoGpuWorkload
    | BertNeuronWorkload
    | CustomWorkload
    | DdpCpuWorkload
    | MegatronBridgeWorkload
    | FabricGpuRun
    | FabricNeuronRun
    | FsxReadRun
    | Llama3NxdWorkload
    | TorchTitanNeuronWorkload
    | VllmServeWorkload
)
WorkloadConfig = Annotated[Run, Field(discriminator="recipe")]
RECIPES: dict[str, type[RunConfig]] = {model.RECIPE: model for model in get_args(Run)}
"""Recipe name -> its config model."""
