"""Models that fit where they run: a serving run refused at plan time, naming the key, where
vLLM would crash-loop on the cluster while `pulumi up` reports success.

- Weights plus the KV cache of one `maxModelLen` sequence within the replica's accelerator
  memory at vLLM's default gpu_memory_utilization (0.9): vLLM 0.24.0 refuses to start when the
  KV cache left cannot hold one sequence of max_model_len (v1/core/kv_cache_utils.py
  check_enough_kv_cache_memory).
- Attention heads divisible by tensorParallel (vllm/config/model.py verify_with_parallel_config)
  and KV heads split or replicated evenly (model_executor/layers/linear.py QKVParallelLinear:
  kv_heads % tp, or tp % kv_heads where tp is larger).
- maxModelLen within the model's max_position_embeddings where its shape is known.
- The served models' bf16 weights (staged from the Hub, or converted) beside the checkpoints the
  training runs keep, within the share of /shared the checkpoints may take.
- Every replica's nodes within the team's quota and what it can borrow: Kueue admits each
  replica's pods against the queue, and those beyond it stay pending (kueue v0.19.2 pod
  integration).
"""

from __future__ import annotations

from config.checks.groups import Groups
from config.checks.teams import lendable, unowned_nodes
from config.problems import problem
from config.stack import StackConfig
from config.workloads import TrainingRun, VllmServeWorkload
from estimates import checkpoints
from estimates.checkpoints import GIB, STORAGE_SHARE
from facts import serving
from facts.nodegroups import NodeGroup
from facts.served_models import HUB_SHAPES, AttentionShape


def served_shape(run: VllmServeWorkload, cfg: StackConfig) -> AttentionShape | None:
    """The attention shape served: a listed Hub model's, or the training run's own (None: unknown)."""
    if run.model.hub is not None:
        return HUB_SHAPES.get(run.model.hub)
    trained = cfg.workloads.get(run.model.workload or "")
    m = trained.model_shape if isinstance(trained, TrainingRun) else None
    if m is None:
        return None
    head_dim = m.hidden_size // m.num_attention_heads
    return AttentionShape(m.num_layers, m.num_attention_heads, m.num_kv_heads, head_dim, m.seq_length)


def heads_split(name: str, run: VllmServeWorkload, shape: AttentionShape) -> list[str]:
    """Attention heads and KV heads over the replica's tensor-parallel ranks."""
    tp, heads, kv = run.tensor_parallel, shape.attention_heads, shape.kv_heads
    if heads % tp == 0 and (kv % tp == 0 if tp <= kv else tp % kv == 0):
        return []
    valid = [d for d in range(1, heads + 1) if heads % d == 0 and (kv % d == 0 if d <= kv else d % kv == 0)]
    said = (
        f"{tp} does not split the model's {heads} attention heads and {kv} KV heads evenly (vLLM refuses"
        f" it at start); use one of {', '.join(map(str, valid))}"
    )
    return [
        problem(
            f"workloads.{name}.tensorParallel",
            "conflict",
            said,
            value=str(tp),
            allowed=", ".join(map(str, valid)),
        )
    ]


def context_fits(
    name: str, run: VllmServeWorkload, shape: AttentionShape, ng: NodeGroup, weights_gib: float
) -> list[str]:
    """One maxModelLen sequence's KV cache beside the weights, and within the model's positions."""
    key = f"workloads.{name}.maxModelLen"
    positions = shape.max_position_embeddings
    if positions is not None and run.max_model_len > positions:
        said = f"{run.max_model_len} is longer than the model's {positions} positions (max_position_embeddings)"
        return [problem(key, "conflict", said, value=str(run.max_model_len), allowed=f"at most {positions}")]
    memory = serving.device_memory_gib(ng.instance)
    if not memory:
        return []
    devices = run.replica_placement(ng.instance).devices
    room = devices * memory * serving.MEMORY_SHARE - weights_gib
    per_token = shape.kv_bytes_per_token(run.tensor_parallel) / 2**30
    need = per_token * run.max_model_len
    if need <= room:
        return []
    longest = int(max(room, 0) / per_token) // 1024 * 1024
    said = (
        f"one {run.max_model_len:,}-token sequence needs {need:,.1f} GiB of KV cache, but {devices} x"
        f" {memory} GiB ({ng.instance.accelerator_name}) at {serving.MEMORY_SHARE:.0%} leave {max(room, 0):,.1f} GiB"
        f" beside {weights_gib:,.0f} GiB of bf16 weights; lower maxModelLen"
        f" ({'to ' + format(longest, ',') if longest else 'or'}) or raise tensorParallel"
    )
    return [problem(key, "conflict", said, value=str(run.max_model_len), allowed=f"at most {longest}")]


def replicas_admitted(name: str, run: VllmServeWorkload, cfg: StackConfig, groups: Groups) -> list[str]:
    """All replicas' nodes within the team's quota and borrowing (one replica's is run_team's rule)."""
    ng = groups.get(run.node_group)
    team = cfg.teams.get(run.team) if run.team else None
    if ng is None or team is None or team.node_group != run.node_group:
        return []
    unowned = unowned_nodes(cfg.teams, groups, True) if cfg.queueing.default_queue else None
    lend = lendable(run.team or "", cfg.teams, unowned)
    borrow = lend if team.borrowing_limit_nodes is None else min(team.borrowing_limit_nodes, lend)
    reach, needed = team.nodes + borrow, run.nodes_needed(ng.instance)
    if run.nodes > reach or needed <= reach:
        return []
    said = (
        f"{run.replicas} replicas take {needed} nodes of {ng.name!r}; team {run.team!r} has {team.nodes} and can"
        f" borrow {borrow}: the replicas beyond {reach} nodes would stay pending (teams.{run.team})"
    )
    most = reach // run.nodes if run.spans_nodes else reach * run.replicas_per_node(ng.instance)
    said += f"; at most {most} replicas, or raise the team's nodes or borrowingLimitNodes"
    return [problem(f"workloads.{name}.replicas", "conflict", said, value=str(run.replicas), allowed=f"at most {most}")]


def serving_fit(name: str, run: VllmServeWorkload, cfg: StackConfig, groups: Groups) -> list[str]:
    """Every rule above for one serving run (its source and node group already checked)."""
    ng = groups.get(run.node_group)
    shape = served_shape(run, cfg)
    if ng is None or ng.instance.accelerator is None:
        return []
    problems = replicas_admitted(name, run, cfg, groups)
    if shape is None:
        return problems
    split = heads_split(name, run, shape)
    if split:
        return problems + split
    parameters = run.served_parameters(cfg.workloads) or 0
    return problems + context_fits(name, run, shape, ng, parameters * serving.BYTES_PER_PARAMETER / 2**30)


def served_models_fit(cfg: StackConfig) -> list[str]:
    """Every served model's weights on /shared beside the runs' kept checkpoints: a Hub model
    staged once, a training run's converted folder (one per run converted; older runs' folders
    stay until removed). Only where the checkpoints alone fit (else checkpoints_fit says so)."""
    fs = cfg.storage.file_system
    kept = sum(
        p.kept_bytes
        for run in cfg.workloads.values()
        if isinstance(run, TrainingRun) and (p := checkpoints.plan(run.checkpoint_input, fs))
    )
    served = {
        name: (run.served_parameters(cfg.workloads) or 0) * serving.BYTES_PER_PARAMETER
        for name, run in sorted(cfg.workloads.items())
        if isinstance(run, VllmServeWorkload)
    }
    room = cfg.storage.storage_capacity_gib * GIB * STORAGE_SHARE
    if kept > room or kept + sum(served.values()) <= room:
        return []
    listed = ", ".join(f"workloads.{n}: {b / 1e9:,.0f} GB" for n, b in served.items())
    said = (
        f"the served models ({listed}) beside {kept / 1e9:,.0f} GB of kept checkpoints need"
        f" {(kept + sum(served.values())) / 1e12:,.2f} TB, more than {STORAGE_SHARE:.0%} of"
        f" {cfg.storage.storage_capacity_gib} GiB; grow the file system (a multiple of 2400 GiB)"
    )
    value = str(cfg.storage.storage_capacity_gib)
    return [problem("storage.storageCapacityGib", "conflict", said, value=value, hint="grow the file system")]
