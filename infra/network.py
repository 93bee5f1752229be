"""The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers; or an
existing VPC (`network.vpcId`), of which the stack uses the private subnets and creates none of
the network itself."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from config.addons import AddonsConfig
from config.network import PRIVATE_SUBNET_EXTRA_BITS, NetworkConfig
from facts.names import component_type
from infra.context import StackContext
from infra.iam import log_writer_policy, scoped_trust_policy
from infra.platform import InternalLoadBalancing
from infra.protection import audit_trail


@dataclass(frozen=True)
class SubnetPlan:
    """The CIDRs of one AZ."""

    az: str
    private_cidr: str
    public_cidr: str


def subnet_plan(vpc_cidr: str, azs: Sequence[str]) -> list[SubnetPlan]:
    """Carve the VPC: a large private subnet per AZ (/19 of a /16: 8,187 addresses, since the
    VPC CNI gives every pod a VPC IP and an accelerated node can hold hundreds of pods with
    warm IPs), and a small public subnet per AZ for NAT gateways and internet-facing LBs.

    Private subnets take the first half of the VPC, public subnets the start of the second.
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    private = list(vpc.subnets(new_prefix=vpc.prefixlen + PRIVATE_SUBNET_EXTRA_BITS))
    public = list(vpc.subnets(new_prefix=vpc.prefixlen + 8))
    half = len(public) // 2
    return [
        SubnetPlan(az=az, private_cidr=str(private[i]), public_cidr=str(public[half + i])) for i, az in enumerate(azs)
    ]


def private_subnet_name(cluster: str, az: str) -> str:
    """The Name tag of a created VPC's private subnet in `az`."""
    return f"{cluster}-private-{az}"


def internal_load_balancing(
    network: NetworkConfig, cluster: str, azs: Sequence[str], addons: AddonsConfig
) -> InternalLoadBalancing | None:
    """The private subnets (by Name tag) and CIDRs an internal load balancer uses, in a VPC the
    stack creates with the Load Balancer Controller on; None without the controller, or in an
    existing VPC, whose subnets' CIDRs the stack does not know."""
    if network.existing or not addons.load_balancer_controller:
        return None
    plans = subnet_plan(network.cidr, azs)
    return InternalLoadBalancing(
        tuple(private_subnet_name(cluster, p.az) for p in plans), tuple(p.private_cidr for p in plans)
    )


def load_balancer_inputs(
    network: NetworkConfig, vpc_id: pulumi.Input[str], cluster: str, azs: Sequence[str], addons: AddonsConfig
) -> dict[str, Any]:
    """What the aws layer hands the cluster layer for the Load Balancer Controller (ClusterInputs'
    `vpc_id` and `load_balancing`)."""
    return {"vpc_id": vpc_id, "load_balancing": internal_load_balancing(network, cluster, azs, addons)}


class Network(pulumi.ComponentResource):
    """VPC over two or more AZs with NAT egress and an S3 gateway endpoint, or an existing VPC's
    private subnets (with the S3 endpoint on its route tables when asked)."""

    vpc_id: pulumi.Input[str]
    private_subnet_ids: dict[str, pulumi.Input[str]]
    """AZ name -> private subnet id."""
    public_subnet_ids: dict[str, pulumi.Input[str]]

    def __init__(
        self,
        name: str,
        network: NetworkConfig,
        ctx: StackContext,
        azs: Sequence[str],
        opts: pulumi.ResourceOptions | None = None,
        *,
        addresses: Mapping[str, int] | None = None,
    ):
        # An existing VPC shows what the stack takes from it (and must find free) in the plan.
        props = None
        if network.existing:
            props = {
                "vpcId": network.vpc_id,
                "privateSubnetIds": dict(network.private_subnet_ids),
                "publicSubnetIds": dict(network.public_subnet_ids),
                "addressesNeeded": dict(addresses or {}),
            }
        super().__init__(component_type("infra", "Network"), name, props, opts)
        self._name = name
        self._ctx = ctx
        if network.existing:
            self._existing(network)
        else:
            self._create(network, azs)
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _existing(self, network: NetworkConfig) -> None:
        """An existing VPC: its subnets as given; nothing of the network is created but the S3
        gateway endpoint (only on `s3EndpointRouteTableIds`) and the flow logs."""
        assert network.vpc_id is not None
        self.vpc_id = network.vpc_id
        self.private_subnet_ids = dict(network.private_subnet_ids)
        self.public_subnet_ids = dict(network.public_subnet_ids)
        if network.s3_endpoint_route_table_ids:
            self._s3_endpoint(network.vpc_id, list(network.s3_endpoint_route_table_ids))
        if network.flow_logs:
            self._flow_logs(network.vpc_id)

    def _create(self, network: NetworkConfig, azs: Sequence[str]) -> None:
        name, cluster = self._name, self._ctx.cluster_name
        child = pulumi.ResourceOptions(parent=self)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=network.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": f"{cluster}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": f"{cluster}-igw"}, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={"Name": f"{cluster}-public"},
            opts=child,
        )

        self.private_subnet_ids = {}
        self.public_subnet_ids = {}
        nat_id: pulumi.Output[str] | None = None
        private_rts: list[pulumi.Output[str]] = []
        for plan in subnet_plan(network.cidr, azs):
            public = self._public_subnet(vpc, plan, public_rt)
            if nat_id is None or network.nat_gateways == "per-az":
                nat_id = self._nat_gateway(plan.az, public, igw)
            private_rts.append(self._private_subnet(vpc, plan, nat_id))

        self._s3_endpoint(vpc.id, private_rts)
        if network.flow_logs:
            self._flow_logs(vpc.id)
        self.vpc_id = vpc.id

    def _s3_endpoint(self, vpc_id: pulumi.Input[str], route_tables: Sequence[pulumi.Input[str]]) -> None:
        """Datasets and checkpoints move to and from S3 without paying NAT data charges."""
        aws.ec2.VpcEndpoint(
            f"{self._name}-s3",
            vpc_id=vpc_id,
            service_name=f"com.amazonaws.{self._ctx.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=list(route_tables),
            tags={"Name": f"{self._ctx.cluster_name}-s3"},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _public_subnet(self, vpc: aws.ec2.Vpc, plan: SubnetPlan, route_table: aws.ec2.RouteTable) -> aws.ec2.Subnet:
        """A small public subnet (NAT gateways, internet-facing load balancers) routed to the IGW."""
        name, child = self._name, pulumi.ResourceOptions(parent=self)
        public = aws.ec2.Subnet(
            f"{name}-public-{plan.az}",
            vpc_id=vpc.id,
            cidr_block=plan.public_cidr,
            availability_zone=plan.az,
            map_public_ip_on_launch=False,
            tags={"Name": f"{self._ctx.cluster_name}-public-{plan.az}", "kubernetes.io/role/elb": "1"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-{plan.az}", subnet_id=public.id, route_table_id=route_table.id, opts=child
        )
        self.public_subnet_ids[plan.az] = public.id
        return public

    def _nat_gateway(self, az: str, public: aws.ec2.Subnet, igw: aws.ec2.InternetGateway) -> pulumi.Output[str]:
        name, cluster = self._name, self._ctx.cluster_name
        eip = aws.ec2.Eip(
            f"{name}-nat-{az}",
            domain="vpc",
            tags={"Name": f"{cluster}-nat-{az}"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat-{az}",
            allocation_id=eip.id,
            subnet_id=public.id,
            tags={"Name": f"{cluster}-nat-{az}"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
        )
        return nat.id

    def _private_subnet(self, vpc: aws.ec2.Vpc, plan: SubnetPlan, nat_id: pulumi.Input[str]) -> pulumi.Output[str]:
        """A large private subnet for nodes and pods, routed through a NAT gateway; returns its route table."""
        name, cluster, child = self._name, self._ctx.cluster_name, pulumi.ResourceOptions(parent=self)
        private = aws.ec2.Subnet(
            f"{name}-private-{plan.az}",
            vpc_id=vpc.id,
            cidr_block=plan.private_cidr,
            availability_zone=plan.az,
            tags={"Name": private_subnet_name(cluster, plan.az), "kubernetes.io/role/internal-elb": "1"},
            opts=child,
        )
        rt = aws.ec2.RouteTable(
            f"{name}-private-{plan.az}",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat_id)],
            tags={"Name": f"{cluster}-private-{plan.az}"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-private-{plan.az}", subnet_id=private.id, route_table_id=rt.id, opts=child
        )
        self.private_subnet_ids[plan.az] = private.id
        return rt.id

    def _flow_logs(self, vpc_id: pulumi.Input[str]) -> None:
        """Rejected traffic to CloudWatch Logs: the first place to look when a security group
        blocks EFA, FSx or the control plane. The role may write to this log group only."""
        name, cluster = self._name, self._ctx.cluster_name
        child = pulumi.ResourceOptions(parent=self)
        group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs",
            name=f"/vpc/{cluster}/flow-logs",
            retention_in_days=self._ctx.log_retention_days,
            opts=audit_trail(self._ctx.protect, child),
        )
        role = aws.iam.Role(
            f"{name}-flow-logs",
            # Flow logs of this account only (VPC user guide, flow-logs-iam-role: the flow log's
            # id is not known before the role, so the ARN ends in a wildcard).
            assume_role_policy=scoped_trust_policy(
                self, "vpc-flow-logs.amazonaws.com", "ec2", self._ctx.region, ["vpc-flow-log/*"]
            ),
            description=f"VPC flow logs of {cluster}",
            opts=child,
        )
        aws.iam.RolePolicy(f"{name}-flow-logs", role=role.id, policy=group.arn.apply(log_writer_policy), opts=child)
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=vpc_id,
            traffic_type="REJECT",
            log_destination_type="cloud-watch-logs",
            log_destination=group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=600,
            opts=child,
        )
