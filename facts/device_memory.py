"""Memory of the device one rank of a run uses: what a health gate's all-reduce buffers must fit in.

A GPU rank has one GPU (EC2's GpuInfo, `InstanceType.gpu_memory_mib`). A Neuron rank has one
NeuronCore (one logical NeuronCore on Trainium2, LNC=2), which sees its share of its chip's
device memory. From the Neuron SDK 2.32.0 docs (aws-neuron/aws-neuron-sdk v2.32.0, commit
a3247f5b; tests/upstream/neuron-device-memory-2.32.0.yaml):
- about-neuron/arch/neuron-hardware/trainium.rst lines 7-25: a Trainium chip has two
  NeuronCore-v2 and "32 GiB of device memory": 16 GiB per NeuronCore;
- about-neuron/arch/neuron-hardware/trainium2.rst lines 22-31: a Trainium2 chip has eight
  NeuronCore-v3 and "96 GiB of device memory"; logical-neuroncore-config.rst lines 65 and 100:
  "four 24GB HBM banks. Each bank is shared by two physical NeuronCore-v3", so one logical core
  of LNC=2 has one bank, 24 GiB.
"""

from __future__ import annotations

from facts.instances import InstanceType

GIB = 1 << 30

NEURON_DEVICE_MEMORY_GIB: dict[str, int] = {"Trainium": 32, "Trainium2": 96}
"""Device memory (HBM) of one Neuron chip, GiB, by chip."""


def rank_memory_bytes(instance: InstanceType) -> int | None:
    """Device memory one rank uses on `instance` (one GPU, or its NeuronCore's share of its chip);
    None without accelerators."""
    if instance.accelerator == "nvidia":
        return instance.gpu_memory_mib * (1 << 20)
    if instance.accelerator == "neuron" and instance.ranks_per_node:
        chip = NEURON_DEVICE_MEMORY_GIB[instance.accelerator_name or ""]
        return instance.accelerator_count * chip * GIB // instance.ranks_per_node
    return None
