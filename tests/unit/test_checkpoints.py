"""Checkpoint sizing: sizes from the model shape, write time at the file system's throughput,
the config-time capacity check, and example stacks that spend at most 2% of training writing."""

from __future__ import annotations

import pytest

import config
from config.storage import StorageConfig
from config.workloads import CustomWorkload, Llama2NeuronWorkload, NemoGpuWorkload
from estimates import checkpoints, model
from tests import upstream
from tests.conftest import stack_plan, stack_values


@pytest.mark.parametrize(("preset", "billions"), [("7b", 6.74), ("13b", 13.02), ("70b", 68.98)])
def test_llama2_parameter_counts_match_the_published_sizes(preset: str, billions: float) -> None:
    # Meta's Llama 2 paper, Table 1 / model cards: 7B = 6.74B, 13B = 13.0B, 70B = 69.0B parameters.
    run = Llama2NeuronWorkload.model_validate(
        {"recipe": "llama2-neuron", "nodeGroup": "trn1", "nodes": 4, "runId": "r", "model": {"preset": preset}}
    )
    n = model.llama_parameters(run.decoder)
    assert n / 1e9 == pytest.approx(billions, abs=0.01)


def test_write_time_follows_storage_throughput() -> None:
    slow = StorageConfig.model_validate({})
    fast = StorageConfig.model_validate({"throughputPerTib": 500})
    assert slow.file_system.mb_per_second == pytest.approx(1200 / 1024 * 250)
    run = Llama2NeuronWorkload.model_validate(
        {"recipe": "llama2-neuron", "nodeGroup": "trn1", "nodes": 4, "runId": "r"}
    )
    a = checkpoints.plan(run.checkpoint_input, slow.file_system, 20.0)
    b = checkpoints.plan(run.checkpoint_input, fast.file_system, 20.0)
    assert a is not None and b is not None
    assert a.write_seconds == pytest.approx(2 * b.write_seconds)
    assert a.size_bytes == pytest.approx(6.74e9 * 12, rel=0.01)
    assert b.write_share == pytest.approx(b.write_seconds / (b.write_seconds + 500 * 20.0))


def test_write_time_counts_every_checkpoint_written_per_interval() -> None:
    storage = StorageConfig.model_validate({}).file_system
    one = checkpoints.plan(checkpoints.CheckpointInput(checkpoints.CheckpointSize(12, "x"), 10**9, 2, 500), storage)
    twice = checkpoints.CheckpointSize(12, "x", written_per_interval=2)
    two = checkpoints.plan(checkpoints.CheckpointInput(twice, 10**9, 2, 500), storage)
    assert one is not None and two is not None
    assert two.write_seconds == pytest.approx(2 * one.write_seconds)
    assert two.kept_bytes == one.kept_bytes


def test_unknown_step_time_gives_no_share() -> None:
    storage = StorageConfig.model_validate({}).file_system
    run = NemoGpuWorkload.model_validate({"recipe": "nemo-gpu", "nodeGroup": "p5", "nodes": 2, "runId": "r"})
    p = checkpoints.plan(run.checkpoint_input, storage)
    assert p is not None and p.write_share is None
    custom = CustomWorkload.model_validate(
        {"recipe": "custom", "nodeGroup": "p5", "nodes": 1, "runId": "r", "image": "x/y:1", "command": ["true"]}
    )
    assert checkpoints.plan(custom.checkpoint_input, storage) is None


def test_70b_needs_a_bigger_file_system() -> None:
    values = config.from_stack_values(stack_values("trn1-llama2"))
    values["workloads"]["llama2"]["model"] = {"preset": "70b"}
    with pytest.raises(config.ConfigError) as e:
        config.parse(values)
    assert any(p.startswith("storage.storageCapacityGib: the checkpoints") for p in e.value.problems)
    values["storage"] = {**values["storage"], "storageCapacityGib": 2400, "throughputPerTib": 500}
    config.parse(values)


@pytest.mark.parametrize("stack", ["trn1-llama2", "trn1-bert", "trn1-shared", "p4de-nemo"])
def test_example_stacks_spend_at_most_two_percent_writing_checkpoints(stack: str) -> None:
    runs = [r for r in stack_plan(stack)["resources"] if r["type"] == "llm-training-eks:workloads:Workload"]
    assert runs
    for run in runs:
        c = run["inputs"]["checkpoints"]
        if c.get("writeShare") is not None:
            assert c["writeShare"] <= checkpoints.MAX_WRITE_SHARE, run["name"]
        elif c.get("everySteps") is None:  # BERT: per dataset shard; ~11 s a checkpoint
            assert c["writeSeconds"] <= 30, run["name"]


NEMO_COUNTS = upstream.facts("nemo-checkpoint-counts")


def test_nemo_counts_checkpoints_as_lightning_and_nemo_do() -> None:
    """nemo-gpu renders save_top_k=k with save_last=True (monitor step, mode max): Lightning 2.3's
    ModelCheckpoint writes the top-k checkpoint and a full `last` copy each interval and keeps
    k + 1; the model's embedding and output layers are sized with GPT-2's vocabulary padded as
    NeMo pads it (tests/upstream/nemo-checkpoint-counts.yaml)."""
    values = config.from_stack_values(stack_values("p4de-nemo"))
    cfg = config.parse(values)
    (run,) = [r for r in cfg.workloads.values() if isinstance(r, NemoGpuWorkload)]
    lightning, nemo = NEMO_COUNTS["lightning"], NEMO_COUNTS["nemo"]
    p = checkpoints.plan(run.checkpoint_input, cfg.storage.file_system)
    assert p is not None
    k = run.training.checkpoints_to_keep
    assert lightning["kept_with_save_last"] == "save_top_k + 1" and p.kept == k + 1
    assert p.per_interval == lightning["writes_per_interval_with_save_last"]
    multiple = nemo["make_vocab_size_divisible_by"] * run.model.tensor_parallel
    padded = -(-NEMO_COUNTS["gpt2_vocab_size"] // multiple) * multiple
    assert run.checkpoint_parameters == model.llama_parameters(run.decoder, padded)
    assert f"{NEMO_COUNTS['gpt2_vocab_size']} padded to {padded}" in p.assumes
    size_one = run.checkpoint_parameters * run.CHECKPOINTS.bytes_per_parameter
    assert p.write_seconds == pytest.approx(2 * size_one / (cfg.storage.file_system.mb_per_second * 1e6))
