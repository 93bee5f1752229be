"""The whole stack config: every section, plus `aws:region`, tags and the secret token."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator

from config.addons import AddonsConfig
from config.aws import region_problems
from config.base import Model, Refusal, matches
from config.ci_runner import CiRunnerConfig
from config.cluster import ClusterConfig, SystemNodeGroupConfig
from config.network import NetworkConfig, derived_azs
from config.nodegroups import NodeGroupConfig
from config.registry import RegistryConfig
from config.storage import BucketLifecycleConfig, StorageConfig
from config.teams import QueueingConfig, TeamConfig
from config.workloads import WorkloadConfig
from facts.names import LAYERS, PROJECT, WORKLOADS_NAMESPACE, team_namespace

# A stack reference: `<stack>`, `<org>/<stack>` or `<org>/<project>/<stack>`; each part
# alphanumerics, '-', '_', '.' (pulumi/pulumi sdk/go/common/tokens/stack_name.go and
# pkg/backend/diy/store.go at v3.259.0; tests/upstream/pulumi-cli-3.259.0.yaml).
_STACK_REF_RE = re.compile(r"(?:[A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]{1,100}", re.ASCII)


class StackConfig(Model):
    """The whole stack config (`llm-training-eks:*` keys plus `aws:region`)."""

    region: str = Field(
        description=(
            "AWS region with EKS in the `aws` partition (botocore's endpoint data; GovCloud and China are "
            "refused: the program writes `arn:aws:` ARNs); every layer sets it, and a cluster or runs layer's "
            "must be its aws layer's."
        )
    )
    layer: str = Field(
        "all",
        description=(
            "What the stack declares: everything (`all`), or one layer of a layered environment "
            "(docs/layered-and-ci.md)."
        ),
        json_schema_extra={"x-values": ["all", "aws", "cluster", "runs"]},
    )
    lower_stack: str = Field(
        "",
        description=(
            "Cluster and runs layers: the stack of the layer below, e.g. `organization/llm-training-eks/prod-aws` "
            "(cluster: its aws stack; runs: its cluster stack)."
        ),
        json_schema_extra={"x-default": "none"},
    )
    ci_runner: CiRunnerConfig = Field(default_factory=CiRunnerConfig, description="In-VPC CI runner (aws layer).")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="VPC layout.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="EKS control plane.")
    system_node_group: SystemNodeGroupConfig = Field(
        default_factory=SystemNodeGroupConfig, description="Nodes for controllers and add-ons."
    )
    node_groups: list[NodeGroupConfig] = Field(default_factory=list, description="Accelerated EFA node groups.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Shared FSx for Lustre and S3.")
    registry: RegistryConfig = Field(default_factory=RegistryConfig, description="ECR repositories.")
    addons: AddonsConfig = Field(default_factory=AddonsConfig, description="Cluster add-ons.")
    protect_stateful_resources: bool = Field(
        True,
        description="Protect KMS keys, FSx, buckets and ECR from deletion by `pulumi destroy`/`up`; false also lets a"
        " destroy empty the buckets and ECR repositories (force_destroy, force_delete).",
    )
    bucket_lifecycle: BucketLifecycleConfig = Field(
        default_factory=BucketLifecycleConfig, description="Lifecycle rule of every S3 bucket the stack makes."
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Tags on every taggable AWS resource (provider default tags) and on the instances, volumes and "
            "network interfaces the launch templates start; checked against every service's tag rules."
        ),
    )
    workloads: dict[str, WorkloadConfig] = Field(default_factory=dict, description="Training runs by name.")
    teams: dict[str, TeamConfig] = Field(
        default_factory=dict,
        description="Teams sharing the cluster (Kueue queues); empty: one `default` queue over every node group.",
    )
    queueing: QueueingConfig = Field(default_factory=QueueingConfig, description="Kueue admission settings.")
    hugging_face_token: SecretStr | None = Field(
        None,
        description=(
            "Hugging Face token, stored encrypted (`pulumi config set --secret huggingFaceToken hf_...`); "
            "required by a run whose recipe downloads gated files (the plan names the run)."
        ),
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        found = region_problems(v)
        if found:
            raise Refusal(found, "not-supported")
        return v

    @field_validator("layer")
    @classmethod
    def _layer(cls, v: str) -> str:
        if v not in LAYERS:
            raise Refusal(
                f"{v!r} is not a layer; valid: {', '.join(LAYERS)}", "not-supported", allowed=", ".join(LAYERS)
            )
        return v

    @field_validator("lower_stack")
    @classmethod
    def _lower_stack(cls, v: str) -> str:
        if v and not matches(_STACK_REF_RE, v):
            raise Refusal(f"{v!r} is not a stack name like organization/{PROJECT}/my-env-aws", "invalid")
        parts = v.split("/")
        if len(parts) == 3 and parts[1] != PROJECT:
            raise Refusal(
                f"{v!r} names project {parts[1]!r}; the layers are stacks of this project ({PROJECT})", "invalid"
            )
        return v

    @property
    def expiring_teams(self) -> list[str]:
        """The teams whose run outputs the data bucket expires: `storage.exportRetentionTeams`, by
        default the stack's own teams in an all-in-one stack (which declares both the bucket and
        the teams) and none in an aws-layer stack (which does not read `teams`)."""
        listed = self.storage.export_retention_teams
        if listed is not None:
            return listed
        return sorted(self.teams) if self.layer == "all" else []

    @property
    def lower_stack_name(self) -> str:
        """The referenced stack's own name (the last part of `lowerStack`)."""
        return self.lower_stack.rpartition("/")[2]

    @property
    def availability_zones(self) -> list[str]:
        """The VPC's AZs: those of an existing VPC's private subnets, as configured, or derived
        (config.network.derived_azs; config.placement requires them given once it would depend on
        node groups)."""
        if self.network.existing:
            return list(self.network.private_subnet_ids)
        if self.network.availability_zones:
            return list(self.network.availability_zones)
        named = [ng.availability_zone for ng in self.node_groups if ng.availability_zone]
        return derived_azs(self.region, named, self.network.az_count)

    def node_group_az(self, ng: NodeGroupConfig) -> str:
        """The AZ a node group runs in."""
        return ng.availability_zone or self.availability_zones[0]

    @property
    def file_system_az(self) -> str:
        """The AZ of the Lustre file system: `storage.availabilityZone`, else (no node group names
        its AZ, so every one runs in the VPC's first AZ) the VPC's first AZ. A Lustre file system
        lives in one subnet for good; node groups in other AZs still mount it, across AZs, with
        more latency and cross-AZ data charges."""
        return self.storage.availability_zone or self.availability_zones[0]

    @property
    def serving_namespaces(self) -> tuple[str, ...]:
        """The namespaces the stack's serving runs live in (their team's, or the default one)."""
        return tuple(
            sorted(
                {
                    team_namespace(w.team) if w.team else WORKLOADS_NAMESPACE
                    for w in self.workloads.values()
                    if w.KIND == "serving"
                }
            )
        )

    @property
    def scrapes_serving(self) -> bool:
        """Whether the CloudWatch add-on runs the serving scraper (`addons.observability.servingMetrics`,
        by default: a workload of this stack serves)."""
        asked = self.addons.observability.serving_metrics
        return bool(self.serving_namespaces) if asked is None else asked

    @property
    def leader_worker_set(self) -> bool:
        """Whether the cluster gets the LeaderWorkerSet controller (and Kueue its integration):
        `addons.leaderWorkerSet`, or, unset, when a serving run of this stack spans nodes."""
        if self.addons.leader_worker_set is not None:
            return self.addons.leader_worker_set
        return any(getattr(run, "spans_nodes", False) for run in self.workloads.values())
