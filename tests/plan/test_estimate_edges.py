"""No estimate crashes the plan, and every size is held to the device it runs on.

A Neuron health gate's all-reduce holds a buffer of its message size on each rank's NeuronCore:
a size larger than that NeuronCore's memory (16 GiB on Trainium, 24 GiB for a logical
NeuronCore of Trainium2 at LNC=2: Neuron SDK 2.32.0 docs, tests/upstream/neuron-device-memory-2.32.0.yaml)
fails every launch, so the plan refuses it naming the key, as it does for GPUs. A fabric
acceptance run whose modeled length rounded to 0 s made the cost raise (exit 1, a traceback);
the sweep below plans edge values of every input of the acceptance estimate (size, floor,
sweep, nodes) on each accelerator and asserts exit 0 or 2, never 1."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from facts import instances
from facts.device_memory import rank_memory_bytes
from tests.conftest import plan_exit
from tests.plan.test_fabric_acceptance import _values

TYPES = {"trn1.32xlarge": "fabric-neuron", "trn2.48xlarge": "fabric-neuron", "p5en.48xlarge": "fabric-gpu"}


def _gib(itype: str) -> int:
    room = rank_memory_bytes(instances.get(itype))
    assert room is not None
    return room >> 30


@pytest.mark.parametrize("itype", ["trn1.32xlarge", "trn2.48xlarge"])
def test_a_neuron_gate_larger_than_a_neuroncore_is_refused(itype: str, tmp_path: Path) -> None:
    fits = f"{_gib(itype)}G"
    code, err = plan_exit(_values("fabric-neuron", itype, healthCheck={"messageSize": f"{_gib(itype) + 1}G"}), tmp_path)
    assert code == 2, err
    assert err.startswith("workloads.fab.healthCheck.messageSize:") and f"at most {fits}" in err, err
    code, err = plan_exit(_values("fabric-neuron", itype, healthCheck={"messageSize": fits}, sweep=False), tmp_path)
    assert code == 0, err


def _edges() -> list[tuple[str, dict[str, Any]]]:
    """Edge values of the acceptance estimate's inputs, paired so that each value of each input
    is planned on each accelerator: the smallest and largest sizes the key takes, a size just
    past a device's memory, floors that make the model ~0 s or absurdly long, 2 and many nodes."""
    sizes = ["1", "1K", "999999K", "17G", "999999G"]
    floors = [1e9, 0.001]
    cases = []
    for itype, (i, size) in itertools.product(TYPES, enumerate(sizes)):
        nodes = 4 if instances.get(itype).ultraserver else (2, 8)[i % 2]
        hc = {"messageSize": size, "minBusBandwidthGBPerSecond": floors[i % 2]}
        cases.append((itype, {"healthCheck": hc, "sweep": bool(i % 2), "nodes": nodes}))
    return cases


@pytest.mark.parametrize(("itype", "run"), _edges(), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_no_estimate_crashes_the_plan(itype: str, run: dict[str, Any], tmp_path: Path) -> None:
    code, err = plan_exit(_values(TYPES[itype], itype, **run), tmp_path)
    assert code in (0, 2), f"exit {code}: {err[-600:]}"
    if code == 2:
        assert "Traceback" not in err and all(line.startswith("workloads.fab") for line in err.splitlines()), err
