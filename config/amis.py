"""Which EKS AMI release each accelerated node group runs, and the rules that hold its driver to
the images run on it (one function per rule; config.checks and stack.py call them).

The node's driver comes with the AMI (facts.amis), the runtime with the image (facts.images):
the Neuron driver must fit the image's Neuron runtime library (facts.drivers: driver 2.29
requires runtime 2.33, so the SDK 2.22 images need a driver below 2.29), the NVIDIA driver the
image's CUDA. A group pins `releaseVersion`; by default the newest release for the cluster's
Kubernetes minor whose driver fits every image run on the group (the runs on it, or in a stack
without runs on it the images this project builds for its accelerator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from config.nodegroups import NodeGroupConfig
from config.problems import Kind, problem
from config.stack import StackConfig
from config.workloads import RECIPES, RunConfig
from facts import amis, drivers, images, instances
from facts.amis import AmiRelease

KINDS = {"neuron": "Neuron", "nvidia": "NVIDIA"}


def image_runtime(run: RunConfig, instance: instances.InstanceType | None = None) -> images.Runtime:
    """What the run's image brings that the node and the launch must fit (facts.images.runtime_of;
    a recipe's pinned public image on that instance type brings its own)."""
    pinned = run.runtime_on(instance) if instance is not None else None
    return pinned or images.runtime_of(run.image, run.built_image, run.sdk[0], sdk_stated=bool(run.neuron_sdk))


def driver_of(release: AmiRelease, instance: instances.InstanceType) -> str:
    """The driver the AMI of that instance's accelerator carries."""
    return release.neuron_driver if instance.accelerator == "neuron" else release.nvidia_driver


@dataclass(frozen=True)
class ImageOnGroup:
    """An image that runs on a node group, and the config key that names it."""

    key: str
    runtime: images.Runtime

    def driver_range(self, instance: instances.InstanceType) -> drivers.DriverRange | None:
        """The drivers its runtime works with on that instance (None: its runtime is not known)."""
        rt = self.runtime
        if instance.accelerator == "neuron" and rt.neuron_runtime:
            return drivers.neuron_driver_range(rt.neuron_runtime, instance.family)
        if instance.accelerator == "nvidia" and rt.cuda_major:
            return drivers.nvidia_driver_range(rt.cuda_major)
        return None

    def what(self) -> str:
        rt = self.runtime
        return f"Neuron runtime {rt.neuron_runtime}" if rt.neuron_runtime else f"CUDA {rt.cuda_major}"

    def describe(self) -> str:
        return f"{self.key} ({self.what()})"


def images_on_group(cfg: StackConfig, ng: NodeGroupConfig) -> list[ImageOnGroup]:
    """The runs' images on the group, or without runs on it every image this project builds that
    trains on its instance type (what a runs layer or a later run would bring; not the TorchNeuron
    image on trn1, nor the SDK 2.22 ones on trn2 where their recipes do not train)."""
    found = [
        ImageOnGroup(f"workloads.{name}.{'neuronSdk' if run.neuron_sdk else 'image'}", image_runtime(run, ng.instance))
        for name, run in sorted(cfg.workloads.items())
        if run.node_group == ng.name
    ]
    if found:
        return found
    trains = {r.REPOSITORY for r in RECIPES.values() if r.built_image_trains_on(ng.instance)}
    return [
        ImageOnGroup(f"images/{repo}", image.runtime)
        for repo, image in sorted(images.IMAGES.items())
        if repo in trains and ImageOnGroup("", image.runtime).driver_range(ng.instance) is not None
    ]


def unfit(release: AmiRelease, ng: NodeGroupConfig, on: list[ImageOnGroup]) -> list[tuple[ImageOnGroup, str]]:
    """The images whose runtime does not work with the release's driver, each with the drivers it needs."""
    out = []
    for image in on:
        wanted = image.driver_range(ng.instance)
        if wanted is not None and not wanted.admits(driver_of(release, ng.instance)):
            out.append((image, wanted.describe()))
    return out


def pinned_release(cfg: StackConfig, ng: NodeGroupConfig) -> AmiRelease | None:
    """The release the group runs: its releaseVersion, or the newest release for the cluster's
    Kubernetes minor that fits every image on it (None: none does; release_problems says why)."""
    if ng.release_version:
        return amis.find(ng.release_version)
    on = images_on_group(cfg, ng)
    minor = cfg.cluster.kubernetes_version
    return next((r for r in amis.releases(minor) if not unfit(r, ng, on)), None)


def _listed(minor: str) -> str:
    return ", ".join(r.release_version for r in amis.releases(minor)[:4]) or "none"


def release_version_known(i: int, ng: NodeGroupConfig, minor: str) -> list[str]:
    """A pinned release is one this project knows, for the cluster's Kubernetes minor."""
    key, release = f"nodeGroups[{i}].releaseVersion", amis.find(ng.release_version or "")
    if not ng.release_version or (release is not None and release.kubernetes == minor):
        return []
    why = (
        f"is for Kubernetes {release.kubernetes}, the cluster runs {minor} (cluster.kubernetesVersion)"
        if release
        else f"is not an AMI release this project knows ({amis.SOURCE})"
    )
    said = f"{ng.release_version} {why}; releases for {minor}, newest first: {_listed(minor)}"
    kind: Kind = "conflict" if release else "not-supported"
    return [problem(key, kind, said, value=repr(ng.release_version), allowed=_listed(minor))]


def release_fits_images(i: int, cfg: StackConfig, ng: NodeGroupConfig) -> list[str]:
    """The group's release (pinned or derived) carries a driver every image on it works with."""
    on, minor = images_on_group(cfg, ng), cfg.cluster.kubernetes_version
    release = pinned_release(cfg, ng)
    kind = KINDS.get(ng.instance.accelerator or "", "")
    if ng.release_version and release is not None and release.kubernetes == minor:
        bad = unfit(release, ng, on)
        best = next((r for r in amis.releases(minor) if not unfit(r, ng, on)), None)
        hint = f"use {best.release_version} (driver {driver_of(best, ng.instance)})" if best else "no release fits"
        return [
            problem(
                f"nodeGroups[{i}].releaseVersion",
                "conflict",
                f"{release.release_version} carries {kind} driver {driver_of(release, ng.instance)}, which"
                f" {image.describe()} cannot use (it needs driver {needed}); {hint}, or leave releaseVersion out",
                value=repr(release.release_version),
                hint=f"{hint}, or leave releaseVersion out",
            )
            for image, needed in bad
        ]
    if ng.release_version or release is not None:
        return []
    needed = "; ".join(
        f"{image.describe()} needs driver {rng.describe()}" for image in on if (rng := image.driver_range(ng.instance))
    )
    key = on[0].key if on and on[0].key.startswith("workloads.") else f"nodeGroups[{i}].releaseVersion"
    return [
        problem(
            key,
            "conflict",
            f"no EKS AMI release for Kubernetes {minor} ({amis.SOURCE}) carries a {kind} driver every image"
            f" on node group {ng.name!r} works with ({needed}); run those images on different node groups",
            hint="run those images on different node groups",
        )
    ]


def release_problems(cfg: StackConfig) -> list[str]:
    """Every accelerated node group's AMI release: known, of the cluster's minor, fitting its images."""
    minor = cfg.cluster.kubernetes_version
    problems: list[str] = []
    for i, ng in enumerate(cfg.node_groups):
        known = release_version_known(i, ng, minor)
        problems += known or release_fits_images(i, cfg, ng)
    return problems


def layered_run_problems(
    workloads: Mapping[str, RunConfig], groups: Mapping[str, tuple[instances.InstanceType, str]]
) -> list[str]:
    """A runs layer's images against the AMI release the aws layer pinned for their node group
    (node group name -> its instance type and releaseVersion)."""
    problems: list[str] = []
    for name, run in sorted(workloads.items()):
        instance, release_version = groups.get(run.node_group, (None, ""))
        release = amis.find(release_version)
        if instance is None or instance.accelerator is None or release is None:
            continue
        key = f"workloads.{name}.{'neuronSdk' if run.neuron_sdk else 'image'}"
        image = ImageOnGroup(key, image_runtime(run, instance))
        for _, needed in unfit(release, _as_group(run.node_group, instance), [image]):
            problems.append(
                problem(
                    image.key,
                    "conflict",
                    f"the image's {image.what()} needs {KINDS[instance.accelerator]} driver {needed}, but"
                    f" node group {run.node_group!r} runs AMI release {release_version}"
                    f" (driver {driver_of(release, instance)}), pinned by the aws layer (nodeGroups[].releaseVersion);"
                    " use an image that fits it, or pin a release that fits both there",
                    hint="use an image that fits it, or pin a release that fits both there",
                )
            )
    return problems


def _as_group(name: str, instance: instances.InstanceType) -> NodeGroupConfig:
    return NodeGroupConfig.model_validate({"name": name, "instanceType": instance.name, "desiredSize": 0})
