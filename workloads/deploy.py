"""The thin Pulumi layer: applies the builders' objects in order, named by run.

Ordering without blocking on training: data-prep Jobs are awaited by pulumi-kubernetes
(a Job is ready when it completes); MPIJobs that later steps follow carry
`pulumi.com/waitFor: condition=Succeeded`; the training MPIJob carries
`pulumi.com/skipAwait: "true"`, so `pulumi up` returns once it is created.

Re-running `pulumi up` with the same config changes nothing: every object is a pure
function of the config, so there is no diff and no finished step is replaced or rerun.
A new `runId` gives the run's steps new names (new objects); data steps are named by the
data they produce, so a new run reuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import RECIPE_REPOSITORY, StackConfig
from infra.platform import Platform
from infra.queues import DEFAULT_QUEUE
from workloads import manifests

IMAGE_PLACEHOLDER = "registry.invalid/placeholder:0"


def image_of(w: manifests.Workload, registry_urls: Mapping[str, Any]) -> pulumi.Input[str]:
    """The workload's image: as configured, or `<recipe repository URL>:<imageTag>`."""
    if w.image:
        return w.image
    repo = RECIPE_REPOSITORY[w.recipe]
    if repo is None or repo not in registry_urls:
        raise ValueError(f"no registry URL for repository {repo!r} of recipe {w.recipe}")
    return pulumi.Output.concat(registry_urls[repo], ":", w.image_tag or "")


def context(platform: Platform, w: manifests.Workload, image: str) -> manifests.Context:
    return manifests.Context(
        namespace=platform.namespace,
        storage_claim=platform.storage_claim,
        shared_mount=platform.shared_mount,
        node_group=platform.node_groups[w.node_group],
        image=image,
        health_check_image=w.health_check.image,
        queue=platform.queues.get(w.team or DEFAULT_QUEUE) if platform.queues else None,
        priority_class=platform.priority_classes.get(w.team or DEFAULT_QUEUE),
    )


class TrainingRun(pulumi.ComponentResource):
    """One configured workload: its steps (data Jobs, MPIJobs, TensorBoard...) in order."""

    def __init__(self, name: str, recipe: str, run_id: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-training-eks:workloads:TrainingRun", name, {"recipe": recipe, "runId": run_id}, opts)


def deploy(cfg: StackConfig, platform: Platform) -> dict[str, list[pulumi.Resource]]:
    """Declare every workload of the stack; return its resources by workload name."""
    out: dict[str, list[pulumi.Resource]] = {}
    for name, w in sorted(cfg.workloads.items()):
        run = TrainingRun(name, w.recipe, w.run_id)
        image = pulumi.Output.from_input(image_of(w, platform.registry_urls))
        # The structure (names, order) never depends on the image; build it once with a
        # placeholder, then fill each object's spec from the real image when it is known.
        skeleton = manifests.steps(name, w, context(platform, w, IMAGE_PLACEHOLDER))
        created: dict[str, pulumi.Resource] = {}
        for i, step in enumerate(skeleton):

            def spec(img: str, i: int = i, w: manifests.Workload = w, name: str = name) -> Any:
                return manifests.steps(name, w, context(platform, w, img))[i].obj.get("spec")

            opts = pulumi.ResourceOptions(
                parent=run,
                provider=platform.provider,
                depends_on=[*platform.depends_on, *(created[a] for a in step.after)],
            )
            created[step.name] = _apply(step, image.apply(spec), cfg, opts)
        out[name] = list(created.values())
        run.register_outputs({})
    return out


def _apply(step: manifests.Step, spec: pulumi.Output[Any], cfg: StackConfig, opts: pulumi.ResourceOptions) -> Any:
    obj = step.obj
    kind = obj["kind"]
    meta = obj["metadata"]
    if kind == "MPIJob":
        # Any change to a run's spec restarts that step; the same config never does.
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )
        return k8s.apiextensions.CustomResource(
            step.name, api_version=obj["apiVersion"], kind=kind, metadata=meta, spec=spec, opts=opts
        )
    if kind == "Secret":
        token = cfg.hugging_face_token.get_secret_value() if cfg.hugging_face_token else ""
        return k8s.core.v1.Secret(
            step.name,
            metadata=meta,
            type=obj.get("type"),
            string_data=pulumi.Output.secret({key: token for key in step.secret_data}),
            opts=opts,
        )
    if kind == "Job":
        return k8s.batch.v1.Job(step.name, metadata=meta, spec=spec, opts=opts)
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(step.name, metadata=meta, spec=spec, opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(step.name, metadata=meta, spec=spec, opts=opts)
    if kind == "Pod":
        return k8s.core.v1.Pod(step.name, metadata=meta, spec=spec, opts=opts)
    raise ValueError(f"no Pulumi resource for kind {kind}")
