"""Preflight on day 2, a Capacity Block group's launch template: an update that changes it while the
group runs nodes rolls them under the block's training; the same check against both sources (boto3
for the command line, the stack's AWS provider under `pulumi up`)."""

from __future__ import annotations

import base64
from typing import Any

import pulumi_aws as aws
import pytest

import config
from config import amis
from infra.nodegroups import nodeadm_user_data
from tests.conftest import API_PATH
from tests.unit.preflight_sources import (
    CR_ID,
    TOKENS,
    InvokeMocks,
    boto_account,
    provider_account,
    under_provider,
    wire,
)
from tests.unit.test_preflight_day2 import BLOCK, SOURCES
from tools import preflight

LT_ID = "lt-0123456789abcdef0"


def _template_answers(source: str, name: str, desired: int, data: dict[str, Any]) -> Any:
    """The deployed block group (version 3 of its launch template) and that version's data, as each
    source gets them: boto3 DescribeNodegroup + DescribeLaunchTemplateVersions (botocore's model
    checks both through the Stubber), or the provider's getNodeGroup + getLaunchTemplate."""
    if source == "boto3":
        group = {"nodegroupName": "trn1", "version": "1.35", "scalingConfig": {"desiredSize": desired},
                 "launchTemplate": {"name": "trn1-lt", "version": "3", "id": LT_ID}}  # fmt: skip
        ebs = {"VolumeSize": data["root"], "VolumeType": "gp3"}
        version = {"LaunchTemplateId": LT_ID, "VersionNumber": 3, "LaunchTemplateData": {
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": ebs}], "UserData": data["user_data"],
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": data["cr"]}},
            "InstanceMarketOptions": {"MarketType": "capacity-block"}}}  # fmt: skip
        return boto_account(
            eks=[("list_clusters", {"clusters": [name]}), ("list_nodegroups", {"nodegroups": ["trn1"]}),
                 ("describe_nodegroup", {"nodegroup": group})],
            ec2=[("describe_launch_template_versions", {"LaunchTemplateVersions": [version]})],
        )[0]  # fmt: skip
    out = aws.ec2.outputs
    target = wire(out.GetLaunchTemplateCapacityReservationSpecificationCapacityReservationTargetResult,
                  capacity_reservation_id=data["cr"])  # fmt: skip
    return {
        TOKENS["clusters"]: wire(aws.eks.GetClustersResult, id="us-west-2", names=[name]),
        TOKENS["node_groups"]: wire(aws.eks.GetNodeGroupsResult, cluster_name=name, id=name, names=["trn1"]),
        TOKENS["node_group"]: wire(
            aws.eks.GetNodeGroupResult,
            cluster_name=name,
            node_group_name="trn1",
            version="1.35",
            scaling_configs=[wire(aws.eks.outputs.GetNodeGroupScalingConfigResult, desired_size=desired)],
            launch_templates=[
                wire(aws.eks.outputs.GetNodeGroupLaunchTemplateResult, id=LT_ID, name="trn1-lt", version="3")
            ],
        ),
        TOKENS["launch_template"]: wire(
            aws.ec2.GetLaunchTemplateResult,
            id=LT_ID,
            latest_version=3,
            default_version=3,
            user_data=data["user_data"],
            block_device_mappings=[
                wire(
                    out.GetLaunchTemplateBlockDeviceMappingResult,
                    device_name="/dev/xvda",
                    ebs=[wire(out.GetLaunchTemplateBlockDeviceMappingEbResult, volume_size=data["root"])],
                )
            ],
            capacity_reservation_specifications=[
                wire(out.GetLaunchTemplateCapacityReservationSpecificationResult, capacity_reservation_targets=[target])
            ],
            instance_market_options=[
                wire(out.GetLaunchTemplateInstanceMarketOptionResult, market_type="capacity-block")
            ],
        ),
    }


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    ("edit", "desired", "ok"),
    [("root", 4, False), ("cr", 4, False), ("user_data", 4, False), ("root", 0, True), (None, 4, True)],
)
def test_a_template_edit_of_a_block_group_with_nodes_is_refused(
    source: str, edit: str | None, desired: int, ok: bool
) -> None:
    """EKS user guide, capacity-blocks-mng (awsdocs/amazon-eks-user-guide @0a7189e9): a Capacity Block
    group is updated only at desired size 0. Any edit of its launch template (a bigger root volume, a
    new reservation id, other user data) is a new version EKS rolls every node onto
    (terraform-provider-aws node_group.go resourceNodeGroupUpdate). Preflight compares what the update
    sends with the version the deployed group runs (DescribeNodegroup launchTemplate, then
    DescribeLaunchTemplateVersions / the provider's getLaunchTemplate, which reads the latest version)
    and refuses a change while the group has nodes, naming the way through."""
    cfg = config.parse(
        {
            "region": "us-west-2",
            "cluster": {**API_PATH, "kubernetesVersion": "1.35"},
            "nodeGroups": [{"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 4,
                            "capacity": BLOCK, "rootVolumeSizeGiB": 300}],
        }
    )  # fmt: skip
    ng = cfg.node_groups[0]
    pinned = amis.pinned_release(cfg, ng)
    data = {"root": 300, "cr": CR_ID, "user_data": nodeadm_user_data(ng.instance)}
    data.update({"root": 200} if edit == "root" else {"cr": "cr-0fedcba9876543210"} if edit == "cr" else {})
    if edit == "user_data":
        data["user_data"] = base64.b64encode(b"older").decode()
    answers = _template_answers(source, cfg.cluster.name, desired, data)
    if source == "boto3":
        (finding,) = [f for f in preflight.check_capacity_block_upgrades(answers, cfg)]
    else:
        ((finding,),) = under_provider(
            InvokeMocks(answers), lambda: preflight.check_capacity_block_upgrades(provider_account(cfg), cfg)
        )
    assert pinned is not None  # no release pinned: the deployed group reports none, so only the template counts
    assert finding.ok is ok, finding.line()
    if not ok:
        assert "changes its launch template" in finding.message
        assert {"root": "rootVolumeSizeGiB 200 -> 300", "cr": f"capacity.reservationId cr-0fedcba9876543210 -> {CR_ID}",
                "user_data": "user data"}[str(edit)] in finding.message  # fmt: skip
        assert "make the edit after the block ends" in finding.message and "desiredSize: 0" in finding.message
