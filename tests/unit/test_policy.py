"""Policy rules: one passing and one failing fixture per rule, the example stacks, the
offline plan's exit code and the CrossGuard adapter."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from policy import rules
from policy.rules import props
from tests.conftest import EXAMPLE_STACKS, MINIMAL, run_plan, stack_plan
from tools import plan as plan_mod


def res(type_: str, name: str, inputs: dict[str, Any], *, protect: bool = False, deps: tuple[str, ...] = ()) -> dict:
    return {
        "urn": f"urn:pulumi:test::llm-training-eks::{type_}::{name}",
        "id": f"{name}-id",
        "type": type_,
        "name": name,
        "protect": protect,
        "dependencies": [f"urn:pulumi:test::llm-training-eks::{d}" for d in deps],
        "inputs": inputs,
    }


def ids(resources: list[dict], rule_id: str, context: rules.Context | None = None) -> list[str]:
    rule = next(r for r in rules.RULES if r.id == rule_id)
    return [v.message for v in rule.run(resources, context or rules.Context())]


# --------------------------------------------------------------------------- 1 EKS

GOOD_EKS = {
    "endpointPrivateAccess": True,
    "endpointPublicAccess": False,
    "encryptionConfigKeyArn": "arn:aws:kms:us-west-2:123456789012:key/k",
    "enabledClusterLogTypes": list(props.EKS_LOG_TYPES),
}


def test_eks_passes_private_encrypted_logged():
    assert ids([res(props.T_EKS_COMPONENT, "eks", GOOD_EKS)], "eks-control-plane") == []


def test_eks_fails_public_to_world_without_kms_or_logs():
    bad = {**GOOD_EKS, "endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}
    del bad["encryptionConfigKeyArn"]
    bad["enabledClusterLogTypes"] = ["api"]
    msgs = ids([res(props.T_EKS_COMPONENT, "eks", bad)], "eks-control-plane")
    assert any("0.0.0.0/0" in m for m in msgs)
    assert any("KMS" in m for m in msgs)
    assert any("audit" in m for m in msgs)


def test_eks_aws_cluster_defaults_are_public_and_fail():
    msgs = ids([res(props.T_EKS_CLUSTER, "c", {"vpcConfig": {}})], "eks-control-plane")
    assert any("0.0.0.0/0" in m for m in msgs) and any("private" in m for m in msgs)


# --------------------------------------------------------------------------- 2 launch templates

GOOD_LT = {
    "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
    "networkInterfaces": [{"networkCardIndex": 0, "associatePublicIpAddress": "false"}],
}


def test_launch_template_passes_hardened():
    assert ids([res(props.T_LAUNCH_TEMPLATE, "lt", GOOD_LT)], "launch-template-hardening") == []


def test_launch_template_hop_limit_2_passes_only_with_exception_tag():
    lt = {**GOOD_LT, "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}}
    assert len(ids([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening")) == 1
    lt["tags"] = {props.HOP_LIMIT_EXCEPTION_TAG: "legacy agent needs IMDS from a pod"}
    assert ids([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening") == []


def test_launch_template_fails_imdsv1_unencrypted_public_ip():
    lt = {
        "metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 1},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}],
        "networkInterfaces": [{"networkCardIndex": 0, "associatePublicIpAddress": "true"}],
    }
    msgs = ids([res(props.T_LAUNCH_TEMPLATE, "lt", lt)], "launch-template-hardening")
    assert len(msgs) == 3


# --------------------------------------------------------------------------- 3 security groups


def efa_fixture(*, self_egress: bool = True, world_ingress: bool = False, description: bool = True) -> list[dict]:
    desc = {"description": "EFA"} if description else {}
    out = [
        res(props.T_SG, "efa", {"description": "EFA"}),
        res(
            props.T_LAUNCH_TEMPLATE,
            "lt",
            {**GOOD_LT, "networkInterfaces": [{"interfaceType": "efa-only", "securityGroups": ["efa-id"]}]},
        ),
        res(
            props.T_INGRESS,
            "in",
            {"securityGroupId": "efa-id", "referencedSecurityGroupId": "efa-id", "ipProtocol": "-1", **desc},
        ),
    ]
    if self_egress:
        out.append(
            res(
                props.T_EGRESS,
                "out",
                {"securityGroupId": "efa-id", "referencedSecurityGroupId": "efa-id", "ipProtocol": "-1", **desc},
            )
        )
    if world_ingress:
        out.append(
            res(props.T_INGRESS, "ssh", {"securityGroupId": "efa-id", "cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp"})
        )
    return out


def test_security_groups_pass_efa_self_referencing_both_ways():
    assert ids(efa_fixture(), "security-groups") == []


def test_security_groups_fail_without_self_egress():
    assert any("EFA" in m for m in ids(efa_fixture(self_egress=False), "security-groups"))


def test_security_groups_fail_on_world_ingress():
    assert any("whole internet" in m for m in ids(efa_fixture(world_ingress=True), "security-groups"))


def test_security_groups_inline_world_ingress_fails():
    sg = res(props.T_SG, "web", {"ingress": [{"protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"]}]})
    assert ids([sg], "security-groups")


def test_rule_descriptions_pass_and_fail():
    assert ids(efa_fixture(), "security-group-rule-descriptions") == []
    assert len(ids(efa_fixture(description=False), "security-group-rule-descriptions")) == 2


# --------------------------------------------------------------------------- 4 EFA node groups


def efa_node_group(*, subnets: tuple[str, ...] = ("s1-id",), cards: int = 8, reservation: str | None = None):
    lt_inputs: dict[str, Any] = {
        "networkInterfaces": [{"interfaceType": "efa-only", "networkCardIndex": i} for i in range(cards)]
    }
    if reservation:
        lt_inputs["capacityReservationSpecification"] = {
            "capacityReservationTarget": {"capacityReservationId": reservation}
        }
    return [
        res(props.T_SUBNET, "s1", {"availabilityZone": "us-west-2d"}),
        res(props.T_SUBNET, "s2", {"availabilityZone": "us-west-2a"}),
        res(props.T_LAUNCH_TEMPLATE, "lt", lt_inputs),
        res(
            props.T_NODE_GROUP,
            "ng",
            {"subnetIds": list(subnets), "instanceTypes": ["trn1.32xlarge"], "launchTemplate": {"id": "lt-id"}},
        ),
    ]


def test_efa_node_group_passes_one_subnet_all_cards():
    ctx = rules.Context(reservation_azs={"cr-1": "us-west-2d"})
    assert ids(efa_node_group(reservation="cr-1"), "efa-node-groups", ctx) == []


def test_efa_node_group_fails_two_subnets_and_missing_cards():
    msgs = ids(efa_node_group(subnets=("s1-id", "s2-id"), cards=4), "efa-node-groups")
    assert any("2 subnets" in m for m in msgs)
    assert any("AZs" in m for m in msgs)
    assert any("4 EFA interfaces" in m and "8 EFA cards" in m for m in msgs)


def test_efa_node_group_fails_reservation_in_other_az():
    ctx = rules.Context(reservation_azs={"cr-1": "us-west-2a"})
    msgs = ids(efa_node_group(reservation="cr-1"), "efa-node-groups", ctx)
    assert msgs == ["capacity reservation cr-1 is in us-west-2a but the node group's subnet is in us-west-2d"]


# --------------------------------------------------------------------------- 5 taints

NEURON_TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}
NEURON_TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def pod(tolerations: list[dict], **container: Any) -> dict:
    c = {
        "name": "train",
        "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1.0",
        "resources": {"requests": {"aws.amazon.com/neuron": 16, "cpu": "8"}, "limits": {"aws.amazon.com/neuron": 16}},
        **container,
    }
    return res(
        "kubernetes:core/v1:Pod",
        "p",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "training"},
            "spec": {"containers": [c], "tolerations": tolerations},
        },
    )


def test_taints_pass_tainted_nodes_and_tolerating_pod():
    ng = res(props.T_NODE_GROUP, "ng", {"instanceTypes": ["trn1.32xlarge"], "taints": [NEURON_TAINT]})
    assert ids([ng, pod([NEURON_TOLERATION])], "accelerator-taints") == []


def test_taints_fail_untainted_nodes_and_pod_without_toleration():
    ng = res(props.T_NODE_GROUP, "ng", {"instanceTypes": ["p5.48xlarge"], "taints": []})
    msgs = ids([ng, pod([{"operator": "Exists"}])], "accelerator-taints")
    assert any("lack the taint nvidia.com/gpu" in m for m in msgs)
    assert any("tolerates every taint" in m for m in msgs)
    assert any("does not tolerate aws.amazon.com/neuron" in m for m in msgs)


def test_taints_checked_in_mpijob_replica_templates():
    worker = {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}
    job = res(
        "kubernetes:kubeflow.org/v2beta1:MPIJob",
        "j",
        {"metadata": {"namespace": "t"}, "spec": {"mpiReplicaSpecs": {"Worker": worker}}},
    )
    assert ids([job], "accelerator-taints") == [
        "spec.mpiReplicaSpecs.Worker.template.spec requests nvidia.com/gpu but does not tolerate"
        " nvidia.com/gpu=true:NoSchedule"
    ]


# --------------------------------------------------------------------------- 6 ECR

GOOD_ECR = {
    "imageTagMutability": "IMMUTABLE",
    "imageScanningConfiguration": {"scanOnPush": True},
    "encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": "arn:aws:kms:us-west-2:1:key/k"}],
}


def test_ecr_passes_immutable_scanned_kms():
    assert ids([res(props.T_ECR, "repo", GOOD_ECR)], "ecr-repositories") == []


def test_ecr_fails_defaults():
    assert len(ids([res(props.T_ECR, "repo", {})], "ecr-repositories")) == 3


# --------------------------------------------------------------------------- 7 FSx and S3


def storage_fixture(*, good: bool) -> list[dict]:
    fs = {
        "deploymentType": "PERSISTENT_2" if good else "SCRATCH_2",
        "automaticBackupRetentionDays": 7,
        "skipFinalBackup": False,
        "securityGroupIds": ["fsx-id"],
    }
    if good:
        rule = {"securityGroupId": "fsx-id", "referencedSecurityGroupId": "nodes-id", "ipProtocol": "tcp"}
    else:
        rule = {"securityGroupId": "fsx-id", "cidrIpv4": "10.0.0.0/16", "ipProtocol": "tcp"}
    out = [
        res(props.T_SG, "fsx", {"description": "Lustre"}),
        res(props.T_INGRESS, "lustre-988", {**rule, "fromPort": 988, "toPort": 988}),
        res(props.T_FSX, "fs", fs),
        res("aws:s3/bucketV2:BucketV2", "data", {"bucket": "data-bucket"}),
    ]
    if good:
        out += [
            res(props.T_VERSIONING[1], "data", {"bucket": "data-id", "versioningConfiguration": {"status": "Enabled"}}),
            res(
                props.T_SSE[1],
                "data",
                {"bucket": "data-id", "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
            ),
            res(
                props.T_PUBLIC_ACCESS_BLOCK,
                "data",
                {
                    "bucket": "data-id",
                    "blockPublicAcls": True,
                    "blockPublicPolicy": True,
                    "ignorePublicAcls": True,
                    "restrictPublicBuckets": True,
                },
            ),
        ]
    return out


def test_storage_passes_persistent_backed_up_private():
    assert ids(storage_fixture(good=True), "storage-durability") == []


def test_storage_fails_scratch_cidr_sg_and_bare_bucket():
    msgs = ids(storage_fixture(good=False), "storage-durability")
    assert any("SCRATCH_2" in m for m in msgs)
    assert any("10.0.0.0/16" in m for m in msgs)
    assert any("not versioned" in m for m in msgs)
    assert any("encryption" in m for m in msgs)
    assert any("public access" in m for m in msgs)


def test_fsx_final_backup_is_skipped_by_default_and_fails():
    fs = res(props.T_FSX, "fs", {"deploymentType": "PERSISTENT_2", "automaticBackupRetentionDays": 7})
    assert any("skipFinalBackup" in m for m in ids([fs], "storage-durability"))


# --------------------------------------------------------------------------- 8 protection


def test_stateful_passes_when_protected_or_turned_off():
    assert ids([res(props.T_KMS, "k", {}, protect=True)], "stateful-protected") == []
    off = rules.Context(protect_stateful_resources=False)
    assert ids([res(props.T_FSX, "fs", {})], "stateful-protected", off) == []


def test_stateful_fails_unprotected_bucket():
    assert ids([res("aws:s3/bucket:Bucket", "b", {})], "stateful-protected")


# --------------------------------------------------------------------------- 9 pods


def test_pods_pass_pinned_limited_namespaced():
    assert ids([pod([NEURON_TOLERATION])], "pod-security") == []


def test_pods_fail_latest_privileged_unbounded_default():
    p = pod([], image="busybox:latest", securityContext={"privileged": True}, resources={})
    p["inputs"]["metadata"]["namespace"] = "default"
    msgs = ids([p], "pod-security")
    assert len(msgs) == 4


def test_device_plugin_may_be_privileged():
    ds = res(
        "kubernetes:apps/v1:DaemonSet",
        "efa",
        {
            "metadata": {"name": "aws-efa-k8s-device-plugin", "namespace": "kube-system"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "plugin",
                                "image": "public.ecr.aws/eks/aws-efa-k8s-device-plugin:v0.5.6",
                                "securityContext": {"privileged": True},
                                "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "64Mi"}},
                            }
                        ]
                    }
                }
            },
        },
    )
    assert ids([ds], "pod-security") == []


def test_helm_release_in_default_namespace_fails():
    assert ids([res(props.T_HELM_RELEASE, "r", {"chart": "x"})], "pod-security")


# --------------------------------------------------------------------------- stacks and plan


def test_every_example_stack_passes_every_mandatory_rule(example_stack):
    violations = stack_plan(example_stack)["policy"]
    assert [v for v in violations if v["enforcement"] == "mandatory"] == []


def test_rules_are_robust_to_empty_and_odd_input():
    assert rules.check([]) == []
    assert rules.check([{"type": props.T_NODE_GROUP}, {"type": props.T_LAUNCH_TEMPLATE, "inputs": "x"}]) == [
        v for v in rules.check([{"type": props.T_LAUNCH_TEMPLATE, "inputs": "x"}])
    ]


PUBLIC = {
    **MINIMAL,
    "llm-training-eks:cluster": {"publicAccessCidrs": ["0.0.0.0/0"], "allowPublicAccessFromAnywhere": True},
}


def test_public_endpoint_stack_fails_the_offline_plan(tmp_path: Path):
    plan = run_plan(PUBLIC)
    assert [v["rule"] for v in plan["policy"]] == ["eks-control-plane"]
    stack = tmp_path / "Pulumi.public.yaml"
    stack.write_text(json.dumps({"config": PUBLIC}))
    out, err = io.StringIO(), io.StringIO()
    assert plan_mod.main(["--config-file", str(stack)], stdout=out, stderr=err) == 1
    assert "Offline plan" in out.getvalue()  # the plan is still printed
    lines = err.getvalue().splitlines()
    assert lines == [
        "policy mandatory [eks-control-plane] cluster-eks-eksCluster: public API endpoint is open to 0.0.0.0/0; turn it off"
        " (cluster.publicAccessCidrs: []) or list your networks in cluster.publicAccessCidrs"
    ]


def test_plan_json_has_policy_key():
    plan = json.loads(plan_mod.to_json(stack_plan(EXAMPLE_STACKS[0])))
    assert plan["policy"] == []


# --------------------------------------------------------------------------- CrossGuard adapter


def test_crossguard_adapter_reports_the_same_violations():
    pytest.importorskip("pulumi_policy")
    from pulumi_policy import PolicyResource, PolicyResourceOptions, StackValidationArgs

    import policy.__main__ as pack

    opts = PolicyResourceOptions(False, [], None, [], None, [], None)  # type: ignore[arg-type]
    bad = {**GOOD_EKS, "endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}
    r = PolicyResource(props.T_EKS_COMPONENT, bad, "urn:x::eks", "eks", opts, None, None, [], {})
    reported: list[tuple[str, str | None]] = []
    policy = pack.policy_for(next(x for x in rules.RULES if x.id == "eks-control-plane"))
    policy.validate(StackValidationArgs([r]), lambda msg, urn=None: reported.append((msg, urn)))
    assert len(reported) == 1 and reported[0][1] == "urn:x::eks" and "0.0.0.0/0" in reported[0][0]
