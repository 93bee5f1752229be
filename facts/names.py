"""Names every layer agrees on: one spelling each.

Config, the components, the workloads, the policy pack and the tools all refer to these;
nothing else spells them. Changing one changes live objects (a label, a namespace, a type
token in a URN), so each change is a migration, not a rename.
"""

from __future__ import annotations

PROJECT = "llm-training-eks"


def component_type(layer: str, kind: str) -> str:
    """The Pulumi type token of one of our components, e.g. `llm-training-eks:infra:Cluster`."""
    return f"{PROJECT}:{layer}:{kind}"


# --------------------------------------------------------------------------- namespaces

WORKLOADS_NAMESPACE = "training"
"""Where training runs, their queue and the shared-storage claim live in a stack without teams."""
TEAM_NAMESPACE_PREFIX = "team-"
"""A team's runs, its LocalQueue and its claim of the shared file system live in `team-<name>`."""
TEAMS_SUB_PATH = "teams"
"""A team sees `/shared` as `teams/<name>/` of the file system (a subPath of its own claim)."""


RUNS_DIR = "runs"
"""The top-level directory of `/shared` (and so an S3 prefix: `runs/`, or a team's
`teams/<team>/runs/`) holding every run's checkpoints and exports: `runs/<workload>/<runId>/`
(workloads.manifests.objects.run_dir)."""


def team_namespace(team: str) -> str:
    """The namespace of a team's runs (teams.<name>: 1-40 lowercase letters, digits, hyphens)."""
    return f"{TEAM_NAMESPACE_PREFIX}{team}"


def team_sub_path(team: str) -> str:
    """The directory of the shared file system a team's pods see as `/shared`."""
    return f"{TEAMS_SUB_PATH}/{team}"


SYSTEM_NAMESPACE = "kube-system"
KUEUE_NAMESPACE = "kueue-system"
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"

# --------------------------------------------------------------------------- node groups and queues

SYSTEM_NODE_GROUP = "system"
"""The general-purpose node group: its EKS name, its node-group label value and its Kueue
ResourceFlavor. MPI launchers and controllers run there."""
DEFAULT_QUEUE = "default"
"""The one Kueue queue of a stack without teams."""
COHORT = "llm-training"
"""The Kueue cohort every team's ClusterQueue joins, so unused quota can be borrowed."""

# --------------------------------------------------------------------------- labels and tags

NODE_GROUP_LABEL = f"{PROJECT}/node-group"
ACCELERATOR_LABEL = f"{PROJECT}/accelerator"
EFA_LABEL = "vpc.amazonaws.com/efa.present"
NVIDIA_PRESENT_LABEL = "nvidia.com/gpu.present"
NEURON_PRESENT_LABEL = "aws.amazon.com/neuron.present"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""The well-known label the kubelet sets to the node's EC2 instance type."""
RUN_ID_LABEL = f"{PROJECT}/run-id"
ROLE_LABEL = f"{PROJECT}/role"
VOLUME_LABEL = f"{PROJECT}/volume"
CLUSTER_TAG = f"{PROJECT}/cluster"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that sends a job to a Kueue LocalQueue."""
KUEUE_MANAGED_LABEL = f"{PROJECT}/kueue-managed"
"""On the tenants' namespaces: Kueue's managedJobsNamespaceSelector (infra/queues.py), so its
pod-based integrations, and their fail-closed webhooks, reach these namespaces and no other."""
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The label that gives a job a Kueue WorkloadPriorityClass."""
EGRESS_LABEL = f"{PROJECT}/egress"
"""On a pod: `internet` lets it open HTTPS connections outside the VPC (its namespace's
NetworkPolicy `allow-internet-egress`); pods without it reach only what their policies name."""
EGRESS_INTERNET = "internet"
MPI_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
"""The label mpi-operator v0.8.0 puts on every pod of an MPIJob (`defaultLabels`), the job's name."""
MPI_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
"""The label mpi-operator v0.8.0 puts on every pod of an MPIJob: `launcher` or `worker`."""
PART_OF_LABEL = "app.kubernetes.io/part-of"
COMPONENT_LABEL = "app.kubernetes.io/component"
NAME_LABEL = "app.kubernetes.io/name"


# --------------------------------------------------------------------------- policy exceptions
# An exception to a mandatory policy rule is explicit and carries its reason: a tag (AWS) or an
# annotation (Kubernetes) on the very resource, its value the reason. The infra sets the tag
# when the stack config asks for the excepted setting; the rules honour nothing else.

POLICY_EXCEPTION = f"{PROJECT}/policy-exception"
HOP_LIMIT_EXCEPTION_TAG = f"{POLICY_EXCEPTION}/imds-hop-limit-2"
"""On a launch template: IMDS hop limit 2 (a pod may reach the node's IMDS)."""
SCRATCH_EXCEPTION_TAG = f"{POLICY_EXCEPTION}/scratch-file-system"
"""On an FSx for Lustre file system: SCRATCH deployment (no replication, no backups)."""
PUBLIC_ENDPOINT_EXCEPTION_TAG = f"{POLICY_EXCEPTION}/public-endpoint-anywhere"
"""On the EKS cluster: a public API endpoint open to the whole internet."""
NO_SCAN_EXCEPTION_TAG = f"{POLICY_EXCEPTION}/no-scan-on-push"
"""On an ECR repository: images not scanned on push."""
PRIVILEGED_EXCEPTION_ANNOTATION = f"{PROJECT}/policy-exception.privileged"
"""On a Kubernetes workload: `<container>[,<container>...]: <reason>`; those containers (and
no others) may be privileged or add capabilities."""
HOST_ACCESS_EXCEPTION_ANNOTATION = f"{PROJECT}/policy-exception.host-access"
"""On a Kubernetes workload: `<reason>`; its pods may use host namespaces and hostPath volumes."""
INTERNET_FACING_EXCEPTION_ANNOTATION = f"{PROJECT}/policy-exception.internet-facing"
"""On a Service of type LoadBalancer or an Ingress: `<reason>`; it may be reached from the internet."""


def app_labels(component: str | None = None, name: str | None = None) -> dict[str, str]:
    """The recommended Kubernetes labels of an object this project makes."""
    labels = {PART_OF_LABEL: PROJECT}
    if component:
        labels[COMPONENT_LABEL] = component
    if name:
        labels[NAME_LABEL] = name
    return labels


# --------------------------------------------------------------------------- extended resources
# What the device plugins advertise (aws-neuron device plugin, NVIDIA k8s-device-plugin, AWS
# EFA k8s device plugin).

NEURON_RESOURCE = "aws.amazon.com/neuron"
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
NVIDIA_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# --------------------------------------------------------------------------- shared storage

SHARED_MOUNT = "/shared"
STORAGE_CLAIM = "shared-fsx"
"""The ReadWriteMany claim of the shared FSx for Lustre file system in the workloads namespace."""
SHARED_VOLUME = "shared-fsx"
"""The static PersistentVolume behind that claim."""

# --------------------------------------------------------------------------- layers and CI

LAYERS = ("all", "aws", "cluster", "runs")
"""`layer` of a stack: `all` declares everything in one stack (the quick start); the three
others are one lifecycle each, joined by stack references: aws <- cluster <- runs."""
LOWER_LAYER = {"cluster": "aws", "runs": "cluster"}
"""The layer whose stack a layer reads (its `lowerStack`)."""


CI_RUNNER_KINDS = ("preview", "deploy")
"""The two in-VPC runners of an environment: `preview` (pull-request previews and drift checks:
read-only state, read-only cluster) and `deploy` (reviewed deploys: state writes, cluster admin)."""


def ci_runner_project(cluster_name: str, kind: str = "deploy") -> str:
    """The CodeBuild project of a cluster's in-VPC CI runner of `kind`; GitHub jobs name it in
    `runs-on` as `codebuild-<project>-${{ github.run_id }}-${{ github.run_attempt }}`. The deploy
    runner keeps the name the single runner had (`<cluster>-ci-runner`), so an existing stack's
    project, webhook and role are updated in place, not replaced."""
    if kind not in CI_RUNNER_KINDS:
        raise ValueError(f"runner kind {kind!r}: one of {CI_RUNNER_KINDS}")
    return f"{cluster_name}-ci-runner" if kind == "deploy" else f"{cluster_name}-ci-preview"


def image_project(cluster_name: str, repository: str) -> str:
    """The CodeBuild project that builds `repository`'s image (infra/images.py)."""
    return f"{cluster_name}-{repository}-image"


def image_repository(cluster_name: str, repository: str) -> str:
    """The ECR repository of `repository`'s image (infra/registry.py)."""
    return f"{cluster_name.lower()}/{repository}"


# --------------------------------------------------------------------------- object names of a run


def training_job_name(workload: str, run_id: str) -> str:
    """The MPIJob of a run (workloads/manifests/healthcheck.py names it so; a test holds the plan to
    it): the MPI operator names its Service after it and its pods `<job>-worker-<i>`."""
    return f"{workload}-{run_id}-train"


PLATFORM_LABEL_PREFIX = f"{PROJECT}/"
"""Labels and annotations under this prefix are the platform's own."""
PLATFORM_NODE_LABELS = (NODE_GROUP_LABEL, ACCELERATOR_LABEL, EFA_LABEL, NVIDIA_PRESENT_LABEL, NEURON_PRESENT_LABEL)
"""Node labels the platform sets and selects on (charts' node selectors, Kueue flavors, runs)."""

# --------------------------------------------------------------------------- a run's environment

PLATFORM_ENV = {
    "NNODES": "workloads.<name>.nodes",
    "NPROC_PER_NODE": "the node group's accelerator ranks (processesPerNode for custom and ddp-cpu)",
    "MASTER_ADDR": "the job's first worker, the rendezvous host",
    "MASTER_PORT": "the rendezvous port the job's NetworkPolicy opens",
    "RUN_ID": "workloads.<name>.runId",
    "RUN_DIR": "the run's directory on the shared file system, from runId",
    "CHECKPOINT_DIR": "the run's checkpoint directory, from runId: a restart resumes from it",
    "CHECKPOINT_EVERY_STEPS": "the recipe's checkpoint interval (checkpointEverySteps)",
    "SHARED_DIR": "the shared file system's mount",
}
"""Variables the platform sets in every process of a run (workloads/manifests/mpijob.py
`base_env`; tests/plan/test_workloads.py holds the two together), and what they follow. A run's
`env` that set one would break rendezvous or checkpoints silently, so config refuses it; the
tuning variables beside them (FI_*, NCCL_*, NEURON_*, the recipe's) a run's `env` may change."""
