"""What the recipes run, held to the upstream facts of the tools they call: huggingface-cli of
the pinned huggingface-hub, the BERT tutorial script's options and batch rule, and
neuronx-nemo-megatron's compile-only run."""

from __future__ import annotations

from typing import Any

import pytest

from tests import upstream
from tests.conftest import resources, stack_plan
from tests.unit.test_recipes import built_with
from tests.upstream import arguments
from tests.upstream.hydra import launches

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
BERT = upstream.facts("dp-bert-hf-pretrain-v2.27.0")


def _launcher(obj: dict[str, Any]) -> str:
    (c,) = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return arguments.script(c)


def test_downloads_copy_files_onto_shared() -> None:
    """With huggingface-hub < 0.23 (neuronx-nemo-megatron's pin), `--local-dir` symlinks files
    over 5 MB into the pod's cache unless `--local-dir-use-symlinks False`; a link left behind
    fails the Job."""
    jobs = [r["inputs"] for r in resources(stack_plan("trn1-llama2"), "kubernetes:batch/v1:Job")]
    assert arguments.huggingface_downloads(jobs) == 2
    for _, c in arguments.containers(jobs):
        if "huggingface-cli download" in arguments.script(c):
            assert 'if [ -n "$(find ' in arguments.script(c), "a link left behind fails the Job"


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_bert_passes_only_the_scripts_options_and_keeps_the_global_batch(nodes: int) -> None:
    """The tutorial keeps phase 1's global batch at 16384 by dividing the
    gradient accumulation by the node count; the options are the script's own."""
    (train,) = [s.obj for s in built_with("bert-neuron", {"nodes": nodes}) if s.obj["kind"] == "MPIJob"]
    runs = arguments.bert_runs(_launcher(train))
    assert len(runs) == 2  # precompile, training
    for words in runs:
        options = {w.split("=", 1)[0] for w in words if w.startswith("--")}
        assert options <= set(BERT["options"]), options - set(BERT["options"])
        args = dict(w.split("=", 1) for w in words if "=" in w)
        ranks = nodes * 32
        assert (
            int(args["--batch_size"]) * int(args["--grad_accum_usteps"]) * ranks == BERT["phase1"]["global_batch_size"]
        )


def test_bert_precompile_is_the_tutorials_short_run_outside_the_checkpoints() -> None:
    (train,) = [s.obj for s in built_with("bert-neuron", {}) if s.obj["kind"] == "MPIJob"]
    precompile, training = arguments.bert_runs(_launcher(train))
    assert "--steps_this_run=10" in precompile
    assert "--output_dir=/shared/runs/w/r1/precompile" in precompile
    assert "--output_dir=/shared/runs/w/r1/checkpoints" in training
    assert "neuron_parallel_compile torchrun" in _launcher(train)


def test_llama2_precompile_is_upstreams_compile_only_run() -> None:
    """neuronx-nemo-megatron's COMPILE=1 run turns TensorBoard and the
    checkpoint callback off; it runs a few steps in its own log directory, not the run's."""
    facts = upstream.facts("neuronx-nemo-megatron-2.21")["compile_only_run"]
    plan = stack_plan("trn1-llama2")
    (job,) = [r["inputs"] for r in resources(plan, MPIJOB)]
    precompile, train = launches(_launcher(job))
    assert "neuron_parallel_compile" in precompile.prefix
    args = dict(o.split("=", 1) for o in precompile.overrides)
    assert args["exp_manager.create_tensorboard_logger"] == facts["CREATE_TB_LOGGER"]
    assert args["exp_manager.create_checkpoint_callback"] == facts["CHECKPOINT_CALLBACK"]
    assert args["trainer.max_steps"] == str(facts["TRAIN_ITERS"])
    assert args["exp_manager.explicit_log_dir"] == "/shared/runs/llama2/run-001/precompile"
    assert (
        dict(o.split("=", 1) for o in train.overrides)["exp_manager.explicit_log_dir"] == "/shared/runs/llama2/run-001"
    )
    assert "neuron_parallel_compile" not in train.prefix
