"""The device memory one rank sees (facts/device_memory.py) is the Neuron SDK 2.32.0 docs' figure
(tests/upstream/neuron-device-memory-2.32.0.yaml) split as the chip splits it: per NeuronCore on
Trainium, per HBM bank (two physical cores, one logical core at LNC=2) on Trainium2."""

from __future__ import annotations

import pytest

from facts import device_memory, instances
from tests import upstream

FACTS = upstream.facts("neuron-device-memory-2.32.0")
GIB = 1 << 30


def test_chip_memory_is_the_docs() -> None:
    assert {
        chip: FACTS[chip]["device_memory_gib"] for chip in ("Trainium", "Trainium2")
    } == device_memory.NEURON_DEVICE_MEMORY_GIB


@pytest.mark.parametrize("name", [n for n, t in instances.ACCELERATED.items() if t.accelerator == "neuron"])
def test_a_neuron_rank_has_its_cores_share(name: str) -> None:
    it = instances.get(name)
    chip = FACTS[it.accelerator_name or ""]
    if it.accelerator_name == "Trainium2":
        per_rank = chip["device_memory_gib"] // chip["hbm_banks"]  # one bank per logical core at LNC=2
        assert chip["hbm_banks"] * chip["physical_cores_per_bank"] == chip["neuron_cores"]
        assert chip["physical_cores_per_bank"] == FACTS["default_lnc_trainium2"]
    else:
        per_rank = chip["device_memory_gib"] // chip["neuron_cores"]
    assert device_memory.rank_memory_bytes(it) == per_rank * GIB


def test_a_gpu_rank_has_its_gpu() -> None:
    it = instances.get("p5en.48xlarge")
    assert device_memory.rank_memory_bytes(it) == it.gpu_memory_mib << 20
    assert device_memory.rank_memory_bytes(instances.get("m6i.2xlarge")) is None
