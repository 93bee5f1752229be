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
from pydantic import SecretStr

from config.amis import image_runtime
from config.workloads import Kind, Run, RunConfig, TrainingRun
from facts import leaderworkerset
from facts.names import component_type
from infra.platform import Platform
from workloads import manifests
from workloads.manifests.objects import HUGGING_FACE_TOKEN, SECRET_ENV, Source

IMAGE_PLACEHOLDER = "registry.invalid/placeholder:0"


def image_of(run: RunConfig, registry_urls: Mapping[str, Any], platform: Platform | None = None) -> pulumi.Input[str]:
    """The run's image: as configured, a recipe's pinned public image for its node group, or
    `<recipe repository URL>:<tag>`, the tag being `imageTag` or the one the stack builds from
    images/<repository>/ (infra/images.py)."""
    group = platform.node_groups.get(run.node_group) if platform else None
    pinned = run.image_on(group.instance) if group else run.image
    if pinned:
        return pinned
    repo = run.REPOSITORY
    tag = run.image_tag_or_built
    if repo is None or repo not in registry_urls or tag is None:
        raise ValueError(f"no registry URL for repository {repo!r} of recipe {run.RECIPE}")
    return pulumi.Output.concat(registry_urls[repo], ":", tag)


def source_of(run: Run, workloads: Mapping[str, Run]) -> tuple[str, TrainingRun, str] | None:
    """The training run a serving run converts: (its workload name, its config, its run id)."""
    model = getattr(run, "model", None)
    name = getattr(model, "workload", None)
    if not isinstance(name, str) or not isinstance(trained := workloads.get(name), TrainingRun):
        return None
    return name, trained, getattr(model, "run_id", None) or trained.run_id


def context(
    platform: Platform, run: Run, image: str, source: tuple[str, TrainingRun, str] | None = None, source_image: str = ""
) -> manifests.Context:
    found = None
    if source is not None:
        name, trained, run_id = source
        found = Source(name, trained, run_id, platform.node_groups[trained.node_group], source_image)
    group = platform.node_groups[run.node_group]
    return manifests.Context(
        namespace=platform.namespace_for(run.team),
        storage_claim=platform.storage_claim,
        shared_mount=platform.shared_mount,
        shared_sub_path=platform.sub_path_for(run.team),
        node_group=platform.node_groups[run.node_group],
        image=image,
        queue=platform.queue_for(run.team),
        priority_class=platform.priority_class_for(run.team),
        runtime=run.runtime_on(group.instance) or image_runtime(run),
        source=found,
        file_system_mb_per_second=platform.storage.file_system.mb_per_second,
        load_balancing=platform.load_balancing,
        serving_metrics=platform.serving_metrics,
        neuron_scheduler=platform.neuron_scheduler,
    )


WORKLOAD = component_type("workloads", "Workload")
ALIASES = [pulumi.Alias(type_=component_type("workloads", "TrainingRun"))]
"""The type every workload had before it had a kind: with this alias `pulumi up` keeps
each workload and its objects (the children inherit it), tests/plan/test_urn_aliases.py."""


class Workload(pulumi.ComponentResource):
    """One configured workload, a training run, a server or an acceptance run (`kind`): its steps
    (data Jobs, MPIJobs, Deployments, Services...) in order. Its inputs say what it is (`kind`,
    `recipe`, `runId`) and carry a run's plans: `checkpoints` (size, write time, share of training
    time), `throughput` (tokens/s, MFU) and `startup` where its recipe models them, which the
    offline plan's table shows."""

    def __init__(
        self,
        name: str,
        kind: Kind,
        recipe: str,
        run_id: str,
        plans: Mapping[str, Mapping[str, object]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        props: dict[str, object] = {"kind": kind, "recipe": recipe, "runId": run_id}
        for key, value in sorted((plans or {}).items()):
            props[key] = dict(value)
        super().__init__(
            WORKLOAD, name, props, pulumi.ResourceOptions.merge(pulumi.ResourceOptions(aliases=ALIASES), opts)
        )


def deploy(
    workloads: Mapping[str, Run],
    hugging_face_token: SecretStr | None,
    platform: Platform,
    run_plans: Mapping[str, Mapping[str, Mapping[str, object]]] | None = None,
) -> dict[str, list[pulumi.Resource]]:
    """Declare every workload of the stack; return its resources by workload name."""
    token = hugging_face_token.get_secret_value() if hugging_face_token else ""
    plans = run_plans or {}
    out: dict[str, list[pulumi.Resource]] = {}
    gates: dict[str, list[pulumi.Resource]] = {}
    # Acceptance runs first: every other run on their node group waits for them to pass (an awaited
    # acceptance run sharing the group's quota with a training run admitted first would wait for
    # that run to end, past its timeout; a failed acceptance leaves the capacity unused).
    for workload_name, run in sorted(workloads.items(), key=lambda kv: (kv[1].KIND != "acceptance", kv[0])):
        component = Workload(workload_name, run.KIND, run.recipe, run.run_id, plans.get(workload_name))
        source = source_of(run, workloads)
        source_image = image_of(source[1], platform.registry_urls, platform) if source else ""
        images = pulumi.Output.all(image_of(run, platform.registry_urls, platform), source_image)
        # The structure (names, order) never depends on the images; build it once with
        # placeholders, then fill each object's spec from the real images when they are known.
        placeholder = context(platform, run, IMAGE_PLACEHOLDER, source, IMAGE_PLACEHOLDER)
        skeleton = manifests.steps(workload_name, run, placeholder)
        created: dict[str, pulumi.Resource] = {}
        for i, step in enumerate(skeleton):

            def spec(imgs: list[str], i: int = i, run: Run = run, name: str = workload_name, src: Any = source) -> Any:
                return manifests.steps(name, run, context(platform, run, imgs[0], src, imgs[1]))[i].obj.get("spec")

            # Every run waits for the acceptance runs before it on its group, an acceptance run too:
            # two at once would take the same nodes, the second held by Kueue within its own timeout.
            gate = gates.get(run.node_group, [])
            opts = pulumi.ResourceOptions(
                parent=component,
                provider=platform.provider,
                depends_on=[*platform.depends_on_for(run.team), *gate, *(created[a] for a in step.after)],
            )
            created[step.name] = _apply(step, images.apply(spec), secret_values(step, run, token), opts)
        if run.KIND == "acceptance":
            gates.setdefault(run.node_group, []).append(created[skeleton[-1].name])
        out[workload_name] = list(created.values())
        component.register_outputs({})
    return out


def secret_values(step: manifests.Step, run: Run, token: str) -> dict[str, str]:
    """The values of a Secret step's keys, from where the builder says each comes from (the
    only place a secret value meets an object; it leaves as a Pulumi secret)."""
    values = {}
    for key, source in step.secret_data.items():
        if source == HUGGING_FACE_TOKEN:
            values[key] = token
        else:
            values[key] = run.secret_env[source.removeprefix(SECRET_ENV)].get_secret_value()
    return values


def _apply(
    step: manifests.Step, spec: pulumi.Output[Any], secrets: dict[str, str], opts: pulumi.ResourceOptions
) -> Any:
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
    if kind == "LeaderWorkerSet":
        # A change Kueue's webhook allows (the image, vLLM's options) rolls the groups over in place;
        # one it refuses on a set it manages (group size, requests, ports, placement) would fail
        # `pulumi up`, so it replaces the set, deleting first (the same name, the same quota).
        replace = pulumi.ResourceOptions(
            replace_on_changes=leaderworkerset.kueue_immutable_paths(), delete_before_replace=True
        )
        opts = pulumi.ResourceOptions.merge(opts, replace)
        return k8s.apiextensions.CustomResource(
            step.name, api_version=obj["apiVersion"], kind=kind, metadata=meta, spec=spec, opts=opts
        )
    if kind == "Secret":
        return k8s.core.v1.Secret(
            step.name,
            metadata=meta,
            type=obj.get("type"),
            string_data=pulumi.Output.secret(secrets),
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
    if kind == "PodDisruptionBudget":
        return k8s.policy.v1.PodDisruptionBudget(step.name, metadata=meta, spec=spec, opts=opts)
    if kind == "NetworkPolicy":
        return k8s.networking.v1.NetworkPolicy(step.name, metadata=meta, spec=spec, opts=opts)
    raise ValueError(f"no Pulumi resource for kind {kind}")
