"""Dense BF16 peak of an instance's accelerators, per node, for the plan's model FLOPs utilisation.

Sources (tests/upstream/neuron-architecture-v2.32.0.yaml; tests/unit/test_throughput.py holds these
to it): aws-neuron/aws-neuron-sdk v2.32.0 about-neuron/arch/neuron-hardware/trn1-arch.rst
(Trn1.32xlarge and Trn1n.32xlarge: 3,040 FP8/FP16/BF16/TF32 TFLOPS) and trn2-arch.rst
(trn2.48xlarge / trn2u.48xlarge: 10.7 FP16/BF16/TF32 PFLOPS dense). GPU instances are not listed:
their figures are not recorded in the project, so their MFU is not estimated.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    """Dense BF16 peak of one node and the page it is from."""

    tflops: float
    source: str


_TRN1 = Peak(3040.0, "aws-neuron-sdk v2.32.0 trn1-arch.rst: 3,040 BF16 TFLOPS per trn1.32xlarge/trn1n.32xlarge")
_TRN2 = Peak(10700.0, "aws-neuron-sdk v2.32.0 trn2-arch.rst: 10.7 dense BF16 PFLOPS per trn2.48xlarge/trn2u.48xlarge")

PEAK_BF16: dict[str, Peak] = {
    "trn1.32xlarge": _TRN1,
    "trn1n.32xlarge": _TRN1,
    "trn2.48xlarge": _TRN2,
    "trn2u.48xlarge": _TRN2,
}
"""Instance type -> dense BF16 peak per node."""
