"""Which node driver an image's runtime works with: the Neuron driver (the node's kernel module)
against the Neuron runtime library in the image, and the NVIDIA driver against the image's CUDA.

Sources (tests/unit/test_drivers.py holds these values to them):
- aws-neuron/aws-neuron-sdk at 81ce03ae (2026-08-21), release-notes/components/runtime.rst: the
  runtime library of each SDK release and the known issues below; neuron-runtime/
  nrt-troubleshoot.rst: otherwise "the driver remains backwards compatible with older versions of
  Neuron Runtime" (tests/upstream/aws-neuron-sdk-runtime-driver.yaml).
- NVIDIA CUDA Compatibility, minor version compatibility: a CUDA 12 application needs driver
  525 or later, and runs on newer drivers (tests/upstream/nvidia-cuda-compatibility.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

from facts.versions import Version


def version(text: str) -> Version:
    """'2.28.0.0' -> (2, 28, 0, 0); a '-dkms' or package suffix is not part of it."""
    return tuple(int(p) for p in text.split("-")[0].split("."))


def at_least(text: str, floor: str) -> bool:
    """Whether a version is at or past `floor`, comparing as many parts as `floor` has (2.29.0.0
    is at least 2.29; 2.28.9 is not)."""
    v, f = version(text), version(floor)
    return v[: len(f)] >= f


RUNTIME_OF_SDK: dict[str, str] = {
    "2.21": "2.23.110.0",
    "2.22": "2.24.53.0",
    "2.23": "2.25.57.0",
    "2.24": "2.26.42.0",
    "2.25": "2.27.23.0",
    "2.26": "2.28.19.0",
    "2.27": "2.29.40.0",
    "2.28": "2.30.50.0",
    "2.29": "2.31.24.0",
    "2.30": "2.32.31.0",
    "2.31": "2.33",
    "2.32": "2.34.10",
    "2.33": "2.35.30.0",
}
"""Neuron SDK minor -> the Neuron runtime library of its release notes."""


def runtime_of_sdk(sdk: str) -> str | None:
    """The runtime library an SDK release ships (by its minor), or None when unknown."""
    return RUNTIME_OF_SDK.get(".".join(sdk.split(".")[:2]))


@dataclass(frozen=True)
class DriverRule:
    """A known incompatibility: a driver from `driver_at_least` on needs a runtime from
    `runtime_needed`, or a runtime from `runtime_at_least` on needs a driver from `driver_needed`
    (on `families` only, when given)."""

    release: str
    """The SDK release whose notes state it."""
    driver_at_least: str | None = None
    runtime_needed: str | None = None
    runtime_at_least: str | None = None
    driver_needed: str | None = None
    families: tuple[str, ...] = ()


NEURON_RULES: tuple[DriverRule, ...] = (
    # "Neuron Driver 2.29 requires Neuron Runtime Library 2.33 or later ... nrt_init() [fails]";
    # no later note lifts it, so it holds for the drivers after 2.29 too.
    DriverRule("2.31.0", driver_at_least="2.29", runtime_needed="2.33"),
    # "Neuron Runtime Library 2.32 is not backward-compatible with Neuron Driver 2.26 or earlier."
    DriverRule("2.30.0", runtime_at_least="2.32", driver_needed="2.27"),
    # "requires aws-neuron-dkms version 2.22 or later on Trainium2 instances" (runtime 2.26).
    DriverRule("2.24.0", runtime_at_least="2.26", driver_needed="2.22", families=("trn2",)),
)
DRIVER_VERSION_FILE = "/sys/module/neuron/version"
"""Where a node (and a container on it) reads the loaded Neuron driver's version."""


@dataclass(frozen=True)
class DriverRange:
    """The drivers a runtime works with: from `minimum` (None: any) to below `below` (None: any)."""

    minimum: str | None = None
    below: str | None = None

    def admits(self, driver: str) -> bool:
        return (self.minimum is None or at_least(driver, self.minimum)) and (
            self.below is None or not at_least(driver, self.below)
        )

    def describe(self) -> str:
        parts = [f">= {self.minimum}" if self.minimum else "", f"< {self.below}" if self.below else ""]
        return " and ".join(p for p in parts if p) or "any"


def neuron_driver_range(runtime: str, family: str) -> DriverRange:
    """The Neuron drivers a runtime library works with on an instance family."""
    minimum: str | None = None
    below: str | None = None
    for rule in NEURON_RULES:
        if rule.families and family not in rule.families:
            continue
        refused = rule.driver_at_least and rule.runtime_needed and not at_least(runtime, rule.runtime_needed)
        if refused and (below is None or version(str(rule.driver_at_least)) < version(below)):
            below = rule.driver_at_least
        needs_newer = rule.runtime_at_least and rule.driver_needed and at_least(runtime, rule.runtime_at_least)
        if needs_newer and (minimum is None or version(str(rule.driver_needed)) > version(minimum)):
            minimum = rule.driver_needed
    return DriverRange(minimum, below)


CUDA_MINIMUM_DRIVER: dict[str, str] = {"11": "450", "12": "525", "13": "580"}
"""CUDA major -> the oldest NVIDIA driver branch that runs its applications."""


def nvidia_driver_range(cuda_major: str) -> DriverRange:
    """The NVIDIA drivers an image of a CUDA major runs on (newer drivers stay compatible)."""
    return DriverRange(CUDA_MINIMUM_DRIVER.get(cuda_major))
