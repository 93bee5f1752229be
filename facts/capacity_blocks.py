"""What EC2 and EKS do around a Capacity Block's start and end, each with its source.

EKS user guide, capacity-blocks-mng (awsdocs/amazon-eks-user-guide latest/ug/ml/capacity-blocks-mng.adoc
at 0a7189e9; tests/upstream/aws-eks-capacity-blocks-2026-11.yaml):
- "Amazon EC2 starts shutting down the instances 30 minutes before reservation end time. As a result,
  Amazon EKS will setup a scheduled scale down on the node group 40 minutes prior to their reservation
  end", named "Amazon EKS Node Group Capacity Scaledown Before Reservation End" ("We recommend not
  editing or deleting this action").
- A group at desired size 0 is scaled up when the block becomes active by "a scheduled scaling policy
  for the ASG that aligns to the Capacity Block reservation start time".
"""

from __future__ import annotations

EC2_SHUTDOWN_MINUTES_BEFORE_END = 30
"""EC2 starts shutting a block's instances down this long before its end."""
EKS_SCALE_DOWN_MINUTES_BEFORE_END = 40
"""EKS's own scheduled action scales a Capacity Block node group to 0 this long before the end."""
EKS_SCALE_DOWN_ACTION = "Amazon EKS Node Group Capacity Scaledown Before Reservation End"
"""The name of EKS's own scale-down action on the group's Auto Scaling group."""
