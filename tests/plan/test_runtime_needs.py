"""Every program every example stack runs, held to what its pod actually gets: each
run-time need of facts.needs against the rendered objects of the plan, with the values read from
upstream, not from the project's facts:

- a network endpoint: the namespace's NetworkPolicies, evaluated for the pod's labels and a
  public address on the endpoint's port (tests/launch/netpolicy.py);
- Hub files: the pod reaches the Hub, or it runs offline (huggingface-hub's offline variables)
  with its Hub cache on /shared, where a step it follows, whose pod reaches the Hub, downloads
  that repository's files into that very cache;
- the accelerator: the node group's AMI release (its `releaseVersion`; without one the newest
  release EKS serves) carries a driver the image's runtime works with (the runtime release notes'
  known issues; NVIDIA's minimum driver of the image's CUDA major);
- daemons on the other hosts: the launcher's mpirun reaches `orted` there (called by absolute
  path or with --prefix, or the image's Open MPI is prefix-by-default or on sshd's PATH);
- ports: the port a program binds is the one its pod declares (probe, containerPort, variable).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import botocore.session
import pulumi_aws as aws
import pytest

from facts import instances, needs
from facts.names import NODE_GROUP_LABEL
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, stack_plan, stack_values
from tests.launch.images import Image, describe
from tests.launch.netpolicy import reaches_internet
from tests.launch.plans import at_least, refusals
from tests.shell_scan import _outside_single_quotes, scan

HUB = upstream.facts("huggingface-hub-0.24.5")
AMI = upstream.facts("amazon-eks-ami-v20260714")["releases"]
CUDA_MINIMUM = upstream.facts("nvidia-cuda-compatibility")["minimum_driver_of_cuda_major"]
SSHD_ROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The PATH sshd gives a root session (OpenSSH's superuser default, as Debian and Ubuntu build it)."""
KINDS = ("kubernetes:batch/v1:Job", "kubernetes:kubeflow.org/v2beta1:MPIJob", "kubernetes:apps/v1:Deployment")
NOT_NEEDS = {"name", "source"}


@dataclass(frozen=True)
class Pod:
    """One pod of a rendered object, and the script it runs there."""

    stack: str
    obj: dict[str, Any]
    urn: str
    role: str
    spec: dict[str, Any]
    labels: dict[str, str]

    @property
    def container(self) -> dict[str, Any]:
        return dict(self.spec["containers"][0])

    @property
    def env(self) -> dict[str, str]:
        return {e["name"]: e.get("value", "<secret>") for e in self.container.get("env", [])}

    @property
    def image(self) -> Image | None:
        try:
            return describe(self.container["image"])
        except KeyError:
            return None

    @property
    def name(self) -> str:
        return f"{self.stack}: {self.obj['metadata']['name']} {self.role}"


def _with_lower(stack: str) -> list[str]:
    """The stack and the stacks below it (a layered stack's objects are spread over them)."""
    out, name = [], stack
    while name:
        out.append(name)
        name = str(stack_values(name).get("llm-training-eks:lowerStack", "")).rpartition("/")[2]
    return out


@cache
def resources(stack: str) -> tuple[dict[str, Any], ...]:
    return tuple(r for s in _with_lower(stack) for r in stack_plan(s)["resources"])


def pods(stack: str) -> Iterator[Pod]:
    for r in stack_plan(stack)["resources"]:
        if r["type"] not in KINDS:
            continue
        obj = r["inputs"]
        roles = obj["spec"]["mpiReplicaSpecs"] if obj["kind"] == "MPIJob" else {obj["kind"]: obj["spec"]}
        for role, spec in roles.items():
            template = spec["template"]
            yield Pod(stack, obj, r["urn"], role, template["spec"], template["metadata"].get("labels", {}))


def script_of(pod: Pod) -> str:
    command = [*pod.container.get("command", []), *pod.container.get("args", [])]
    return command[2] if command[:2] in (["/bin/bash", "-c"], ["bash", "-c"]) else shlex.join(command)


def programs(script: str, where: str = "here") -> Iterator[tuple[str, str, str]]:
    """(program, where it runs: here | mpirun | ssh, the script that runs it) of a script and the
    scripts it starts; Python programs by the script file they run."""
    uses = scan(script)
    for program in sorted(uses.programs):
        yield program, where, script
    visible = _outside_single_quotes(script)  # a quoted script is scanned as it runs, below
    for name in needs.PROGRAMS:
        if (name.endswith(".py") and re.search(rf"(^|[\s/]){re.escape(name)}\b", visible)) or (
            "." in name and re.search(rf"(^|\s)-m\s+{re.escape(name)}(\s|$)", visible)
        ):
            yield name, where, script
    for how, nested in uses.nested:
        yield from programs(nested, "here" if how == "bash" else ("mpirun" if how == "mpirun" else "ssh"))


def known(program: str) -> needs.Program | None:
    return needs.PROGRAMS.get(program) or needs.PROGRAMS.get(program.rsplit("/", 1)[-1])


def runs_on(pod: Pod, where: str) -> Pod:
    """The pod a program runs in: what mpirun or ssh start runs on the MPIJob's workers."""
    if where == "here" or pod.obj["kind"] != "MPIJob":
        return pod
    spec = pod.obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    return dataclasses.replace(pod, role="Worker", spec=spec["spec"], labels=spec["metadata"].get("labels", {}))


def policies(stack: str, namespace: str) -> list[dict[str, Any]]:
    kind = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    return [
        r["inputs"] for r in resources(stack) if r["type"] == kind and r["inputs"]["metadata"]["namespace"] == namespace
    ]


def online(pod: Pod, port: int) -> bool:
    return reaches_internet(policies(pod.stack, pod.obj["metadata"]["namespace"]), pod.labels, port)


# --------------------------------------------------------------------------- the checks, one per kind of need


def check_endpoints(program: needs.Program, pod: Pod, script: str) -> list[str]:
    return [
        f"{pod.name}: {program.name} contacts {e.host}:{e.port} ({e.why}), which its NetworkPolicies do not allow"
        for e in program.endpoints
        if not e.optional and not online(pod, e.port)
    ]


def _earlier_jobs(pod: Pod) -> list[Pod]:
    """The Jobs the pod's object follows, however far back."""
    by_urn = {r["urn"]: r for r in resources(pod.stack)}
    seen: set[str] = set()
    todo = list(by_urn[pod.urn]["dependencies"])
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        seen.add(urn)
        todo += by_urn[urn]["dependencies"]
    return [p for p in pods(pod.stack) if p.urn in seen and p.obj["kind"] == "Job"]


def _downloads(script: str) -> Iterator[tuple[str, str, list[str], str]]:
    """(repository, cache directory, file patterns, revision) of each `huggingface-cli download`
    (huggingface-hub 0.x) or `hf download` (1.x, one value per repeated --include) in a script."""
    for line in script.splitlines():
        words = shlex.split(line) if re.search(r"(^|\s)(huggingface-cli|hf) download\s", line) else []
        if not words:
            continue
        args = words[words.index("download") + 1 :]
        options: dict[str, list[str]] = {"": []}
        key = ""
        for a in args:
            key = a if a.startswith("--") else key
            options.setdefault(key, []) if a.startswith("--") else options.setdefault(key, []).append(a)
        repo, *files = options[""]
        revision = (options.get("--revision") or ["main"])[0]
        yield repo, (options.get("--cache-dir") or [""])[0], files or options.get("--include", []), revision


def hub_problems(repo: needs.HubRepo, pod: Pod, who: str) -> list[str]:
    if online(pod, 443):
        return []
    env = pod.env
    if not any(env.get(k) == "1" for k in HUB["offline_env"]):
        return [f"{pod.name}: {who} reads {repo.repo} from the Hub, which the pod cannot reach, and is not offline"]
    cache_dir = env.get("HF_HUB_CACHE", "")
    if not cache_dir.startswith("/shared/"):
        return [f"{pod.name}: {who} reads {repo.repo} offline from {cache_dir!r}, which is not on /shared"]
    for job in _earlier_jobs(pod):
        for name, where, patterns, revision in _downloads(script_of(job)):
            covered = all(any(fnmatch.fnmatch(f, p) for p in patterns) for f in repo.files)
            # Offline, a read resolves its revision in the cache (refs/<branch>, or the commit's
            # own snapshot): only a download of that same revision stages it.
            same = revision == repo.revision
            if name == repo.repo and where == cache_dir and covered and same and online(job, 443):
                return []
    return [
        f"{pod.name}: {who} reads {repo.repo}@{repo.revision} ({', '.join(repo.files)}) offline, but no step before"
        f" it stages them in {cache_dir}"
    ]


def check_hub(program: needs.Program, pod: Pod, script: str) -> list[str]:
    return [p for repo in program.hub for p in hub_problems(repo, pod, program.name)]


def check_tokenizer_overrides(program: needs.Program, pod: Pod, script: str) -> list[str]:
    if not program.tokenizer_overrides:
        return []
    words = dict(
        w.lstrip("+").split("=", 1) for w in shlex.split(script) if w.lstrip("+").startswith("model.tokenizer.")
    )
    repo = needs.tokenizer_repo(words.get("model.tokenizer.library", ""), words.get("model.tokenizer.type"))
    return hub_problems(repo, pod, f"{program.name}'s tokenizer") if repo else []


def _words_after(script: str, program: str) -> Iterator[list[str]]:
    """The words after `program` on each line of a script that runs it."""
    for line in script.splitlines():
        if program not in line:
            continue
        words = shlex.split(line)
        at = next((i for i, w in enumerate(words) if w == program or w.endswith("/" + program)), None)
        if at is not None:
            yield words[at + 1 :]


def _snapshot_of(model: str, revision: str) -> tuple[str, str]:
    """(repository, revision) of a --hf-model: a Hub id, or a snapshot folder of a Hub cache
    (`.../models--<owner>--<name>/snapshots/<commit>` or `.../snapshots/$(cat .../refs/<branch>)`)."""
    m = re.search(r"/models--([^/]+)/snapshots/(?:\$\(cat \S+/refs/([^)\s]+)\)|([0-9a-f]{40}))$", model)
    if not m:
        return model, revision
    return m.group(1).replace("--", "/"), m.group(2) or m.group(3)


def check_named_repos(program: needs.Program, pod: Pod, script: str) -> list[str]:
    """Megatron Bridge: the repositories its arguments name, with the files upstream says each read takes."""
    if not program.named_repos:
        return []
    facts = upstream.facts("megatron-bridge-0.6.0")
    files, repos = facts["hub_files"], []
    for words in _words_after(script, program.name):
        options = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        overrides = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
        recipe = facts["recipes"].get(options.get("--recipe", ""), {})
        if recipe:  # the model at the revision the library recipe pins (main unless it pins one)
            revision = recipe.get("hf_revision", "main")
            repos.append(needs.HubRepo(recipe["hf_repo"], tuple(files["recipe_model"]), revision=revision))
        if overrides.get("tokenizer.tokenizer_type") == "HuggingFaceTokenizer":
            kwargs = recipe.get("sets", {}).get("tokenizer.hf_tokenizer_kwargs") or {}
            tokenizer = overrides["tokenizer.tokenizer_model"]
            # A pinned tokenizer revision is a tokenizer snapshot: every pattern of it staged.
            read = facts["tokenizer_snapshot"]["allow_patterns"] if "revision" in kwargs else files["hf_tokenizer"]
            repos.append(needs.HubRepo(tokenizer, tuple(read), revision=kwargs.get("revision", "main")))
        if words[:1] in (["import"], ["export"]):
            repo, revision = _snapshot_of(options["--hf-model"], options.get("--hf-revision", "main"))
            repos.append(needs.HubRepo(repo, tuple(files[words[0]]), revision=revision))
    return [p for repo in repos for p in hub_problems(repo, pod, program.name)]


def _node_group(stack: str, group: str) -> dict[str, Any]:
    return next(
        r["inputs"]
        for r in resources(stack)
        if r["type"] == "aws:eks/nodeGroup:NodeGroup"
        and (r["inputs"].get("labels") or {}).get(NODE_GROUP_LABEL) == group
    )


def node_instance(stack: str, group: str) -> str:
    return str(_node_group(stack, group)["instanceTypes"][0])


def node_release(stack: str, group: str) -> dict[str, str]:
    """The AMI release a node group runs: the one its managed node group pins, or the newest."""
    ng = _node_group(stack, group)
    pinned, minor = ng.get("releaseVersion"), str(ng["version"])
    return next(r for r in AMI if (r["releaseVersion"] == pinned if pinned else r["kubernetes"] == minor))


def check_accelerator(program: needs.Program, pod: Pod, script: str) -> list[str]:
    group, image = pod.spec.get("nodeSelector", {}).get(NODE_GROUP_LABEL), pod.image
    if not program.accelerator or image is None or group in (None, "system"):
        return []
    release = node_release(pod.stack, group)
    if image.neuron_runtime:
        driver, runtime = release["neuron"].removesuffix("-dkms"), image.neuron_runtime
        family = instances.get(node_instance(pod.stack, group)).family
        return [
            f"{pod.name}: {program.name} on Neuron driver {driver} ({release['releaseVersion']}), runtime {runtime}: {b}"
            for b in refusals(driver, runtime, family)
        ]
    if image.cuda_major and not at_least(release["nvidia"], CUDA_MINIMUM[image.cuda_major]):
        return [
            f"{pod.name}: {program.name}: NVIDIA driver {release['nvidia']} is older than CUDA {image.cuda_major} needs"
        ]
    return []


def check_remote_daemons(program: needs.Program, pod: Pod, script: str) -> list[str]:
    image = pod.image
    if not program.remote_daemons or image is None or image.open_mpi is None:
        return []
    calls = [v for v in scan(script).assigned.values() if re.match(r"\S*mpirun\b", v)]
    calls += [line.strip() for line in script.splitlines() if re.match(r"\s*\S*/mpirun\s", line)]
    by_default = image.prefix_by_default
    found_by_sshd = f"{image.open_mpi}/bin" in SSHD_ROOT_PATH
    out = []
    for call in calls:
        first = call.split()[0]
        if first == f"{image.open_mpi}/bin/mpirun" or "--prefix" in call.split() or by_default or found_by_sshd:
            continue
        out.append(f"{pod.name}: {first} starts orted through sshd's PATH, where {image.open_mpi}/bin is not")
    return out


def check_binds(program: needs.Program, pod: Pod, script: str) -> list[str]:
    c, out = pod.container, []
    declared = {p.get("containerPort") for p in c.get("ports", [])} | {
        c.get("readinessProbe", {}).get("tcpSocket", {}).get("port")
    }
    for port in program.binds:
        if port.number is not None and port.number not in declared:
            out.append(f"{pod.name}: {program.name} listens on {port.number}, which the container does not declare")
        if port.env is not None and port.env not in pod.env:
            out.append(f"{pod.name}: {program.name} binds ${port.env}, which the pod does not set")
    return out


def check_model_argument(program: needs.Program, pod: Pod, script: str) -> list[str]:
    """A server whose model is a Hub repository reads it as huggingface-hub does: online, or
    offline from a cache on /shared that a step before it staged."""
    if not program.model_argument:
        return []
    words = shlex.split(script)
    model = words[words.index(program.name) + 2] if words[1:2] == ["serve"] or "serve" in words else ""
    if not model or model.startswith("/"):
        return []  # a folder: the converted model on /shared
    return hub_problems(needs.HubRepo(model, ("config.json",)), pod, f"{program.name}'s model")


CHECKS: dict[str, Callable[[needs.Program, Pod, str], list[str]]] = {
    "endpoints": check_endpoints,
    "hub": check_hub,
    "tokenizer_overrides": check_tokenizer_overrides,
    "named_repos": check_named_repos,
    "accelerator": check_accelerator,
    "remote_daemons": check_remote_daemons,
    "binds": check_binds,
    "model_argument": check_model_argument,
}


def problems(stack: str) -> list[str]:
    out = []
    for pod in pods(stack):
        for program, where, script in programs(script_of(pod)):
            found = known(program)
            if found is not None:
                target = runs_on(pod, where)
                out += [p for check in CHECKS.values() for p in check(found, target, script)]
    return out


# --------------------------------------------------------------------------- the tests


def test_every_kind_of_need_has_its_check() -> None:
    """A new field of facts.needs.Program is a new kind of need: it needs its check here."""
    assert {f.name for f in dataclasses.fields(needs.Program)} - NOT_NEEDS == set(CHECKS)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_program_gets_what_it_needs_at_run_time(stack: str) -> None:
    assert problems(stack) == []


def test_every_accelerated_group_pins_its_ami_release(example_stack: str) -> None:
    """Each accelerated managed node group names the AMI release its images fit, of its own
    Kubernetes version; EKS takes a releaseVersion with a launch template that names no custom
    AMI (botocore's eks model, CreateNodegroup releaseVersion), and ours names none."""
    doc = botocore.session.get_session().get_service_model("eks").operation_model("CreateNodegroup")
    rule = doc.input_shape.members["releaseVersion"].documentation
    assert "uses a custom AMI, then don't specify" in rule and "releaseVersion" in rule
    assert "release_version" in inspect.signature(aws.eks.NodeGroupArgs.__init__).parameters  # pulumi-aws 7.51.1
    plan = stack_plan(example_stack)
    templates = [r["inputs"] for r in plan["resources"] if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"]
    groups = [r["inputs"] for r in plan["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    for ng in groups:
        if not str(ng["amiType"]).endswith(("NEURON", "NVIDIA")):
            continue
        release = ng.get("releaseVersion")
        assert release and release.startswith(f"{ng['version']}."), ng
        assert any(r["releaseVersion"] == release for r in AMI), release
    assert all("imageId" not in t for t in templates)
