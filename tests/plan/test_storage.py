"""Shared storage: FSx for Lustre, its S3 bucket, security groups, the Kubernetes volume."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from infra.protection import stateful
from infra.storage import LUSTRE_PORTS, data_repository_events
from tests.conftest import BASE, MINIMAL, by_urn, plan_exit, resources, run_plan, stack_plan
from tools import plan as plan_mod

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def only(plan: dict[str, Any], type_: str) -> dict[str, Any]:
    # The image builder's source bucket (infra/images.py, tests/plan/test_images.py) is not storage.
    found = [r for r in resources(plan, type_) if "infra:ImageBuilds$" not in r["urn"]]
    assert len(found) == 1, [r["name"] for r in found]
    return found[0]


def test_example_stacks_have_durable_fsx(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    fs = only(plan, FSX)
    i = fs["inputs"]
    assert i["deploymentType"] == "PERSISTENT_2"
    assert i["automaticBackupRetentionDays"] > 0
    assert i["skipFinalBackup"] is False
    assert i["copyTagsToBackups"] is True
    assert i["dataCompressionType"] == "LZ4"
    assert i["perUnitStorageThroughput"] in (125, 250, 500, 1000)
    assert i["kmsKeyId"].startswith("arn:aws:kms:")
    assert fs["protect"] is True


def test_example_stacks_link_fsx_to_s3_without_deletes(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    dra = only(plan, DRA)
    bucket = only(plan, "aws:s3/bucket:Bucket")
    fs = only(plan, FSX)
    assert dra["inputs"]["fileSystemId"] == fs["id"]
    assert dra["inputs"]["dataRepositoryPath"] == f"s3://{bucket['id']}"
    s3 = dra["inputs"]["s3"]
    assert s3["autoImportPolicy"]["events"] == ["NEW", "CHANGED"]
    assert s3["autoExportPolicy"]["events"] == ["NEW", "CHANGED"]


def test_stateful_resources_are_protected(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    for type_ in (FSX, "aws:s3/bucket:Bucket", "aws:ecr/repository:Repository", "aws:kms/key:Key"):
        found = resources(plan, type_)
        assert found, type_
        assert all(r["protect"] for r in found), [r["name"] for r in found if not r["protect"]]


def test_bucket_is_versioned_encrypted_private_and_kept() -> None:
    plan = stack_plan("dev")
    bucket = only(plan, "aws:s3/bucket:Bucket")
    assert bucket["inputs"]["forceDestroy"] is False
    versioning = only(plan, "aws:s3/bucketVersioning:BucketVersioning")
    assert versioning["inputs"]["versioningConfiguration"]["status"] == "Enabled"
    sse = only(plan, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    rule = sse["inputs"]["rules"][0]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    block = only(plan, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")["inputs"]
    assert all(block[k] for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))


BUCKET_SETTINGS = {
    "aws:s3/bucketVersioning:BucketVersioning": "",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": "",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": "",
    "aws:s3/bucketPolicy:BucketPolicy": "-tls",
}


def test_every_bucket_gets_every_setting(example_stack: str) -> None:
    """The data bucket and the image sources bucket alike (infra.buckets): versioned, encrypted,
    public access blocked, ACLs off, TLS only. The sources bucket once lacked the ownership rule."""
    plan = stack_plan(example_stack)
    names = {(r["type"], r["name"]) for r in plan["resources"]}
    for bucket in resources(plan, "aws:s3/bucket:Bucket"):
        missing = [t for t, suffix in BUCKET_SETTINGS.items() if (t, bucket["name"] + suffix) not in names]
        assert not missing, f"{bucket['name']}: {missing}"
    for r in resources(plan, "aws:s3/bucketOwnershipControls:BucketOwnershipControls"):
        assert r["inputs"]["rule"]["objectOwnership"] == "BucketOwnerEnforced"


def _closure(plan: dict[str, Any], urn: str) -> set[str]:
    index = by_urn(plan)
    seen: set[str] = set()
    todo = [urn]
    while todo:
        for dep in index[todo.pop()]["dependencies"]:
            if dep not in seen and dep in index:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_fsx_does_not_wait_for_the_cluster_or_node_groups(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    fs = only(plan, FSX)
    reached = _closure(plan, fs["urn"])
    index = by_urn(plan)
    bad = {index[u]["type"] for u in reached} & {
        "eks:index:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "llm-training-eks:infra:Cluster",
        "llm-training-eks:infra:AcceleratedNodeGroup",
        "pulumi:providers:kubernetes",
    }
    assert not bad
    assert not any("cluster" in index[u]["name"] or u.split("::")[-1].startswith("ng-") for u in reached)


def test_lustre_ports_from_the_cluster_security_group_every_node_carries(example_stack: str) -> None:
    """The file system admits the cluster security group (and itself), which every node carries: the
    system group's nodes as EKS gives it, each accelerated group's on every interface of its launch
    template. So its rules do not grow with the node groups: 29 groups once put 62 inbound rules on it,
    over EC2's default 60 per group (RulesPerSecurityGroupLimitExceeded; VPC user guide, amazon-vpc-limits)."""
    plan = stack_plan(example_stack)
    fsx_sg = only(plan, FSX)["inputs"]["securityGroupIds"][0]
    cluster_sg = next(
        r["inputs"]["vpcSecurityGroupIds"][0]
        for r in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate")
        if r["name"] == "cluster-system"
    )
    for lt in resources(plan, "aws:ec2/launchTemplate:LaunchTemplate"):
        if lt["name"].startswith("ng-"):
            assert all(cluster_sg in i["securityGroups"] for i in lt["inputs"]["networkInterfaces"]), lt["name"]
    for kind in (INGRESS, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"):
        rules = [r["inputs"] for r in resources(plan, kind) if r["inputs"]["securityGroupId"] == fsx_sg]
        sources = {r["referencedSecurityGroupId"] for r in rules}
        assert sources == {cluster_sg, fsx_sg}
        assert all("cidrIpv4" not in r for r in rules)
        for src in sources:
            ports = sorted((r["fromPort"], r["toPort"]) for r in rules if r["referencedSecurityGroupId"] == src)
            assert ports == sorted(LUSTRE_PORTS)
            assert all(r["ipProtocol"] == "tcp" for r in rules)


def test_fsx_sits_in_the_training_node_groups_subnet(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    fs = only(plan, FSX)
    ng = next(
        r
        for r in resources(plan, "aws:eks/nodeGroup:NodeGroup")
        if r["inputs"]["labels"]["llm-training-eks/node-group"] != "system"
    )
    assert fs["inputs"]["subnetIds"] == ng["inputs"]["subnetIds"][0]


def test_sync_deletes_is_opt_in() -> None:
    assert data_repository_events(False) == ["NEW", "CHANGED"]
    plan = run_plan(
        {**MINIMAL, "llm-training-eks:storage": {**MINIMAL["llm-training-eks:storage"], "syncDeletes": True}}
    )
    s3 = only(plan, DRA)["inputs"]["s3"]
    assert s3["autoExportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]


def test_scratch_only_when_asked_and_holds_nothing_durable() -> None:
    scratch = {"deploymentType": "SCRATCH_2", "storageCapacityGib": 2400}
    plan = run_plan({**MINIMAL, "llm-training-eks:storage": {**MINIMAL["llm-training-eks:storage"], **scratch}})
    fs = only(plan, FSX)["inputs"]
    assert fs["deploymentType"] == "SCRATCH_2"
    assert "automaticBackupRetentionDays" not in fs
    assert fs["importPath"].endswith("/datasets")
    assert not resources(plan, DRA)


def test_stateful_helper_and_switch() -> None:
    assert stateful(True).protect is True
    assert stateful(False).protect is False
    merged = stateful(True, pulumi.ResourceOptions(ignore_changes=["tags"]))
    assert merged.protect is True and merged.ignore_changes == ["tags"]
    plan = run_plan({**MINIMAL, "llm-training-eks:protectStatefulResources": False})
    assert not any(r["protect"] for r in plan["resources"])


def test_shared_volume_is_a_static_rwx_claim_in_the_workloads_namespace() -> None:
    plan = stack_plan("trn1-llama2")
    pv = only(plan, "kubernetes:core/v1:PersistentVolume")["inputs"]
    pvc = only(plan, "kubernetes:core/v1:PersistentVolumeClaim")["inputs"]
    fs = only(plan, FSX)
    assert pv["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    assert pv["spec"]["csi"]["volumeHandle"] == fs["id"]
    assert pv["spec"]["mountOptions"] == ["flock"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc["metadata"] == {"name": "shared-fsx", "namespace": "training"}
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]


def test_plan_is_deterministic() -> None:
    first = plan_mod.to_json(run_plan(MINIMAL))
    second = plan_mod.to_json(run_plan(MINIMAL))
    assert first == second


# --------------------------------------------------------------------------- bad config


BAD_STORAGE = [
    ({"storageCapacityGib": 1000}, "storage.storageCapacityGib: 1000"),
    ({"storageCapacityGib": 3600}, "storage.storageCapacityGib: 3600"),
    ({"throughputPerTib": 300}, "storage.throughputPerTib: 300"),
    ({"backupRetentionDays": -1}, "storage.backupRetentionDays: -1"),
    ({"backupRetentionDays": 0}, "storage.backupRetentionDays: 0"),
    ({"backupRetentionDays": 91}, "storage.backupRetentionDays: 91"),
    ({"deploymentType": "PERSISTENT_1"}, "storage.deploymentType: 'PERSISTENT_1' is not allowed"),
    ({"dataCompression": "GZIP"}, "storage.dataCompression: 'GZIP' is not allowed"),
    ({"lustreVersion": "2.10"}, "storage.lustreVersion: '2.10' is not allowed"),
    ({"dailyBackupStartTime": "25:00"}, "storage.dailyBackupStartTime: '25:00'"),
    ({"capacity": 1200}, "storage.capacity: unknown key"),
]


@pytest.mark.parametrize(("storage", "expected"), BAD_STORAGE)
def test_bad_storage_config_exits_2_naming_the_key(storage: dict[str, Any], expected: str, tmp_path: Path) -> None:
    code, err = plan_exit({**BASE, "llm-training-eks:storage": storage}, tmp_path)
    assert code == 2
    assert expected in err
    assert "Traceback" not in err


def test_bad_config_problems_are_reported_together(tmp_path: Path) -> None:
    storage = {"storageCapacityGib": 1000, "throughputPerTib": 300, "backupRetentionDays": -1}
    code, err = plan_exit({**BASE, "llm-training-eks:storage": storage}, tmp_path)
    assert code == 2
    assert len(err.strip().splitlines()) == 3


def test_plan_json_is_valid_json(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert plan_mod.main(["--stack", "dev", "--format", "json"], stdout=out, stderr=err) == 0
    assert json.loads(out.getvalue())["stack"] == "dev"
