"""What the Megatron-based recipes pass to `megatron_gpt_pretraining.py`, per framework.

Every override names a key of the upstream config at the version the image carries (a plain
`key=value` only for keys the config has, `+key=value` only for keys it lacks); the tests
compose them with hydra-core against the recorded key sets (tests/unit/test_hydra_overrides.py):
- neuronx-nemo-megatron 0.8.0 (2.21_release): conf/megatron_llama_config.yaml, and
  conf/megatron_llama_70b_config.yaml for grouped-query attention (`model.num_kv_heads` is only
  there). The values follow test_llama.sh / test_llama_gqa.sh and train_setup.sh (bf16 with
  stochastic rounding); departures are commented.
- NeMo r2.0.0rc1 (NGC nemo:24.07): conf/megatron_llama_config.yaml.
"""

from __future__ import annotations

import shlex

from config.training import GPT2_MERGES, GPT2_VOCAB, ModelConfig, NemoTokenizerConfig, TrainingConfig

SCRIPT = "megatron_gpt_pretraining.py"
EXAMPLES = "examples/nlp/language_modeling"
NEURONX_CONFIG = "megatron_llama_config"
NEURONX_GQA_CONFIG = "megatron_llama_70b_config"


def _schedule(m: ModelConfig, t: TrainingConfig, *, nodes: int, ranks_per_node: int, steps: int) -> list[str]:
    """Trainer, shape, parallelism and optimizer schedule: keys both frameworks' configs have."""
    return [
        f"trainer.devices={ranks_per_node}",
        f"trainer.num_nodes={nodes}",
        "trainer.max_epochs=null",
        f"trainer.max_steps={steps}",
        # As upstream: validate once, at the end, on one batch.
        f"trainer.val_check_interval={steps}",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "trainer.log_every_n_steps=1",
        f"model.micro_batch_size={m.micro_batch_size}",
        f"model.global_batch_size={m.global_batch_size}",
        f"model.tensor_model_parallel_size={m.tensor_parallel}",
        f"model.pipeline_model_parallel_size={m.pipeline_parallel}",
        f"model.sequence_parallel={m.sequence_parallel and m.tensor_parallel > 1}",
        f"model.encoder_seq_length={m.seq_length}",
        f"model.max_position_embeddings={m.seq_length}",
        f"model.data.seq_length={m.seq_length}",
        f"model.num_layers={m.num_layers}",
        f"model.hidden_size={m.hidden_size}",
        f"model.ffn_hidden_size={m.ffn_hidden_size}",
        f"model.num_attention_heads={m.num_attention_heads}",
        f"model.init_method_std={m.init_method_std:g}",
        f"model.layernorm_epsilon={m.layernorm_epsilon:g}",
        f"model.optim.lr={t.learning_rate:g}",
        f"model.optim.betas=[{t.adam_beta1:g},{t.adam_beta2:g}]",
        f"model.optim.weight_decay={t.weight_decay:g}",
        "model.optim.sched.name=CosineAnnealing",
        f"model.optim.sched.warmup_steps={t.warmup_steps}",
        f"model.optim.sched.constant_steps={t.constant_steps}",
        f"model.optim.sched.min_lr={t.min_learning_rate:g}",
    ]


def _logging(log_dir: str, t: TrainingConfig, *, checkpoints: bool, tensorboard_key: str | None) -> list[str]:
    """Where logs and checkpoints go, and how the run resumes.

    Checkpoints every `checkpointEverySteps` (upstream saves every 10 hours of wall time,
    `train_time_interval=36000`: steps make the loss on a restart predictable), ranked by step
    so the newest `checkpointsToKeep` are kept, and resumed from `<log dir>/checkpoints`.
    """
    out = [
        f"exp_manager.explicit_log_dir={log_dir}",
        f"exp_manager.resume_if_exists={checkpoints}",
        f"exp_manager.resume_ignore_no_checkpoint={checkpoints}",
        f"exp_manager.create_checkpoint_callback={checkpoints}",
    ]
    if tensorboard_key:
        out.append(f"{tensorboard_key}={checkpoints}")
    if checkpoints:
        out += [
            "exp_manager.checkpoint_callback_params.monitor=step",
            "exp_manager.checkpoint_callback_params.mode=max",
            f"exp_manager.checkpoint_callback_params.save_top_k={t.checkpoints_to_keep}",
            f"+exp_manager.checkpoint_callback_params.every_n_train_steps={t.checkpoint_every_steps}",
        ]
    return out


def neuronx_config(m: ModelConfig) -> str:
    """megatron_llama_70b_config where the model uses grouped-query attention (the only config
    with `model.num_kv_heads`, as llama_70b.sh -> test_llama_gqa.sh), else megatron_llama_config."""
    return NEURONX_GQA_CONFIG if m.num_kv_heads != m.num_attention_heads else NEURONX_CONFIG


def neuronx_overrides(
    m: ModelConfig,
    t: TrainingConfig,
    *,
    nodes: int,
    ranks_per_node: int,
    steps: int,
    log_dir: str,
    tokenizer_dir: str,
    data_prefix: str,
    checkpoints: bool,
) -> list[str]:
    """neuronx-nemo-megatron 0.8.0: test_llama.sh (or test_llama_gqa.sh) with train_setup.sh's
    bf16 + stochastic rounding choices (precision 32 with XLA_USE_BF16=1, adamw, no ZeRO-1).

    `checkpoints=False` is upstream's compile-only run (COMPILE=1): no TensorBoard logger, no
    checkpoint callback, and nothing resumed.
    """
    gqa = m.num_kv_heads != m.num_attention_heads
    out = [
        *_schedule(m, t, nodes=nodes, ranks_per_node=ranks_per_node, steps=steps),
        "trainer.accumulate_grad_batches=1",
        "trainer.precision=32",
        "model.megatron_amp_O2=False",
        f"model.tokenizer.type={tokenizer_dir}",
        "model.hidden_dropout=0",
        f"model.data.data_prefix=[1.0,{data_prefix}]",
        "model.data.num_workers=1",
        "model.optim.name=adamw",
        "model.optim.capturable=True",
        "model.activations_checkpoint_granularity=full",
        "model.activations_checkpoint_method=uniform",
        "model.activations_checkpoint_num_layers=1",
        "+model.save_xser=True",
        "+model.load_xser=True",
        "model.wrap_with_zero=False",
        "model.zero_use_master_weight=False",
        "model.use_cpu_initialization=True",
        *_logging(log_dir, t, checkpoints=checkpoints, tensorboard_key="exp_manager.create_tensorboard_logger"),
    ]
    if gqa:
        out += [f"model.num_kv_heads={m.num_kv_heads}", "+trainer.num_sanity_val_steps=0"]
    else:
        out += ["+model.use_flash_attention=False", "model.zero_use_fp32_grad_accum=False"]
    return out


def tokenizer_overrides(tok: NemoTokenizerConfig) -> list[str]:
    """`model.tokenizer.*`: every key exists in NeMo's llama config, where `model` is `???`."""
    megatron = tok.library == "megatron"
    values = {
        "library": tok.library,
        "type": tok.effective_type,
        "model": tok.model,
        "vocab_file": tok.vocab_file or (GPT2_VOCAB if megatron else None),
        "merge_file": tok.merge_file or (GPT2_MERGES if megatron else None),
    }
    return [f"model.tokenizer.{k}={'null' if v is None else v}" for k, v in values.items()]


def nemo_overrides(
    m: ModelConfig,
    t: TrainingConfig,
    *,
    nodes: int,
    ranks_per_node: int,
    log_dir: str,
    tokenizer: NemoTokenizerConfig,
    data_prefix: str | None,
) -> list[str]:
    """NeMo r2.0.0rc1: its llama config with bf16 mixed precision and its fused_adam (AdamW).

    `model.num_query_groups` is NeMo's grouped-query key. `model.data.data_prefix` is only a
    comment in that config, so it is added with `+`, for mock data too (megatron_gpt_model
    reads it either way). TensorBoard is on by the exp_manager schema's default (the config
    has no key for it). Resume finds only `*last` checkpoints, so `save_last` stays on.
    """
    data = (
        [f"+model.data.data_prefix=[1.0,{data_prefix}]"]
        if data_prefix
        else ["model.data.data_impl=mock", "+model.data.data_prefix=[]"]
    )
    return [
        *_schedule(m, t, nodes=nodes, ranks_per_node=ranks_per_node, steps=t.max_steps),
        "trainer.precision=bf16-mixed",
        f"model.num_query_groups={m.num_kv_heads}",
        *tokenizer_overrides(tokenizer),
        *data,
        *_logging(log_dir, t, checkpoints=True, tensorboard_key=None),
        "+exp_manager.checkpoint_callback_params.save_last=True",
        # The finished model as one .nemo (NeMo's converter to Hugging Face reads it).
        "exp_manager.checkpoint_callback_params.save_nemo_on_train_end=True",
    ]


def torchrun(code_dir: str, script: str, args: list[str], prefix: str = "", setup: str = "") -> str:
    """The launcher line: mpirun starts one torchrun per node, in `code_dir`, after `setup`
    (shell commands ending in `&& ` or `; `) and behind `prefix` (e.g. neuron_parallel_compile)."""
    command = (
        f"{prefix}torchrun --nproc_per_node=$NPROC_PER_NODE --nnodes=$NNODES --node_rank=$OMPI_COMM_WORLD_RANK"
        f" --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {script} " + " ".join(shlex.quote(a) for a in args)
    )
    return f"$MPIRUN bash -c {shlex.quote(f'cd {code_dir} && {setup}{command}')}"
