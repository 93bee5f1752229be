"""The base of the recipes that train a Megatron GPT model (NeMo on GPUs, neuronx-nemo-megatron on
Trainium): one model shape and one `training` section, read the same way by the schedule, the
checkpoint size and the FLOP count. A model family, beside the three kinds in base.py."""

from __future__ import annotations

from pydantic import Field

from config.training import ModelConfig, TrainingConfig
from config.workloads.base import TrainingRun
from config.workloads.schedule import megatron_length, megatron_schedule
from estimates import run_length, schedule
from estimates.flops import flops_per_token
from estimates.model import LLAMA2_VOCAB, DecoderShape, llama_parameters
from facts.megatron_bridge import ModelShape


class MegatronRun(TrainingRun):
    """A run that trains a Megatron GPT model (NeMo, neuronx-nemo-megatron): shape and schedule."""

    model: ModelConfig = Field(default_factory=lambda: ModelConfig.model_validate({}), description="Model shape.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Steps and schedule.")

    @property
    def lr_schedule(self) -> schedule.Schedule:
        return megatron_schedule(self.training)

    @property
    def run_length(self) -> run_length.RunLength:
        return megatron_length(self.training.max_steps)

    @property
    def model_shape(self) -> ModelConfig:
        return self.model

    @property
    def optimizer_steps(self) -> int:
        return self.training.max_steps

    @property
    def checkpoint_interval(self) -> int:
        return self.training.checkpoint_every_steps

    @property
    def checkpoint_interval_key(self) -> str:
        return "training.checkpointEverySteps"

    @property
    def tokens_per_step(self) -> int:
        return self.model.global_batch_size * self.model.seq_length

    @property
    def decoder(self) -> DecoderShape:
        """The model's shape as the estimates read it."""
        m = self.model
        return DecoderShape(
            m.hidden_size, m.ffn_hidden_size, m.num_layers, m.num_attention_heads, m.num_kv_heads, m.seq_length
        )

    @property
    def model_vocabulary(self) -> int:
        """The vocabulary of the model's logit layer (Llama 2's; a recipe that pads or tokenizes otherwise says)."""
        return LLAMA2_VOCAB

    @property
    def model_flops_per_token(self) -> float:
        d = self.decoder
        layers, heads, kv = d.num_layers, d.num_attention_heads, d.num_kv_heads
        shape = ModelShape(layers, d.hidden_size, d.ffn_hidden_size, heads, kv, self.model_vocabulary)
        return flops_per_token(shape, d.seq_length)

    @property
    def checkpoints_kept(self) -> int:
        return self.training.checkpoints_to_keep

    @property
    def checkpoint_parameters(self) -> int:
        return llama_parameters(self.decoder)
