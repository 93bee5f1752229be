"""What Megatron Core and Megatron Bridge refuse of a `megatron-bridge` run's parallelism at start-up
or at its first step, refused at plan time instead (tests/upstream/megatron-lm-core_r0.19.0.yaml
parallelism_rules, tests/upstream/megatron-sequence-parallel.yaml): the recipe's own module grew
past its size with these rules, which one reader checks against Megatron's, apart from the config."""

from __future__ import annotations

from config.problems import problem
from facts import instances
from facts import megatron_bridge as bridge
from facts.nodegroups import placement


def parallelism_problems(
    key: str,
    r: dict[str, int | bool],
    shape: bridge.ModelShape,
    model: str,
    nodes: int,
    instance: instances.InstanceType,
) -> list[str]:
    """Each problem of the run's resolved parallelism `r` (MegatronBridgeWorkload.resolved) as
    `<key>.<camelCase path>: ...`, with what would be valid."""
    tp, pp, cp, vp = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["vp"])
    gpus = placement(instance, nodes).devices
    out: list[str] = []
    if tp > instance.accelerator_count:
        out.append(
            problem(
                f"{key}.parallelism.tensorParallel",
                "conflict",
                f"{tp} spans nodes; at most {instance.accelerator_count}",
            )
        )
    if shape.heads % tp or (shape.kv_heads % tp and tp % shape.kv_heads):
        out.append(
            problem(
                f"{key}.parallelism.tensorParallel",
                "conflict",
                f"{tp} must divide the {shape.heads} attention heads and divide or be a"
                f" multiple of the {shape.kv_heads} query groups of {model}",
            )
        )
    if shape.layers % (pp * vp):
        out.append(
            problem(
                f"{key}.parallelism.pipelineParallel",
                "conflict",
                f"{pp} stages x {vp} virtual stages must divide the {shape.layers} layers of {model}",
            )
        )
    if gpus % (tp * pp * cp):
        out.append(
            problem(
                f"{key}.nodes",
                "conflict",
                f"{gpus} GPUs are not a multiple of TP x PP x CP = {tp * pp * cp} (tensorParallel,"
                " pipelineParallel, contextParallel)",
            )
        )
    elif int(r["gbs"]) % (int(r["mbs"]) * (dp := gpus // (tp * pp * cp))):
        out.append(
            problem(
                f"{key}.training.globalBatchSize",
                "conflict",
                f"{r['gbs']} is not a multiple of microBatchSize {r['mbs']} x data-parallel size {dp}",
            )
        )
    return out + sequence_problems(key, r)


def sequence_problems(key: str, r: dict[str, int | bool]) -> list[str]:
    """What the sequence length must divide into: 2 x CP chunks (Megatron Bridge's context
    parallelism), and with sequence parallelism each context-parallel rank's sequence over the TP
    ranks (Megatron Core core_r0.19.0 tensor_parallel/mappings.py:73 asserts it in the first
    forward; tests/upstream/megatron-sequence-parallel.yaml)."""
    seq, tp, cp = int(r["seq"]), int(r["tp"]), int(r["cp"])
    if cp > 1 and seq % (2 * cp):
        return [
            problem(
                f"{key}.training.seqLength",
                "conflict",
                f"{seq} must be a multiple of 2 x contextParallel = {2 * cp}",
            )
        ]
    if r["sp"] and tp > 1 and (seq // cp) % tp:
        return [
            problem(
                f"{key}.training.seqLength",
                "conflict",
                f"{seq} tokens{f' / contextParallel {cp}' if cp > 1 else ''} do not split over tensorParallel {tp}"
                " with sequence parallelism (Megatron Core splits the sequence over the TP ranks)",
                value=str(seq),
                allowed=f"a multiple of {tp * cp}, or sequenceParallel: false",
            )
        ]
    return []
