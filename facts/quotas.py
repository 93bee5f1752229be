"""EC2 On-Demand and Spot vCPU quotas: their Service Quotas codes, and what a new account starts with.

Sources (tests/upstream/aws-ec2-on-demand-quotas-2026-11.yaml records each, with the date read):
- Codes and names: the AWS CLI user guide's service-quotas examples (L-1216C47A) and the names
  ListServiceQuotas returns (L-417A185B, L-2C3B7624).
- AWS's own default for L-1216C47A, as `get-aws-default-service-quota` reports it: 5 vCPUs (AWS
  CLI example); the EC2 user guide says new accounts may start below the documented limits.
- What new accounts are actually given (the applied quota): 32 Standard vCPUs in the reports
  of new-account users (VcpuLimitExceeded "current vCPU limit of 32"), and no P
  or Trn quota (0) until an increase is granted. AWS publishes no single figure: an account can
  start lower (5 is the documented default), so preflight asks the account, never this table.

Spot (tests/upstream/aws-ec2-spot-quotas-2026-12.yaml): the EC2 user guide's "Spot Instance
quotas" (using-spot-limits) lists one vCPU quota per family group for running and requested Spot
Instances, with AWS's defaults: Standard 5, P 0, Trn 0. A new account can launch no P or Trn Spot
instance until an increase is granted.

`NEW_ACCOUNT` is the account the first-hour test stands in for, and the docs' "fits a new
account" column.
"""

from __future__ import annotations

QUOTA_CODES: dict[str, tuple[str, str]] = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
}
"""Instance family group -> (Service Quotas code, quota name); service code `ec2`, unit vCPUs."""

SPOT_QUOTA_CODES: dict[str, tuple[str, str]] = {
    "standard": ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
    "p": ("L-7212CCBC", "All P Spot Instance Requests"),
    "trn": ("L-6B0D517C", "All Trn Spot Instance Requests"),
}
"""Instance family group -> (Service Quotas code, quota name) of Spot vCPUs (running and requested)."""

NEW_ACCOUNT: dict[str, float] = {
    "L-1216C47A": 32,
    "L-417A185B": 0,
    "L-2C3B7624": 0,
    # Spot: AWS's defaults (EC2 user guide, using-spot-limits).
    "L-34B43A08": 5,
    "L-7212CCBC": 0,
    "L-6B0D517C": 0,
}
"""The applied On-Demand vCPU quotas a new account reports (see the module docstring)."""

AWS_DEFAULT_STANDARD = 5
"""AWS's documented default of L-1216C47A (`get-aws-default-service-quota`), which some new accounts get."""
