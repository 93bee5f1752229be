"""Dense peak of an instance's accelerators, per node and per precision, for the plan's model FLOPs
utilisation: a run's MFU is against the peak of the precision its matrix multiplies run in (an FP8
run against the FP8 peak, not the BF16 one).

Sources (tests/unit/test_throughput.py holds these to them):
- Trainium: tests/upstream/neuron-architecture-v2.32.0.yaml, aws-neuron/aws-neuron-sdk v2.32.0
  about-neuron/arch/neuron-hardware/trn1-arch.rst (Trn1.32xlarge and Trn1n.32xlarge: 3,040
  FP8/FP16/BF16/TF32 TFLOPS) and trn2-arch.rst (trn2.48xlarge / trn2u.48xlarge: 10.7 dense
  FP16/BF16/TF32 PFLOPS, 20.8 dense FP8 PFLOPS);
- GPUs: tests/upstream/gpu-peak-flops-2026-11.yaml (H100 SXM5 989.4 dense BF16 and 1978.9 dense
  FP8 TFLOPS; H200 the same GPU; B200 in HGX at 1000 W 2250 and 4500), times the node's 8 GPUs.
A100 (p4de) and B300 (p6-b300) are not recorded, so their MFU is not estimated (the plan says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from facts import instances

Precision = Literal["bf16", "fp8"]
"""The precision of a run's matrix multiplies (an FP8 recipe's GEMMs; everything else BF16)."""


@dataclass(frozen=True)
class Peak:
    """Dense peak of one node in one precision and the page it is from."""

    tflops: float
    source: str


_TRN1 = "aws-neuron-sdk v2.32.0 trn1-arch.rst: 3,040 FP8/FP16/BF16/TF32 TFLOPS per trn1.32xlarge/trn1n.32xlarge"
_TRN2 = "aws-neuron-sdk v2.32.0 trn2-arch.rst per trn2.48xlarge/trn2u.48xlarge"

PEAK_BF16: dict[str, Peak] = {
    "trn1.32xlarge": Peak(3040.0, _TRN1),
    "trn1n.32xlarge": Peak(3040.0, _TRN1),
    "trn2.48xlarge": Peak(10700.0, f"{_TRN2}: 10.7 dense BF16 PFLOPS"),
    "trn2u.48xlarge": Peak(10700.0, f"{_TRN2}: 10.7 dense BF16 PFLOPS"),
}
"""Trainium instance type -> dense BF16 peak per node."""

PEAK_FP8: dict[str, Peak] = {
    "trn1.32xlarge": Peak(3040.0, _TRN1),
    "trn1n.32xlarge": Peak(3040.0, _TRN1),
    "trn2.48xlarge": Peak(20800.0, f"{_TRN2}: 20.8 dense FP8 PFLOPS"),
    "trn2u.48xlarge": Peak(20800.0, f"{_TRN2}: 20.8 dense FP8 PFLOPS"),
}
"""Trainium instance type -> dense FP8 peak per node."""

GPU_PEAK_TFLOPS: dict[str, dict[Precision, float]] = {
    "H100": {"bf16": 989.4, "fp8": 1978.9},
    "H200": {"bf16": 989.4, "fp8": 1978.9},
    "B200": {"bf16": 2250.0, "fp8": 4500.0},
}
"""GPU -> dense tensor peak per GPU (no 2:4 sparsity), per precision (gpu-peak-flops-2026-11)."""
GPU_PEAK_SOURCE = "tests/upstream/gpu-peak-flops-2026-11.yaml"


def peak(instance_type: str, precision: Precision) -> Peak | None:
    """Dense peak of one node of `instance_type` in `precision` (None: not recorded)."""
    table = PEAK_FP8 if precision == "fp8" else PEAK_BF16
    if instance_type in table:
        return table[instance_type]
    it = instances.CATALOG.get(instance_type)
    gpu = GPU_PEAK_TFLOPS.get(it.accelerator_name or "") if it is not None else None
    if it is None or gpu is None:
        return None
    per_gpu = gpu[precision]
    return Peak(
        per_gpu * it.accelerator_count,
        f"{it.accelerator_count} x {it.accelerator_name} at {per_gpu:g} TFLOP/s, {GPU_PEAK_SOURCE}",
    )
