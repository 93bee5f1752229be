"""What the Megatron-based recipes share: Hydra overrides of `megatron_gpt_pretraining.py`
(NeMo and neuronx-nemo-megatron), and the torchrun that mpirun starts once per node."""

from __future__ import annotations

import shlex

from config.workloads import ModelConfig, RunConfig, TrainingConfig
from workloads.manifests.objects import Context, run_dir


def nemo_overrides(
    workload_name: str, run: RunConfig, m: ModelConfig, t: TrainingConfig, ctx: Context, steps: int
) -> list[str]:
    """Hydra overrides of megatron_gpt_pretraining.py shared by neuronx-nemo-megatron and NeMo."""
    return [
        f"trainer.devices={ctx.node_group.instance.ranks_per_node}",
        f"trainer.num_nodes={run.nodes}",
        f"trainer.max_steps={steps}",
        "trainer.log_every_n_steps=1",
        # Logs in the run directory, checkpoints in <run dir>/checkpoints; a restarted launcher
        # resumes from the latest one there (none yet: start from scratch).
        f"exp_manager.explicit_log_dir={run_dir(ctx, workload_name, run.run_id)}",
        "exp_manager.create_tensorboard_logger=True",
        "exp_manager.resume_if_exists=True",
        "exp_manager.resume_ignore_no_checkpoint=True",
        "exp_manager.create_checkpoint_callback=True",
        f"+exp_manager.checkpoint_callback_params.every_n_train_steps={t.checkpoint_every_steps}",
        f"model.micro_batch_size={m.micro_batch_size}",
        f"model.global_batch_size={m.global_batch_size}",
        f"model.tensor_model_parallel_size={m.tensor_parallel}",
        f"model.pipeline_model_parallel_size={m.pipeline_parallel}",
        f"model.sequence_parallel={m.sequence_parallel and m.tensor_parallel > 1}",
        f"model.encoder_seq_length={m.seq_length}",
        f"model.max_position_embeddings={m.seq_length}",
        f"model.num_layers={m.num_layers}",
        f"model.hidden_size={m.hidden_size}",
        f"model.ffn_hidden_size={m.ffn_hidden_size}",
        f"model.num_attention_heads={m.num_attention_heads}",
        f"model.num_query_groups={m.num_kv_heads}",
        "model.optim.name=adamw",
        f"model.optim.lr={t.learning_rate:g}",
        f"model.optim.betas=[{t.adam_beta1:g},{t.adam_beta2:g}]",
        f"model.optim.weight_decay={t.weight_decay:g}",
        "model.optim.sched.name=CosineAnnealing",
        f"model.optim.sched.warmup_steps={t.warmup_steps}",
        f"model.optim.sched.constant_steps={t.constant_steps}",
        f"model.optim.sched.min_lr={t.min_learning_rate:g}",
    ]


def torchrun(code_dir: str, script: str, args: list[str], prefix: str = "") -> str:
    """The launcher line: mpirun starts one torchrun per node, in `code_dir`."""
    command = (
        f"{prefix}torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES --node_rank=$OMPI_COMM_WORLD_RANK"
        f" --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {script} " + " ".join(shlex.quote(a) for a in args)
    )
    return f"$MPIRUN bash -c {shlex.quote(f'cd {code_dir} && {command}')}"
