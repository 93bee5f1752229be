"""The VPC: private subnets for nodes and pods, public subnets for NAT and load balancers."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from config.network import NetworkConfig
from facts.names import component_type
from infra.context import StackContext
from infra.iam import account_and_partition, log_writer_policy, service_trust_policy
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
    private = list(vpc.subnets(new_prefix=vpc.prefixlen + 3))
    public = list(vpc.subnets(new_prefix=vpc.prefixlen + 8))
    half = len(public) // 2
    return [
        SubnetPlan(az=az, private_cidr=str(private[i]), public_cidr=str(public[half + i])) for i, az in enumerate(azs)
    ]


class Network(pulumi.ComponentResource):
    """VPC over two or more AZs with NAT egress and an S3 gateway endpoint."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: dict[str, pulumi.Output[str]]
    """AZ name -> private subnet id."""
    public_subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        network: NetworkConfig,
        ctx: StackContext,
        azs: Sequence[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(component_type("infra", "Network"), name, None, opts)
        self._name = name
        self._ctx = ctx
        child = pulumi.ResourceOptions(parent=self)
        cluster = ctx.cluster_name

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

        # Datasets and checkpoints move to and from S3 without paying NAT data charges.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{ctx.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=private_rts,
            tags={"Name": f"{cluster}-s3"},
            opts=child,
        )

        if network.flow_logs:
            self._flow_logs(vpc)

        self.vpc_id = vpc.id
        self.vpc_cidr = network.cidr
        self.register_outputs({"vpcId": vpc.id, "privateSubnetIds": self.private_subnet_ids})

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
            tags={"Name": f"{cluster}-private-{plan.az}", "kubernetes.io/role/internal-elb": "1"},
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

    def _flow_logs(self, vpc: aws.ec2.Vpc) -> None:
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
        region = self._ctx.region
        role = aws.iam.Role(
            f"{name}-flow-logs",
            # Flow logs of this account only (VPC user guide, flow-logs-iam-role: the flow log's
            # id is not known before the role, so the ARN ends in a wildcard).
            assume_role_policy=account_and_partition(self).apply(
                lambda a: service_trust_policy(
                    "vpc-flow-logs.amazonaws.com",
                    source_account=a[0],
                    source_arns=[f"arn:{a[1]}:ec2:{region}:{a[0]}:vpc-flow-log/*"],
                )
            ),
            description=f"VPC flow logs of {cluster}",
            opts=child,
        )
        aws.iam.RolePolicy(f"{name}-flow-logs", role=role.id, policy=group.arn.apply(log_writer_policy), opts=child)
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=vpc.id,
            traffic_type="REJECT",
            log_destination_type="cloud-watch-logs",
            log_destination=group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=600,
            opts=child,
        )
