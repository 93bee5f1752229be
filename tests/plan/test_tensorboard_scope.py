"""TensorBoard reads the run's own directory: never a workload's data/ (tokenized corpora, the
downloaded dataset) or its Neuron compile cache, which it would walk on every reload."""

from __future__ import annotations

import pytest

from tests.conftest import stack_plan
from tests.pods import pods, rendered_stacks


@pytest.mark.parametrize("stack", [s for s in rendered_stacks() if "+" not in s])
def test_tensorboard_reads_only_run_directories(stack: str) -> None:
    every = [pod for pod in pods(stack_plan(stack))]
    for pod in (p for p in every if p.role == "TensorBoard"):
        command = pod.spec["containers"][0]["command"]
        logdir = command[command.index("--logdir") + 1]
        shared = [
            e["value"]
            for p in every
            for c in p.spec["containers"]
            for e in c.get("env", [])
            if e["name"] in ("NEURON_COMPILE_CACHE_URL",)
        ]
        data = [
            w
            for p in every
            for c in p.spec["containers"]
            for w in " ".join(c.get("command", [])).split()
            if "/data/" in w
        ]
        inside = [d for d in [*shared, *data] if d.startswith(logdir.rstrip("/") + "/")]
        assert not inside, f"{stack}: TensorBoard --logdir {logdir} holds {sorted(set(inside))[:3]}"
        run_ids = {
            e["value"] for p in every for c in p.spec["containers"] for e in c.get("env", []) if e["name"] == "RUN_ID"
        }
        assert logdir.rsplit("/", 1)[-1] in run_ids, f"{stack}: --logdir {logdir} is not a run's directory"
