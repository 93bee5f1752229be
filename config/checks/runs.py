"""Rules of training runs: against the stack, the node groups, the registry and the storage."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from config.base import did_you_mean
from config.checks.groups import Groups
from config.names import plain_secrets, run_name, run_objects
from config.problems import problem
from config.stack import StackConfig
from config.storage import StorageConfig
from config.workloads import RECIPES, RunConfig, TrainingRun, WorkloadConfig
from estimates import checkpoints
from estimates.checkpoints import GIB, MAX_WRITE_SHARE, STORAGE_SHARE
from estimates.step_time import step_time
from facts import instances, versions
from facts.device_memory import rank_memory_bytes
from facts.fabric import size_bytes
from facts.limits import NCCL_TESTS_BUFFERS, NCCL_TESTS_RESERVED_BYTES
from facts.names import PLATFORM_ENV
from facts.nodegroups import NodeGroup


def hugging_face_token(name: str, run: RunConfig, cfg: StackConfig) -> list[str]:
    """Recipes that download gated files need the token (an empty one downloads nothing gated)."""
    token, why = cfg.hugging_face_token, run.hugging_face_token_for
    if not name or why is None or (token is not None and token.get_secret_value().strip()):
        return []
    said = "is empty, but required" if token is not None else "required"
    return [
        problem(
            "huggingFaceToken",
            "required",
            f"{said} by workloads.{name} ({run.RECIPE} {why});"
            " set it with `pulumi config set --secret huggingFaceToken hf_...`",
            allowed="a Hugging Face token, stored encrypted",
            hint="pulumi config set --secret huggingFaceToken hf_...",
        )
    ]


def platform_env(name: str, run: RunConfig) -> list[str]:
    """A run's `env` and `secretEnv` leave the variables the platform sets alone: they carry the
    rendezvous, the node count and the checkpoint directory every restart resumes from."""
    return [
        problem(
            f"workloads.{name}.{where}.{var}",
            "forbidden",
            f"the platform sets {var} ({PLATFORM_ENV[var]}); a value here would"
            " override it and break the run's rendezvous or checkpoints: leave it out, or use another name",
            hint="leave it out, or use another name",
        )
        for where, names in (("env", run.env), ("secretEnv", run.secret_env))
        for var in sorted(names)
        if var in PLATFORM_ENV
    ]


def known_node_group(key: str, wanted: str, groups: Groups) -> list[str]:
    if wanted in groups:
        return []
    known = ", ".join(groups) or "none are defined"
    meant = did_you_mean(wanted, groups)
    return [
        problem(
            f"{key}.nodeGroup",
            "not-supported",
            f"unknown node group {wanted!r}{meant}; node groups: {known}",
            value=repr(wanted),
            allowed=known,
            hint=meant.strip(" ()") or None,
        )
    ]


CPU_RECIPES = [name for name, model in RECIPES.items() if model.RUNS_ON_CPU]


def accelerator_matches(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """A CPU recipe runs on the system node group (an accelerated node's taints keep its pods
    off); every other recipe needs an accelerated group, of its accelerator where it names one."""
    it = ng.instance
    cpu_group = it.accelerator is None
    if run.RUNS_ON_CPU or cpu_group:
        if cpu_group == run.RUNS_ON_CPU:
            return []
        if run.RUNS_ON_CPU:
            return [
                problem(
                    f"{key}.nodeGroup",
                    "conflict",
                    f"recipe {run.RECIPE} trains on CPUs, on the system node group; {ng.name!r} runs"
                    f" {it.name} ({it.accelerator_name}), whose taint keeps CPU pods off; use nodeGroup: system",
                    value=repr(ng.name),
                    allowed="system",
                )
            ]
        return [
            problem(
                f"{key}.nodeGroup",
                "conflict",
                f"recipe {run.RECIPE} needs an accelerated node group; {ng.name!r} is the system node"
                f" group ({it.name}, no accelerator), where only CPU recipes ({', '.join(CPU_RECIPES)}) run",
                value=repr(ng.name),
                allowed="an accelerated node group",
            )
        ]
    if run.ACCELERATOR is None or it.accelerator == run.ACCELERATOR:
        return []
    kind = {"neuron": "a Neuron (Trainium)", "nvidia": "an NVIDIA GPU"}[run.ACCELERATOR]
    return [
        problem(
            f"{key}.nodeGroup",
            "conflict",
            f"recipe {run.RECIPE} needs {kind} node group; {ng.name!r} runs {it.name} ({it.accelerator_name})",
            value=repr(ng.name),
            allowed=f"{kind} node group",
        )
    ]


def nodes_fit(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """A run fits the node group's ceiling. Fewer nodes running now (a group scaled to 0) is no
    problem: Kueue's quota follows desiredSize, so the run waits in its queue until they are."""
    if run.nodes <= ng.max_nodes:
        return []
    return [
        problem(
            f"{key}.nodes",
            "conflict",
            f"{run.nodes} nodes, but node group {ng.name!r} can have at most {ng.max_nodes}"
            f" ({ng.max_key}); use at most {ng.max_nodes} or raise maxSize",
            value=str(run.nodes),
            allowed=f"at most {ng.max_nodes}",
            hint=f"or raise {ng.max_key}",
        )
    ]


def image_repository_exists(key: str, run: RunConfig, repositories: Collection[str]) -> list[str]:
    """A run that takes its image from the recipe's repository needs that repository."""
    repo = run.REPOSITORY
    if run.image is not None or repo is None or repo in repositories:
        return []
    return [
        problem(
            f"{key}.image",
            "required",
            f"required: the stack has no ECR repository {repo!r} for recipe {run.RECIPE}"
            f" (registry.repositories: {', '.join(repositories) or 'none'})",
            hint=f"or add {repo} to registry.repositories",
        )
    ]


def versions_fit(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """A Neuron run's SDK (from neuronSdk, the image tag, or the repository's Dockerfile) trains
    on the node group's instance family, and the recipe's framework is still supported by it."""
    if ng.instance.accelerator != "neuron" or run.PUBLIC_IMAGES:
        return []  # a pinned public image is chosen per instance family (facts.serving); the SDK rules are training's
    built = run.built_image
    if run.ACCELERATOR is None and run.image is None and built is not None and built.neuron_sdk is None:
        return []  # the recipe's own image uses no device and carries no SDK (fsx-read's fio): nothing to fit
    sdk, source = run.sdk
    if sdk is None:
        return [
            problem(
                f"{key}.neuronSdk",
                "required",
                f"required: the image {run.image} does not name its Neuron SDK (no -sdk<version> in"
                " its tag); state it, e.g. 2.22.0, so the version can be checked against the instance family",
                allowed="a Neuron SDK version such as 2.22.0",
            )
        ]
    family = ng.instance.neuron_family
    wrong_family = versions.family_problems(family, framework=run.NEURON_FRAMEWORK)
    if wrong_family:
        return [problem(f"{key}.nodeGroup", "conflict", p) for p in wrong_family]
    return [
        problem(f"{key}.{source}", "conflict", p)
        for p in versions.problems(sdk, family, framework=run.NEURON_FRAMEWORK, image=run.image)
    ]


def gpu_kernels_fit(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """A GPU run's built image has kernels for the node group's GPUs: nccl-tests (and the
    health gate with it) built for sm_80/sm_90 cannot run on a B200 (sm_100) or B300 (sm_103)."""
    built, arch = run.built_image, ng.instance.cuda_arch
    if built is None or arch is None or not built.cuda_architectures or arch in built.cuda_architectures:
        return []
    have = ", ".join(f"sm_{a}" for a in sorted(built.cuda_architectures))
    fit = [t.name for t in instances.ACCELERATED.values() if t.cuda_arch in built.cuda_architectures]
    return [
        problem(
            f"{key}.nodeGroup",
            "conflict",
            f"the {run.RECIPE} image (images/{built.repository}) is built for {have} only; the"
            f" {ng.instance.accelerator_name} GPUs of {ng.instance.name} need sm_{arch}: use a node group of"
            f" {', '.join(fit)}, or name an image built for them (image)",
            value=repr(ng.name),
            allowed=f"a node group of {', '.join(fit)}",
            hint="or name an image built for them (image)",
        )
    ]


def health_check_fits(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """nccl-tests allocates three buffers of the message size on every GPU and keeps 1 GiB free;
    a larger size it shrinks in silence, so the gate would test less than it says, or nothing."""
    it, hc = ng.instance, run.health_check
    if it.accelerator != "nvidia" or not hc.enabled or hc.message_size is None:
        return []
    room = it.gpu_memory_mib * 2**20 - NCCL_TESTS_RESERVED_BYTES
    if NCCL_TESTS_BUFFERS * size_bytes(hc.message_size) <= room:
        return []
    most = f"{room // NCCL_TESTS_BUFFERS // 2**20}M"
    return [
        problem(
            f"{key}.healthCheck.messageSize",
            "conflict",
            f"{hc.message_size} does not fit: nccl-tests allocates {NCCL_TESTS_BUFFERS}"
            f" buffers of it on each GPU and keeps 1 GiB free, and a {it.accelerator_name} of {it.name} has"
            f" {it.gpu_memory_mib // 1024} GiB (it would shrink the size in silence): use at most {most}",
            value=repr(hc.message_size),
            allowed=f"at most {most}",
        )
    ]


def neuron_health_check_fits(key: str, run: RunConfig, ng: NodeGroup) -> list[str]:
    """nccom-test's all-reduce holds at least one buffer of its message size in each rank's
    NeuronCore memory (facts/device_memory.py); a larger size fails the gate on every launch."""
    it, hc = ng.instance, run.health_check
    room = rank_memory_bytes(it)
    if it.accelerator != "neuron" or not hc.enabled or hc.message_size is None or room is None:
        return []
    if size_bytes(hc.message_size) <= room:
        return []
    most = f"{room >> 30}G"
    core = "logical NeuronCore (LNC=2)" if it.accelerator_name == "Trainium2" else "NeuronCore"
    return [
        problem(
            f"{key}.healthCheck.messageSize",
            "conflict",
            f"{hc.message_size} does not fit: the gate's all-reduce holds a buffer of it on each {core},"
            f" and one of {it.name} has {room >> 30} GiB of {it.accelerator_name} device memory: use at"
            f" most {most}",
            value=repr(hc.message_size),
            allowed=f"at most {most}",
        )
    ]


def runs_problems(workloads: Mapping[str, WorkloadConfig], groups: Groups) -> list[str]:
    """Each run against the node groups: a rule whose precondition failed hides the rules after it."""
    problems: list[str] = []
    for name, run in workloads.items():
        key = f"workloads.{name}"
        unknown = known_node_group(key, run.node_group, groups)
        if unknown:
            problems += unknown
            continue
        ng = groups[run.node_group]
        mismatch = accelerator_matches(key, run, ng)
        if mismatch:
            problems += mismatch
            continue
        problems += versions_fit(key, run, ng) + gpu_kernels_fit(key, run, ng) + nodes_fit(key, run, ng)
        problems += run.problems_on(key, ng.instance)
        problems += health_check_fits(key, run, ng) + neuron_health_check_fits(key, run, ng)
    return problems


def run_names(cfg: StackConfig) -> list[str]:
    """What a run needs of its own stack: a valid name, and the platform's variables left alone."""
    named = [p for name, run in cfg.workloads.items() for p in run_name(name) + platform_env(name, run)]
    return named + run_objects(cfg.workloads) + plain_secrets(cfg.workloads)


def hub_tokens(cfg: StackConfig) -> list[str]:
    """The token every run whose recipe downloads gated Hub files needs. A rule of deploying, not of
    planning: `pulumi preview`/`up` refuse without it (config.load), while the offline commands,
    which download nothing and promise no Pulumi CLI, warn and go on (config.offline_warnings)."""
    return [p for name, run in cfg.workloads.items() for p in hugging_face_token(name, run, cfg)]


def images_exist(workloads: Mapping[str, WorkloadConfig], repositories: Collection[str]) -> list[str]:
    """Every run's image comes from a repository the stack has, or is named in full."""
    return [
        p for name, run in workloads.items() for p in image_repository_exists(f"workloads.{name}", run, repositories)
    ]


def checkpoints_fit(workloads: Mapping[str, WorkloadConfig], storage: StorageConfig) -> list[str]:
    """The checkpoints every training run keeps fit in the shared file system, with room to spare."""
    fs = storage.file_system
    trained = {name: run for name, run in sorted(workloads.items()) if isinstance(run, TrainingRun)}
    kept = {name: p for name, run in trained.items() if (p := checkpoints.plan(run.checkpoint_input, fs))}
    total = sum(p.kept_bytes for p in kept.values())
    room = storage.storage_capacity_gib * GIB * STORAGE_SHARE
    if total <= room:
        return []
    listed = ", ".join(f"{n}: {p.kept} x {p.size_bytes / 1e9:,.0f} GB" for n, p in kept.items())
    keys = ", ".join(f"workloads.{n}.{trained[n].checkpoints_kept_key}" for n in kept)
    return [
        problem(
            "storage.storageCapacityGib",
            "conflict",
            f"the checkpoints the runs keep ({listed}) need {total / 1e12:,.2f} TB, more than"
            f" {STORAGE_SHARE:.0%} of {storage.storage_capacity_gib} GiB; grow the file system (a multiple"
            f" of 2400 GiB) or keep fewer ({keys})",
            value=str(storage.storage_capacity_gib),
            hint=f"grow the file system (a multiple of 2400 GiB) or keep fewer ({keys})",
        )
    ]


def checkpoint_write_seconds(
    workloads: Mapping[str, WorkloadConfig], group: str, storage: StorageConfig
) -> float | None:
    """The longest time one checkpoint of the training runs on node group `group` takes to write to
    the shared file system (estimates.checkpoints), or None when no run there sizes its checkpoints:
    what a Capacity Block group's scale-down leaves before EC2 shuts its instances down."""
    fs = storage.file_system
    seconds = [
        p.write_seconds
        for run in workloads.values()
        if isinstance(run, TrainingRun) and run.node_group == group
        if (p := checkpoints.plan(run.checkpoint_input, fs)) is not None
    ]
    return max(seconds, default=None)


def run_step_seconds(run: RunConfig, instance_type: str) -> float | None:
    """The run's seconds per step: configured, or its recipe's published estimate, or unknown."""
    return step_time(run.step_seconds, run.step_estimate(instance_type), "stepSeconds")[0]


def checkpoint_share(workloads: Mapping[str, WorkloadConfig], groups: Groups, storage: StorageConfig) -> list[str]:
    """A run whose checkpoints would take more than 2% of its training time to write (at the file
    system's full throughput and the run's known or estimated step time) is refused, with the
    shortest interval that fits."""
    problems: list[str] = []
    fs = storage.file_system
    for name, run in sorted(workloads.items()):
        if not isinstance(run, TrainingRun):  # only a training run checkpoints
            continue
        ng = groups.get(run.node_group)
        step = run_step_seconds(run, ng.instance.name) if ng else None
        plan = checkpoints.plan(run.checkpoint_input, fs, step) if ng else None
        share = plan.write_share if plan else None
        if plan is None or plan.step_seconds is None or share is None or share <= MAX_WRITE_SHARE:
            continue
        fits, total = plan.shortest_interval(), plan.total_steps
        every = plan.interval_steps if total is None else min(plan.interval_steps or total, total)
        advice = (
            f"use {fits} steps or more, or raise"
            if total is None or (fits or 0) < total
            else f"no interval fits a run of {total} steps (it saves at its last step): raise"
        )
        problems.append(
            problem(
                f"workloads.{name}.{run.checkpoint_interval_key}",
                "conflict",
                f"a {plan.size_bytes / 1e9:,.0f} GB checkpoint every"
                f" {every} steps of {plan.step_seconds:.3g} s takes {share:.1%} of training time to write"
                f" (~{plan.write_seconds:,.0f} s each at the file system's {fs.mb_per_second:,.0f} MB/s);"
                f" at most {MAX_WRITE_SHARE:.0%}: {advice} storage.throughputPerTib or storage.storageCapacityGib",
                value=str(every),
                allowed=f"{fits} steps or more" if fits and (total is None or fits < total) else None,
            )
        )
    return problems
