"""Limits of the systems a stack ends up in, each with the source that states it.

Config refuses what would cross them (config/checks/), so a stack is refused at `pulumi
preview` naming its key instead of failing halfway through `pulumi up`. Each number is held
against its source in tests/upstream/ by tests/unit/test_destination_limits.py.
"""

from __future__ import annotations

CAPACITY_BLOCK_MAX_INSTANCES = 64
"""Instances one Capacity Block holds at most (EC2 user guide, ec2-capacity-blocks: "Each
Capacity Block can have up to 64 instances")."""
CAPACITY_BLOCK_MAX_DAYS = 182
"""The longest Capacity Block (EC2 user guide, ec2-capacity-blocks: 1-day increments up to 14
days, 7-day increments up to 182 days)."""
CAPACITY_BLOCK_TYPES = frozenset(
    {
        "p4d.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "p6-b300.48xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
        "trn2u.48xlarge",
    }
)
"""Instance types EC2 sells as Capacity Blocks (EC2 user guide, ec2-capacity-blocks and
capacity-blocks-how; AWS PCS user guide, capacity-blocks, for p6-b300), trn2u as the members of a
Trn2 UltraServer Capacity Block: not p4de, not trn1n."""

KUEUE_MAX_FLAVORS = 64
"""Flavors of one ClusterQueue resource group (kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go,
ResourceGroup.flavors `+kubebuilder:validation:MaxItems=64`): the API server refuses more."""

SECURITY_GROUP_RULES = 60
"""Inbound (and, separately, outbound) rules per security group, the default quota (VPC user
guide, amazon-vpc-limits; adjustable): EC2 refuses the 61st with
RulesPerSecurityGroupLimitExceeded until the quota is raised."""
EKS_CLUSTER_SG_INBOUND = 1
"""Inbound rules EKS puts on the cluster security group it creates (EKS user guide, sec-group-reqs:
all traffic from the group itself)."""

SUBNET_RESERVED_ADDRESSES = 5
"""Addresses AWS keeps in every subnet: the first four and the last (VPC user guide, subnet-sizing)."""

NCCL_TESTS_BUFFERS = 3
"""Buffers of its message size nccl-tests allocates on each GPU with its data check on (`-c 1`):
send, receive and expected (nccl-tests v2.13.10 src/common.cu, AllocateBuffs)."""
NCCL_TESTS_RESERVED_BYTES = 1 << 30
"""What nccl-tests keeps free on each GPU beside its buffers; above that it silently shrinks the
largest size it tests (src/common.cu: `memMaxBytes = (maxMem - (1<<30)) / (datacheck ? 3 : 2)`)."""
