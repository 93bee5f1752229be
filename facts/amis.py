"""The EKS-optimized AL2023 accelerated AMIs a managed node group can run: per release, the
release version a node group pins (`releaseVersion` of EKS CreateNodegroup) and the kernel
drivers the AMI carries, which the images' runtimes must work with (facts.drivers).

Source: awslabs/amazon-eks-ami/CHANGELOG.md at 81fec2e8 (2026-07-23; newest release v20260714),
its "AMI Details" tables: aws-neuronx-dkms of AL2023_x86_64_NEURON (the version the `neuron`
module reports in /sys/module/neuron/version) and kmod-nvidia-latest-dkms of AL2023_x86_64_NVIDIA,
for the Kubernetes minors this project supports. tests/upstream/amazon-eks-ami-v20260714.yaml holds
the same rows and tests/unit/test_drivers.py holds this table to it. The v20260129 and v20260318
releases each list two builds per minor (e.g. 1.35.2-20260318 and 1.35.2-20260311): both are here.
Without a releaseVersion EKS gives a new node group the newest release for its Kubernetes version,
and newer releases than these exist: refresh both files to use them (a releaseVersion outside this table is refused).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AmiRelease:
    """One AMI release for one Kubernetes minor."""

    release_version: str
    """e.g. 1.35.6-20260625: <Kubernetes patch version>-<build date>."""
    neuron_driver: str
    """aws-neuronx-dkms of the Neuron AMI (its /sys/module/neuron/version)."""
    nvidia_driver: str
    """kmod-nvidia-latest-dkms of the NVIDIA AMI (nvidia-smi's driver version)."""

    @property
    def kubernetes(self) -> str:
        """The Kubernetes minor, e.g. 1.35."""
        return ".".join(self.release_version.split(".")[:2])

    @property
    def built(self) -> str:
        """The build date, YYYYMMDD."""
        return self.release_version.rsplit("-", 1)[1]


# release version, Neuron driver, NVIDIA driver; newest first (as the changelog lists them).
_ROWS = """
1.34.9-20260714 2.29.0.0 580.159.03
1.35.6-20260714 2.29.0.0 580.159.03
1.36.2-20260714 2.29.0.0 580.159.03
1.34.9-20260625 2.28.0.0 580.159.03
1.35.6-20260625 2.28.0.0 580.159.03
1.36.2-20260625 2.28.0.0 580.159.03
1.34.9-20260618 2.28.0.0 580.159.03
1.35.6-20260618 2.28.0.0 580.159.03
1.36.2-20260618 2.28.0.0 580.159.03
1.34.8-20260610 2.28.0.0 580.159.03
1.35.5-20260610 2.28.0.0 580.159.03
1.36.1-20260610 2.28.0.0 580.159.03
1.34.7-20260505 2.27.4.0 580.126.09
1.35.4-20260505 2.27.4.0 580.126.09
1.34.7-20260423 2.27.4.0 580.126.09
1.35.4-20260423 2.27.4.0 580.126.09
1.34.6-20260415 2.27.4.0 580.126.09
1.35.3-20260415 2.27.4.0 580.126.09
1.34.6-20260409 2.27.4.0 580.126.09
1.35.3-20260409 2.27.4.0 580.126.09
1.34.4-20260403 2.26.10.0 580.126.09
1.35.2-20260403 2.26.10.0 580.126.09
1.34.4-20260318 2.26.10.0 580.126.09
1.35.2-20260318 2.26.10.0 580.126.09
1.34.4-20260311 2.26.5.0 580.126.09
1.35.2-20260311 2.26.5.0 580.126.09
1.34.4-20260304 2.26.5.0 580.126.09
1.35.2-20260304 2.26.5.0 580.126.09
1.34.4-20260224 2.25.4.0 580.126.09
1.35.0-20260224 2.25.4.0 580.126.09
1.34.3-20260209 2.25.4.0 580.126.09
1.35.0-20260209 2.25.4.0 580.126.09
1.34.2-20260129 2.25.4.0 580.126.09
1.35.0-20260129 2.25.4.0 580.126.09
1.34.2-20260128 2.25.4.0 580.126.09
1.35.0-20260128 2.25.4.0 580.126.09
1.34.2-20260120 2.25.4.0 580.126.09
1.35.0-20260120 2.25.4.0 580.126.09
1.34.2-20260116 2.25.4.0 580.105.08
1.35.0-20260116 2.25.4.0 580.105.08
1.34.2-20260114 2.25.4.0 580.105.08
1.35.0-20260114 2.25.4.0 580.105.08
1.34.2-20260107 2.25.4.0 580.105.08
1.34.2-20251217 2.24.7.0 580.105.08
1.34.2-20251209 2.24.7.0 580.105.08
1.34.2-20251120 2.24.7.0 580.105.08
1.34.1-20251112 2.24.7.0 580.95.05
1.34.1-20251108 2.24.7.0 580.95.05
1.34.1-20251029 2.24.7.0 580.95.05
1.34.1-20251023 2.24.7.0 580.95.05
1.34.1-20251016 2.24.7.0 570.195.03
1.34.1-20251007 2.24.7.0 570.195.03
1.34.1-20251002 2.24.7.0 570.195.03
1.34.1-20250920 2.24.7.0 570.172.08
1.34.0-20250915 2.23.9.0 570.172.08
"""
RELEASES: tuple[AmiRelease, ...] = tuple(AmiRelease(*row.split()) for row in _ROWS.strip().splitlines())
SOURCE = "awslabs/amazon-eks-ami/CHANGELOG.md at 81fec2e8 (newest release v20260714)"


def releases(kubernetes: str) -> list[AmiRelease]:
    """The releases of one Kubernetes minor, newest first."""
    return sorted((r for r in RELEASES if r.kubernetes == kubernetes), key=lambda r: r.built, reverse=True)


def find(release_version: str) -> AmiRelease | None:
    """The release of that version, or None when this table does not have it."""
    return next((r for r in RELEASES if r.release_version == release_version), None)


def newest(kubernetes: str) -> AmiRelease | None:
    """What EKS gives a node group that pins no release (the newest this table knows)."""
    found = releases(kubernetes)
    return found[0] if found else None
