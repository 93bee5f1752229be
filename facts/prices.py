"""Dated price table: the fallback when the AWS Price List API cannot be reached.

Prices are USD, Linux, shared tenancy, on-demand, per hour (FSx: per GB-month). They are
the same in us-east-1, us-east-2 and us-west-2 for every entry here. `tools.cost --live` asks the
Price List API first when AWS credentials allow and uses this table otherwise; the offline
plan always uses the table, so its output does not change from run to run.

Sources (as of PRICES_AS_OF):
- EC2 on-demand: the Amazon EC2 On-Demand pricing page. trn1.32xlarge $21.50 cross-checked
  (usage.ai "Trainium vs GPU instances", updated 2026-06-25). P5 and P4 prices reflect the
  AWS price reduction for NVIDIA GPU instances of June 2025 (up to 45% on P5; usage.ai
  "LLM cost optimization on AWS", 2026-06-30, describes it); some third-party pages still
  quote the pre-cut $98.32 for p5.48xlarge. Entries in UNVERIFIED were not cross-checked
  against a second source: run `python -m tools.cost --live` with credentials to compare.
- p6-b200.48xlarge $113.9328 (us-east-1, us-east-2, us-west-2) and p6-b300.48xlarge $142.416
  (us-west-2; no other of the three regions is listed): instances.vantage.sh's On-Demand data as
  tsaol/aws-gpu data/p6_family_all.js carries it (updated 2025-12-21). For scale, AWS's Capacity
  Block page lists $74.88 (p6-b200) and $93.60 (p6-b300) per instance-hour (koyakimu/
  ec2-capacity-blocks-for-ml-pricing-json data/pricing.json, scraped 2026-01-31).
- p4d.24xlarge $21.9576 (read 2026-12-05): public price tables that quote the EC2 On-Demand page
  after the June 2025 cut give p4d.24xlarge 21.957642 beside p4de.24xlarge 27.44705 and
  p5.48xlarge 55.04, this table's own p4de and p5 (a FinOps rate table on GitHub, and a us-east-2
  list-rate table "verified against Cost Explorer actuals"); the pre-cut figure, still quoted by
  usage.ai (2026-06-24), was $32.77. The Capacity Block page listed p4d at $14.75 per
  instance-hour (us-east-2, us-west-2) before its 2025-01-01 update.
- trn2u.48xlarge: no price is published; Trn2 UltraServers are sold as Capacity Blocks, and
  neither AWS's On-Demand nor its Capacity Block page (as scraped above) lists it. PROXIES prices
  it as trn2.48xlarge, the same instance outside an UltraServer, and the cost line says so.
- Capacity Blocks for ML, per instance-hour (CAPACITY_BLOCK_HOURLY): AWS's Capacity Block pricing
  page (aws.amazon.com/ec2/capacityblocks/pricing/) as koyakimu/ec2-capacity-blocks-for-ml-pricing-json
  data/pricing.json at 9dfcf8b1 scraped it on CAPACITY_BLOCK_PRICES_AS_OF: the same rate in us-east-1,
  us-east-2 and us-west-2 where a type is listed there (p6-b300: us-west-2 only; trn2: us-east-2
  only). Block prices move with demand (the page says they are dynamic): the plan's figure is the
  listed rate, the purchase quote is the price. A block is paid up front for its whole length,
  whatever the group's desiredSize; trn2u has no listed rate and takes trn2's (PROXIES).
- EKS control plane: $0.10 per cluster-hour in standard support, $0.60 in extended
  support (Amazon EKS pricing page; cloudburn.io "Amazon EKS pricing", 2026-03).
- NAT gateway: $0.045 per gateway-hour, data processing not included (Amazon VPC pricing).
- Network Load Balancer: $0.0225 per load-balancer-hour in US East, capacity units (NLCU-hours,
  $0.006 each) not included (Elastic Load Balancing pricing page; cross-checked: awsnegotiations.com
  "Elastic Load Balancer Cost", May 2026, and the Vantage handbook's ELB page). A serving run's
  internal NLB is made by the AWS Load Balancer Controller, not by this stack, and billed as the
  run's while it stands. The US East rate is used for us-west-2 too (the same there, unverified);
  `tools.cost --live` does not ask the Price List API for it: it is always this table's.
- FSx for Lustre PERSISTENT_2 SSD, per GB-month by throughput tier (MB/s/TiB): Amazon FSx
  for Lustre pricing page; the 125 tier's $0.145 cross-checked (c3x.dev, aws_fsx_lustre_file_system).
"""

from __future__ import annotations

PRICES_AS_OF = "2026-07-01"
REGIONS = ("us-east-1", "us-east-2", "us-west-2")

EC2_ON_DEMAND_HOURLY: dict[str, float] = {
    "trn1.32xlarge": 21.50,
    "trn1n.32xlarge": 24.78,
    "trn2.48xlarge": 44.70,
    "p4d.24xlarge": 21.9576,
    "p4de.24xlarge": 27.45,
    "p5.48xlarge": 55.04,
    "p5e.48xlarge": 63.30,
    "p5en.48xlarge": 63.30,
    "p6-b200.48xlarge": 113.9328,
    "p6-b300.48xlarge": 142.416,
    "trn2u.48xlarge": 44.70,
    "m6i.xlarge": 0.192,
    "m6i.2xlarge": 0.384,
    "m6i.4xlarge": 0.768,
    "m7i.xlarge": 0.2016,
    "m7i.2xlarge": 0.4032,
    "m7i.4xlarge": 0.8064,
}
UNVERIFIED = (
    "trn2.48xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    "trn2u.48xlarge",
)
CAPACITY_BLOCK_PRICES_AS_OF = "2026-02-01"
CAPACITY_BLOCK_HOURLY: dict[str, float] = {
    "p4d.24xlarge": 11.8,
    "p5.48xlarge": 31.464,
    "p5e.48xlarge": 39.799,
    "p5en.48xlarge": 41.612,
    "p6-b200.48xlarge": 74.88,
    "p6-b300.48xlarge": 93.6,
    "trn1.32xlarge": 9.532,
    "trn2.48xlarge": 35.7608,
}
"""USD per instance-hour of a Capacity Block (see the module docstring)."""
PROXIES: dict[str, str] = {"trn2u.48xlarge": "trn2.48xlarge"}
"""Types with no published price of their own -> the type whose price stands in for theirs."""

EKS_CONTROL_PLANE_HOURLY = 0.10
EKS_EXTENDED_SUPPORT_HOURLY = 0.60
NAT_GATEWAY_HOURLY = 0.045
NETWORK_LOAD_BALANCER_HOURLY = 0.0225
FSX_PERSISTENT_2_GB_MONTH: dict[int, float] = {125: 0.145, 250: 0.210, 500: 0.340, 1000: 0.600}

HOURS_PER_MONTH = 730
