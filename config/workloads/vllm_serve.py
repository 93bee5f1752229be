"""Recipe `vllm-serve`: a model served with vLLM's OpenAI-compatible server on GPUs or Neuron
devices (its builder: workloads/manifests/vllm_serve.py).

The model is a Hugging Face Hub repository, staged once onto /shared by a Job with egress, or
the output of a training run of the same stack, converted to a Hugging Face folder by the
training recipe's own converter (its `CONVERSION`). The server runs offline from /shared.
"""

# size: the recipe's config, its model source and its checks against the node group, read together

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from config.aws import check_acm_certificate_arn
from config.base import RUN_ID_RE, WORKLOAD_NAME_RE, KeyProblem, Model, Refusal, matches
from config.problems import problem
from config.workloads.base import RunConfig, ServingRun, TrainingRun
from config.workloads.recipe import Arguments, Converter, ExampleStacks, HeldAgainst, NoConversion, RecipeDocs, Support
from estimates.startup import CompileTime, ServerReplicas, serving_basis
from estimates.step_time import StepTime, UnknownStepTime
from facts import images, instances, leaderworkerset, needs, serving
from facts.nodegroups import Placement, placement

HUB_REPO_RE = r"[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?"
HUB_MODEL_PATTERNS = ("*.json", "*.safetensors", *needs.HUB_TOKENIZER_PATTERNS)
"""What the server reads of a Hub model repository: its configs (generation_config.json too),
safetensors weights (vLLM's default load format prefers them), and every tokenizer file and chat
template it may read offline (a slow tokenizer's vocab.json and merges.txt, chat_template.jinja)."""


class ServeModelConfig(Model):
    """The model a serving run serves: a Hub repository, or a training run of this stack."""

    hub: str | None = Field(
        None,
        description="Hugging Face Hub model repository (`owner/name`), staged onto /shared once; give hub or workload.",
    )
    revision: str = Field("main", description="Hub revision (branch, tag or commit) of `hub`.")
    parameters_billions: float | None = Field(
        None,
        gt=0,
        description="Parameters of the Hub model, in billions: sizes its memory and load time (required with hub).",
        json_schema_extra={"x-default": "from the training run's model shape (workload)"},
    )
    workload: str | None = Field(
        None,
        description="A training run of this stack (`workloads.<name>`) whose finished run is converted and served.",
    )
    run_id: str | None = Field(
        None,
        description="A run of `workload` to serve, pinned: it must have finished (`pulumi up` awaits its conversion).",
        json_schema_extra={"x-default": "the newest run of `workload` converted whole (the next one is never awaited)"},
    )
    wait_for_run_minutes: int = Field(
        0,
        ge=0,
        le=24 * 60,
        description="With `runId`: how long the conversion waits for that run to finish before it fails"
        " (`pulumi up` waits as long); 0: the run must have finished already.",
    )

    @field_validator("hub")
    @classmethod
    def _hub(cls, v: str | None) -> str | None:
        if v is not None and not matches(HUB_REPO_RE, v):
            raise Refusal(f"{v!r} is not a Hub model repository like meta-llama/Llama-3.1-8B-Instruct", "invalid")
        return v

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str | None) -> str | None:
        if v is not None and not matches(WORKLOAD_NAME_RE, v):
            raise Refusal(f"{v!r} is not a workload name (a key of workloads)", "invalid")
        return v

    @field_validator("run_id")
    @classmethod
    def _run(cls, v: str | None) -> str | None:
        if v is not None and not matches(RUN_ID_RE, v):
            raise Refusal(f"{v!r} must be 1-20 lowercase letters, digits and hyphens, e.g. run-001", "invalid")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> ServeModelConfig:
        if (self.hub is None) == (self.workload is None):
            raise KeyProblem(
                "hub", "give hub (a Hub repository) or workload (a training run of this stack), one", "conflict"
            )
        if self.hub is not None and self.parameters_billions is None:
            raise KeyProblem(
                "parametersBillions", "required with hub (it sizes memory and load time), e.g. 8.03", "required"
            )
        if self.wait_for_run_minutes and self.run_id is None:
            raise KeyProblem(
                "waitForRunMinutes",
                "only with runId (a pinned run); a followed run's conversion waits on the cluster, not in `pulumi up`",
                "conflict",
            )
        if self.hub is None and (self.parameters_billions is not None or "revision" in self.model_fields_set):
            key = "parametersBillions" if self.parameters_billions is not None else "revision"
            raise KeyProblem(key, "only with hub (a training run's size comes from its model shape)", "conflict")
        return self

    @property
    def hub_repo(self) -> needs.HubRepo | None:
        """What the staging step downloads and the server reads offline."""
        if self.hub is None:
            return None
        return needs.HubRepo(self.hub, ("config.json",), HUB_MODEL_PATTERNS, revision=self.revision)


class ServeClientsConfig(Model):
    """Who may call the server (its NetworkPolicy; every training namespace is default-deny)."""

    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces whose pods may call the server (all of their pods, or those with `podLabels`).",
    )
    pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a client pod carries (in the server's namespace, or in `namespaces`).",
        json_schema_extra={"x-default": "`llm-training-eks/client-of: <workload>` in the server's namespace"},
    )


class VllmServeWorkload(ServingRun):
    """A model served with vLLM: a Deployment of replicas (or, for a replica larger than one node,
    a LeaderWorkerSet of groups) behind a Service, fed from /shared."""

    RECIPE: ClassVar[str] = "vllm-serve"
    PUBLIC_IMAGES: ClassVar[bool] = True
    STEPS: ClassVar[tuple[str, ...]] = ("image", "dirs", "model", "serve", "service", "clients")
    UNUSED_KEYS: ClassVar[tuple[str, ...]] = ("health_check", "step_seconds", "max_retries", "image_tag")
    STEP_TIME: ClassVar[StepTime] = UnknownStepTime(
        "a server has no optimizer step: its cost is its replicas' hours, in the plan per hour"
    )
    DOCS: ClassVar[RecipeDocs] = RecipeDocs(
        follows="vLLM 0.24.0 `vllm serve` (GPU, and vLLM Neuron 0.24.0.1.1.0 on Trn2); vLLM 0.16.0 on NxD Inference"
        " for trn1/inf2 (maintenance)",
        image="`vllm/vllm-openai:v0.24.0`; Neuron DLC `pytorch-inference-vllm-neuronx` (SDK 2.32.0 on Trn2,"
        " SDK 2.31.1 on trn1)",
        steps={
            "image": "image check Job",
            "dirs": "directory Job",
            "model": "a Hub model: Secret (HF token) and Hub Job (the repository onto `/shared/hf-hub`); a training"
            " run: conversion Job (its checkpoint to a Hugging Face folder, in the run's image)",
            "serve": "Deployment (vLLM, offline, admitted by Kueue) and its PodDisruptionBudget; a replica of"
            " `nodes` above 1: a LeaderWorkerSet (one group per replica) and the NetworkPolicy between its pods",
            "service": "Service (ClusterIP; of a LeaderWorkerSet, its leaders only); with `endpoint:"
            " internalLoadBalancer` also a Service of type LoadBalancer (an internal NLB by the AWS Load Balancer"
            " Controller) and the NetworkPolicy that admits its traffic",
            "clients": "NetworkPolicy (the server, reached by the clients the config names)",
        },
        support=Support(
            "NVIDIA GPU node groups; trn2 (vLLM Neuron); trn1, inf2 (maintenance image)",
            "vLLM 0.24.0; vLLM Neuron 0.24.0.1.1.0 (Neuron SDK 2.32.0); vLLM 0.16.0 on NxD Inference (SDK 2.31.1)",
            "current",
            "vLLM's current release on GPUs and Trn2; trn1 and inf2 serve on the last vLLM image for them (vLLM 0.16.0"
            " on NxD Inference, no newer vLLM there: facts/serving.py)",
        ),
    )
    EXAMPLE_STACKS: ClassVar[ExampleStacks] = ("p5-train-serve", "trn2-serve", "p5-serve-405b")
    ARGUMENTS: ClassVar[Arguments] = HeldAgainst(
        ("vllm-v0.24.0",),
        "the options of `vllm serve` against the parser of the vLLM of each pinned image (vllm-v0.24.0, and"
        " vllm-v0.16.0 for the trn1 image), and the conversion Job's converter against the training recipe's"
        " upstream (its `hf_converter`)",
    )
    CONVERSION: ClassVar[Converter] = NoConversion("a server produces no checkpoint")
    COMPILE: ClassVar[CompileTime] = CompileTime(
        None,
        "a server has no first training step: its start, a Neuron compile included, is its cost line's",
        hit="none",
    )

    recipe: Literal["vllm-serve"] = Field(description="vllm-serve")
    nodes: int = Field(
        1,
        ge=1,
        le=leaderworkerset.MAX_GROUP_SIZE,
        description="Nodes per replica: 1, a Deployment; more, a LeaderWorkerSet group of that many whole nodes"
        " (GPUs only), tensorParallel within a node and pipelineParallel stages across them.",
    )
    model: ServeModelConfig = Field(description="What to serve: a Hub model or a training run of this stack.")
    replicas: int = Field(1, ge=1, le=64, description="Server replicas (pods), each with its own accelerators.")
    max_unavailable: int = Field(
        1,
        ge=1,
        le=64,
        description="Replicas a node drain (an upgrade, a scale-in) may take down at once: the PodDisruptionBudget."
        " 1 keeps the endpoint up; replicas that start slower than EKS's 15-minute drain need all of them (preflight).",
    )
    tensor_parallel: int = Field(
        1,
        ge=1,
        description="Tensor-parallel degree of a replica: its GPUs, or its logical NeuronCores (2 per trn1 device, 4"
        " per trn2 device at LNC=2).",
    )
    pipeline_parallel: int = Field(
        1,
        ge=1,
        le=64,
        description="Pipeline-parallel degree of a replica: its layers in that many stages; across nodes, vLLM's"
        " multi-node layout is tensorParallel = a node's GPUs and pipelineParallel = nodes.",
    )
    max_model_len: int = Field(4096, ge=128, le=1_048_576, description="Longest context a request may use, tokens.")
    max_num_seqs: int = Field(64, ge=1, le=4096, description="Sequences a replica batches at once.")
    clients: ServeClientsConfig = Field(
        default_factory=ServeClientsConfig,
        description="Who may call the server; by default the pods of its namespace labelled"
        " `llm-training-eks/client-of: <workload>`.",
    )
    endpoint: Literal["clusterIP", "internalLoadBalancer"] = Field(
        "clusterIP",
        description="How the server is reached: `clusterIP` (in the cluster only), or `internalLoadBalancer` (also an"
        " internal Network Load Balancer in the private subnets, reachable from the VPC; needs"
        " `addons.loadBalancerController`). Never internet-facing.",
    )
    certificate_arn: str | None = Field(
        None,
        description="ACM certificate (its ARN, in the stack's region) for TLS on port 443 of the internal load balancer"
        " (`endpoint: internalLoadBalancer`).",
        json_schema_extra={"x-default": "none (plain HTTP on the server's port)"},
    )

    @field_validator("certificate_arn")
    @classmethod
    def _certificate(cls, v: str | None) -> str | None:
        return None if v is None else check_acm_certificate_arn(v)

    @model_validator(mode="after")
    def _tls_needs_balancer(self) -> VllmServeWorkload:
        if self.certificate_arn is not None and self.endpoint != "internalLoadBalancer":
            raise KeyProblem(
                "certificateArn", "only with endpoint: internalLoadBalancer (TLS ends at the load balancer)", "conflict"
            )
        return self

    @property
    def hub_repos(self) -> tuple[needs.HubRepo, ...]:
        repo = self.model.hub_repo
        return (repo,) if repo else ()

    def image_on(self, instance: instances.InstanceType) -> str | None:
        if self.image:
            return self.image
        pinned = serving.image_for(instance)
        return pinned.image if pinned else None

    def runtime_on(self, instance: instances.InstanceType) -> images.Runtime | None:
        pinned = serving.image_for(instance) if self.image is None else None
        return pinned.runtime if pinned else None

    @property
    def spans_nodes(self) -> bool:
        """A replica larger than one node: a LeaderWorkerSet group of `nodes` pods."""
        return self.nodes > 1

    def devices(self, instance: instances.InstanceType) -> int:
        """Accelerators one pod of a replica takes (of a group: every one of its node)."""
        if self.spans_nodes:
            return instance.accelerator_count
        return serving.devices_for(instance, self.tensor_parallel) * self.pipeline_parallel

    def replica_placement(self, instance: instances.InstanceType) -> Placement:
        """One replica's totals on `instance`: its nodes and the devices it takes on them."""
        return placement(instance, self.nodes, self.devices(instance))

    def problems_on(self, key: str, instance: instances.InstanceType) -> list[str]:
        """The image, the tensor-parallel degree and the replicas against the node group's instance."""
        pinned = serving.image_for(instance)
        if self.image is None and pinned is None:
            return [
                problem(
                    f"{key}.nodeGroup",
                    "required",
                    f"no vLLM image is pinned for {instance.name}; set image (facts/serving.py)",
                )
            ]
        if self.image is not None and pinned is not None and serving.image_for_name(self.image) not in (None, pinned):
            other = serving.image_for_name(self.image)
            assert other is not None
            return [
                problem(
                    f"{key}.image",
                    "conflict",
                    f"{self.image} serves on {', '.join(other.families)}, not {instance.name}; use {pinned.image}",
                )
            ]
        if instance.accelerator == "neuron" and (self.spans_nodes or self.pipeline_parallel > 1):
            which = "nodes" if self.spans_nodes else "pipelineParallel"
            return [
                problem(
                    f"{key}.{which}",
                    "not-supported",
                    f"vLLM Neuron serves a replica within one node, one process driving its"
                    f" NeuronCores (its platform sets the `uni` executor), so no pipeline stages and no node"
                    f" groups; use nodes 1, pipelineParallel 1, and tensorParallel up to {instance.ranks_per_node}",
                )
            ]
        per_node = instance.ranks_per_node
        if self.tensor_parallel > per_node:
            unit = "NeuronCores" if instance.accelerator == "neuron" else "GPUs"
            return [
                problem(
                    f"{key}.tensorParallel",
                    "conflict",
                    f"{self.tensor_parallel} is more than the {per_node} {unit} of one"
                    f" {instance.name} (tensor parallelism stays within a node; across nodes, nodes and"
                    " pipelineParallel)",
                )
            ]
        return self._spans(key, instance) or self._fits(key, instance)

    def _spans(self, key: str, instance: instances.InstanceType) -> list[str]:
        """A replica's ranks against its nodes: one node holds at most its GPUs; a group of nodes
        fills every GPU of each (vLLM's multi-node executor splits the ranks evenly over nodes)."""
        per_node, ranks = instance.ranks_per_node, self.tensor_parallel * self.pipeline_parallel
        if not self.spans_nodes and ranks > per_node:
            need = -(-ranks // per_node)
            return [
                problem(
                    f"{key}.nodes",
                    "conflict",
                    f"tensorParallel x pipelineParallel = {ranks} GPUs is more than the {per_node} of one"
                    f" {instance.name}; set nodes: {need} (a LeaderWorkerSet) with pipelineParallel"
                    f" {ranks // self.tensor_parallel}",
                )
            ]
        whole = placement(instance, self.nodes).ranks
        if self.spans_nodes and ranks != whole:
            return [
                problem(
                    f"{key}.pipelineParallel",
                    "conflict",
                    f"a replica of {self.nodes} nodes takes their {whole} GPUs, so"
                    f" tensorParallel x pipelineParallel must be {whole}, not {ranks} (vLLM's"
                    f" multi-node layout: tensorParallel {per_node}, pipelineParallel {self.nodes})",
                )
            ]
        return []

    def _fits(self, key: str, instance: instances.InstanceType) -> list[str]:
        """Replicas packed on the node group's nodes, and the weights in a replica's memory."""
        problems: list[str] = []
        devices = self.replica_placement(instance).devices
        if not self.spans_nodes and instance.accelerator_count % devices:
            problems.append(
                problem(
                    f"{key}.tensorParallel",
                    "conflict",
                    f"a replica of {devices} devices does not divide the {instance.accelerator_count}"
                    f" of a {instance.name}; use a power of two",
                )
            )
        memory = serving.device_memory_gib(instance)
        weights = self.weights_gib
        if memory and weights is not None and weights > devices * memory * serving.MEMORY_SHARE:
            which, fix = ("nodes", "raise nodes and pipelineParallel") if self.spans_nodes else ("tensorParallel", "")
            problems.append(
                problem(
                    f"{key}.{which}",
                    "conflict",
                    f"the model's {weights:,.0f} GiB of bf16 weights do not fit {devices} x"
                    f" {memory} GiB ({instance.accelerator_name}) at {serving.MEMORY_SHARE:.0%};"
                    f" {fix or 'raise tensorParallel'}",
                )
            )
        return problems

    @property
    def parameters(self) -> float | None:
        """Parameters served (None: from a training run, filled in by the stack's checks)."""
        b = self.model.parameters_billions
        return None if b is None else b * 1e9

    @property
    def weights_gib(self) -> float | None:
        p = self.parameters
        return None if p is None else p * serving.BYTES_PER_PARAMETER / 2**30

    def node_share(self, instance: instances.InstanceType) -> float:
        return self.replicas * self.nodes * self.devices(instance) / max(instance.accelerator_count, 1)

    @property
    def load_balancers(self) -> int:
        """`endpoint: internalLoadBalancer`: one NLB (the Load Balancer Controller's)."""
        return 1 if self.endpoint == "internalLoadBalancer" else 0

    def served_parameters(self, workloads: Mapping[str, RunConfig]) -> float | None:
        """Parameters of the model served: the Hub model's as configured, or the training run's shape."""
        trained = workloads.get(self.model.workload or "")
        return self.parameters or (trained.checkpoint_parameters if isinstance(trained, TrainingRun) else None)

    def hourly_basis(
        self, instance: instances.InstanceType, mb_per_second: float, workloads: Mapping[str, RunConfig]
    ) -> str | None:
        group = self.nodes if self.spans_nodes else None
        parameters = self.served_parameters(workloads) or 0
        replica = ServerReplicas(self.replicas, group, self.devices(instance), parameters)
        return serving_basis(replica, instance, mb_per_second)

    def replicas_per_node(self, instance: instances.InstanceType) -> int:
        return max(instance.accelerator_count // self.devices(instance), 1)

    def nodes_needed(self, instance: instances.InstanceType) -> int:
        """Nodes the replicas fill, packed (a group's nodes are its own)."""
        if self.spans_nodes:
            return self.replicas * self.nodes
        return -(-self.replicas // self.replicas_per_node(instance))
