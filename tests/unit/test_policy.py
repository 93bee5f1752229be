"""Resource rules over AWS resources: per rule one passing, one failing and one unknown-value
fixture (an unknown never makes a violation: the rule runs again on known values at
`pulumi up`). Stack rules: test_policy_stack.py; Kubernetes: test_policy_kubernetes.py;
inside pulumi-policy's machinery: test_policy_crossguard.py."""

from __future__ import annotations

from typing import Any

import pytest

from facts.names import HOP_LIMIT_EXCEPTION_TAG, NO_SCAN_EXCEPTION_TAG, PUBLIC_ENDPOINT_EXCEPTION_TAG
from facts.names import SCRATCH_EXCEPTION_TAG as SCRATCH_TAG
from policy import rules
from policy.rules import props
from tests.unit.policy_fixtures import GOOD_LT, U, messages, res

# --------------------------------------------------------------------------- EKS control plane

GOOD_EKS = {
    "endpointPrivateAccess": True,
    "endpointPublicAccess": False,
    "encryptionConfigKeyArn": "arn:aws:kms:us-west-2:123456789012:key/k",
    "enabledClusterLogTypes": list(props.EKS_LOG_TYPES),
}
# The child pulumi-eks creates, with the inputs it gives it (tests/upstream/pulumi-eks-control-plane-4.3.0.yaml).
GOOD_AWS_EKS = {
    "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False, "subnetIds": ["s-1"]},
    "encryptionConfig": {"provider": {"keyArn": "arn:aws:kms:us-west-2:1:key/k"}, "resources": ["secrets"]},
    "enabledClusterLogTypes": list(props.EKS_LOG_TYPES),
    "tags": {"Name": "cluster-eks-eksCluster"},
}


def public_aws_eks(cidrs: list[str], tags: dict[str, str] | None = None) -> dict[str, Any]:
    vpc = {**GOOD_AWS_EKS["vpcConfig"], "endpointPublicAccess": True, "publicAccessCidrs": cidrs}
    return {**GOOD_AWS_EKS, "vpcConfig": vpc, "tags": tags or {}}


def test_eks_passes_private_encrypted_logged():
    assert messages([res(props.T_EKS_COMPONENT, "eks", GOOD_EKS)], "eks-control-plane") == []
    assert messages([res(props.T_EKS_CLUSTER, "c", GOOD_AWS_EKS)], "eks-control-plane") == []


def test_eks_fails_public_to_world_without_kms_or_logs():
    bad = {**GOOD_EKS, "endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}
    del bad["encryptionConfigKeyArn"]
    bad["enabledClusterLogTypes"] = ["api"]
    msgs = messages([res(props.T_EKS_COMPONENT, "eks", bad)], "eks-control-plane")
    assert any("whole internet (0.0.0.0/0)" in m for m in msgs)
    assert any("KMS" in m for m in msgs)
    assert any("audit" in m for m in msgs)


def test_eks_aws_cluster_defaults_are_public_and_fail():
    msgs = messages([res(props.T_EKS_CLUSTER, "c", {"vpcConfig": {}})], "eks-control-plane")
    assert any("0.0.0.0/0, the default" in m for m in msgs) and any("private" in m for m in msgs)
    assert any("KMS" in m for m in msgs) and any("audit" in m for m in msgs)


@pytest.mark.parametrize(
    "cidrs",
    [["0.0.0.0/1", "128.0.0.0/1"], ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/1"], ["::/0"], ["2000::/4", "3000::/4"]],
)
def test_eks_public_endpoint_split_into_several_cidrs_is_the_whole_internet(cidrs):
    msgs = messages([res(props.T_EKS_CLUSTER, "c", public_aws_eks(cidrs))], "eks-control-plane")
    assert len(msgs) == 1 and "whole internet" in msgs[0]


def test_eks_public_endpoint_for_listed_networks_passes():
    cidrs = ["203.0.113.0/24", "0.0.0.0/1"]  # half the internet is not all of it
    assert messages([res(props.T_EKS_CLUSTER, "c", public_aws_eks(cidrs))], "eks-control-plane") == []


def test_eks_public_to_world_passes_with_the_exception_tag_and_a_reason():
    tags = {PUBLIC_ENDPOINT_EXCEPTION_TAG: "stack config cluster.allowPublicAccessFromAnywhere"}
    assert messages([res(props.T_EKS_CLUSTER, "c", public_aws_eks(["0.0.0.0/0"], tags))], "eks-control-plane") == []
    empty = {PUBLIC_ENDPOINT_EXCEPTION_TAG: " "}
    assert messages([res(props.T_EKS_CLUSTER, "c", public_aws_eks(["0.0.0.0/0"], empty))], "eks-control-plane")
    component = {**GOOD_EKS, "endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"], "clusterTags": tags}
    assert messages([res(props.T_EKS_COMPONENT, "eks", component)], "eks-control-plane") == []


def test_eks_unknowns_make_no_violation():
    # pulumi-eks builds encryptionConfig in an apply over the key ARN: unknown as a whole on a first preview.
    first_preview = {**GOOD_AWS_EKS, "encryptionConfig": U, "vpcConfig": {**GOOD_AWS_EKS["vpcConfig"], "subnetIds": U}}
    assert messages([res(props.T_EKS_CLUSTER, "c", first_preview)], "eks-control-plane") == []
    unknown_vpc = {**GOOD_AWS_EKS, "vpcConfig": U}
    assert messages([res(props.T_EKS_CLUSTER, "c", unknown_vpc)], "eks-control-plane") == []
    public_unknown_cidrs = public_aws_eks([U])
    assert messages([res(props.T_EKS_CLUSTER, "c", public_unknown_cidrs)], "eks-control-plane") == []


def test_eks_component_showing_outputs_or_nothing_is_left_to_its_child():
    # CrossGuard's stack validation sees the component's registered outputs, not its inputs.
    outputs = {"eksCluster": "llm-training", "kubeconfig": U, "core": {}}
    assert messages([res(props.T_EKS_COMPONENT, "eks", outputs)], "eks-control-plane") == []
    assert messages([res(props.T_EKS_COMPONENT, "eks", {})], "eks-control-plane") == []


# --------------------------------------------------------------------------- launch templates


def test_launch_template_passes_hardened():
    assert messages([res(props.T_LAUNCH_TEMPLATE, "lt", GOOD_LT)], "launch-template-hardening") == []
    as_engine_sends_numbers = {**GOOD_LT, "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1.0}}
    assert messages([res(props.T_LAUNCH_TEMPLATE, "lt", as_engine_sends_numbers)], "launch-template-hardening") == []


def test_launch_template_hop_limit_2_passes_only_with_exception_tag():
    lt = {**GOOD_LT, "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}}
    assert len(messages([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening")) == 1
    lt["tags"] = {HOP_LIMIT_EXCEPTION_TAG: "legacy agent needs IMDS from a pod"}
    assert messages([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening") == []


def test_launch_template_fails_imdsv1_unencrypted_public_ip_unset_hop():
    lt = {
        "metadataOptions": {"httpTokens": "optional"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}],
        "networkInterfaces": [{"networkCardIndex": 0, "associatePublicIpAddress": "true"}],
    }
    msgs = messages([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening")
    assert len(msgs) == 4 and any("hop limit is unset" in m for m in msgs)


def test_launch_template_unknowns_make_no_violation():
    lt = {
        **GOOD_LT,
        "metadataOptions": U,
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": U}}],
    }
    assert messages([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening") == []


# --------------------------------------------------------------------------- security-group ingress


@pytest.mark.parametrize(
    ("type_", "inputs"),
    [
        (props.T_INGRESS, {"securityGroupId": "sg", "cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp"}),
        (props.T_INGRESS, {"securityGroupId": "sg", "cidrIpv6": "::/0", "ipProtocol": "-1"}),
        (props.T_SG_RULE, {"type": "ingress", "cidrBlocks": ["0.0.0.0/1", "128.0.0.0/1"], "protocol": "tcp"}),
        (props.T_SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]}),
        (
            props.T_SG,  # two inline rules, one port, half the internet each
            {
                "ingress": [
                    {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/1"]},
                    {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["128.0.0.0/1"]},
                ]
            },
        ),
    ],
)
def test_ingress_from_the_whole_internet_fails(type_, inputs):
    assert any("whole internet" in m for m in messages([res(type_, "r", inputs)], "security-group-ingress"))


@pytest.mark.parametrize(
    ("type_", "inputs"),
    [
        (props.T_INGRESS, {"securityGroupId": "sg", "cidrIpv4": "10.0.0.0/16", "ipProtocol": "tcp"}),
        (props.T_INGRESS, {"securityGroupId": "sg", "cidrIpv4": U, "ipProtocol": "tcp"}),
        (props.T_SG_RULE, {"type": "egress", "cidrBlocks": ["0.0.0.0/0"], "protocol": "-1"}),
        (props.T_SG_RULE, {"type": "ingress", "cidrBlocks": U, "protocol": "tcp"}),
        (
            props.T_SG,  # half the internet on port 22, the other half on 443: no one port is open to all
            {
                "ingress": [
                    {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/1"]},
                    {"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["128.0.0.0/1"]},
                ],
                "egress": [{"protocol": "-1", "cidrBlocks": ["0.0.0.0/0"]}],
            },
        ),
    ],
)
def test_ingress_from_networks_or_unknowns_passes(type_, inputs):
    assert messages([res(type_, "r", inputs)], "security-group-ingress") == []


def test_rule_descriptions_pass_and_fail():
    described = res(props.T_EGRESS, "out", {"securityGroupId": "sg", "ipProtocol": "-1", "description": "EFA"})
    assert messages([described], "security-group-rule-descriptions") == []
    bare = res(props.T_SG, "web", {"ingress": [{"protocol": "tcp"}], "egress": [{"protocol": "-1", "description": U}]})
    assert messages([bare], "security-group-rule-descriptions") == ["ingress rule has no description"]


# --------------------------------------------------------------------------- ECR

GOOD_ECR = {
    "imageTagMutability": "IMMUTABLE",
    "imageScanningConfiguration": {"scanOnPush": True},
    "encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": "arn:aws:kms:us-west-2:1:key/k"}],
}


def test_ecr_passes_immutable_scanned_kms():
    assert messages([res(props.T_ECR, "repo", GOOD_ECR)], "ecr-repositories") == []


def test_ecr_fails_defaults():
    assert len(messages([res(props.T_ECR, "repo", {})], "ecr-repositories")) == 3


def test_ecr_without_scan_on_push_passes_only_with_the_exception_tag():
    no_scan = {**GOOD_ECR, "imageScanningConfiguration": {"scanOnPush": False}}
    assert len(messages([res(props.T_ECR, "repo", no_scan)], "ecr-repositories")) == 1
    no_scan["tags"] = {NO_SCAN_EXCEPTION_TAG: "scanned by the CI pipeline"}
    assert messages([res(props.T_ECR, "repo", no_scan)], "ecr-repositories") == []


def test_ecr_unknowns_make_no_violation():
    kms_unknown = {**GOOD_ECR, "encryptionConfigurations": U, "imageScanningConfiguration": {"scanOnPush": U}}
    assert messages([res(props.T_ECR, "repo", kms_unknown)], "ecr-repositories") == []


# --------------------------------------------------------------------------- FSx

GOOD_FSX = {
    "deploymentType": "PERSISTENT_2",
    "automaticBackupRetentionDays": 7,
    "skipFinalBackup": False,
    "securityGroupIds": ["fsx-id"],
}


def test_fsx_passes_persistent_backed_up():
    assert messages([res(props.T_FSX, "fs", GOOD_FSX)], "fsx-durability") == []


def test_fsx_fails_scratch_no_final_backup_no_group():
    assert any(
        "SCRATCH_2" in m
        for m in messages([res(props.T_FSX, "fs", {**GOOD_FSX, "deploymentType": "SCRATCH_2"})], "fsx-durability")
    )
    fs = {"deploymentType": "PERSISTENT_2", "automaticBackupRetentionDays": 0}
    msgs = messages([res(props.T_FSX, "fs", fs)], "fsx-durability")
    assert len(msgs) == 3 and any("skipFinalBackup" in m for m in msgs)


def test_fsx_scratch_passes_only_with_the_exception_tag():
    scratch = {"deploymentType": "SCRATCH_2", "securityGroupIds": ["fsx-id"], "tags": {SCRATCH_TAG: "throwaway"}}
    assert messages([res(props.T_FSX, "fs", scratch)], "fsx-durability") == []


def test_fsx_unknowns_make_no_violation():
    fs = {**GOOD_FSX, "securityGroupIds": [U], "automaticBackupRetentionDays": U}
    assert messages([res(props.T_FSX, "fs", fs)], "fsx-durability") == []
    assert messages([res(props.T_FSX, "fs", {**GOOD_FSX, "deploymentType": U})], "fsx-durability") == []


# --------------------------------------------------------------------------- protection


def test_stateful_passes_when_protected_or_turned_off():
    assert messages([res(props.T_KMS, "k", {}, protect=True)], "stateful-protected") == []
    off = rules.Context(protect_stateful_resources=False)
    assert messages([res(props.T_FSX, "fs", {})], "stateful-protected", off) == []


def test_stateful_fails_unprotected_bucket_and_eks_log_group():
    assert messages([res("aws:s3/bucket:Bucket", "b", {})], "stateful-protected")
    eks_logs = res(props.T_LOG_GROUP, "logs", {"name": "/aws/eks/llm-training/cluster"})
    assert messages([eks_logs], "stateful-protected")
    other_logs = res(props.T_LOG_GROUP, "logs", {"name": "/aws/fsx/lustre/llm-training"})
    assert messages([other_logs], "stateful-protected") == []


def test_stateful_log_group_with_unknown_name_makes_no_violation():
    assert messages([res(props.T_LOG_GROUP, "logs", {"name": U})], "stateful-protected") == []
