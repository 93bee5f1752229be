"""Preflight refuses an edit of the shared file system that FSx cannot make in place: shrinking
it, or a new Lustre version or deployment type, would replace the protected file system, which stops `pulumi up` in the middle. Both sources read the live file system: boto3
(DescribeFileSystems, its shapes held by botocore's Stubber against the fsx model) and the stack's
provider (tag lookup, then Cloud Control)."""

from __future__ import annotations

import json
from typing import Any

import pulumi_aws as aws
import pytest

import config
from tests import upstream
from tests.conftest import API_PATH, placed
from tests.unit.preflight_sources import TOKENS, InvokeMocks, boto_account, provider_account, under_provider, wire
from tools import preflight
from tools.aws import storage_checks
from tools.aws.account import file_system_tags

SOURCES = ("boto3", "provider")
FS_ID = "fs-0123456789abcdef0"


def cfg_of(**storage: Any) -> config.StackConfig:
    group = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
    where = placed("us-west-2d")
    return config.parse(
        {
            "region": "us-west-2",
            "cluster": API_PATH,
            "nodeGroups": [group],
            "network": where["network"],
            "storage": {**where["storage"], **storage},
        }
    )


def findings(source: str, cfg: config.StackConfig, deployed: dict[str, Any] | None) -> list[Any]:
    """The check's findings with `deployed` (capacity, version, type) as the live file system."""
    tags = file_system_tags(cfg.cluster.name)
    if source == "boto3":
        systems = []
        if deployed:
            systems.append(
                {
                    "FileSystemId": FS_ID,
                    "FileSystemType": "LUSTRE",
                    "StorageCapacity": deployed["capacity"],
                    "FileSystemTypeVersion": deployed["version"],
                    "LustreConfiguration": {"DeploymentType": deployed["type"]},
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            )
        account, stubbers = boto_account(fsx=[("describe_file_systems", {"FileSystems": systems})])
        found = storage_checks.check_file_system(account, cfg)
        for stub in stubbers:
            stub.assert_no_pending_responses()
        return found
    arn = f"arn:aws:fsx:us-west-2:123456789012:file-system/{FS_ID}"
    mappings = (
        [
            wire(
                aws.resourcegroupstaggingapi.outputs.GetResourcesResourceTagMappingListResult,
                resource_arn=arn,
                compliance_details=[],
                tags=tags,
            )
        ]
        if deployed
        else []
    )
    answers: dict[str, Any] = {
        TOKENS["resources_by_tag"]: wire(
            aws.resourcegroupstaggingapi.GetResourcesResult,
            id="us-west-2",
            resource_arn_lists=[],
            resource_tag_mapping_lists=mappings,
        )
    }
    if deployed:
        props = {
            "FileSystemType": "LUSTRE",
            "StorageCapacity": deployed["capacity"],
            "FileSystemTypeVersion": deployed["version"],
            "LustreConfiguration": {"DeploymentType": deployed["type"]},
        }
        answers[TOKENS["cloudcontrol"]] = wire(
            aws.cloudcontrol.GetResourceResult,
            id=FS_ID,
            identifier=FS_ID,
            type_name="AWS::FSx::FileSystem",
            properties=json.dumps(props),
        )
    (found,) = under_provider(
        InvokeMocks(answers), lambda: storage_checks.check_file_system(provider_account(cfg), cfg)
    )
    return list(found)


def failing(found: list[Any]) -> list[str]:
    return [f.line() for f in found if not f.ok]


DEPLOYED = {"capacity": 2400, "version": "2.15", "type": "PERSISTENT_2"}


@pytest.mark.parametrize("source", SOURCES)
def test_nothing_deployed_yet_passes(source: str) -> None:
    assert failing(findings(source, cfg_of(), None)) == []


@pytest.mark.parametrize("source", SOURCES)
def test_the_same_or_a_larger_file_system_passes(source: str) -> None:
    assert failing(findings(source, cfg_of(storageCapacityGib=2400), DEPLOYED)) == []
    assert failing(findings(source, cfg_of(storageCapacityGib=4800), DEPLOYED)) == []


@pytest.mark.parametrize("source", SOURCES)
def test_shrinking_is_refused_naming_the_key_and_the_way(source: str) -> None:
    (line,) = failing(findings(source, cfg_of(storageCapacityGib=1200), DEPLOYED))
    assert line.startswith("FAIL day2 storage: storage.storageCapacityGib: 1200 GiB is below the deployed")
    assert "keep 2400" in line and "Restore from a backup" in line


@pytest.mark.parametrize("source", SOURCES)
def test_a_new_lustre_version_is_refused(source: str) -> None:
    (line,) = failing(findings(source, cfg_of(storageCapacityGib=2400, lustreVersion="2.12"), DEPLOYED))
    assert "storage.lustreVersion: the deployed file system (fs-0123456789abcdef0) runs Lustre 2.15" in line
    assert "keep 2.15" in line


def test_a_refused_file_system_edit_exits_2_like_bad_config() -> None:
    assert storage_checks.DAY2 == preflight.DAY2


def test_the_way_forward_follows_what_fsx_updates_in_place() -> None:
    """botocore's fsx model: UpdateFileSystem takes FileSystemTypeVersion (newer only) and
    StorageCapacity, nothing that changes the deployment type; terraform-provider-aws still replaces
    the file system for a new version, so the upgrade is made outside Pulumi, then refreshed."""
    import botocore.session

    facts = upstream.facts("botocore-fsx-update-file-system-1.44.8")
    model = botocore.session.get_session().get_service_model("fsx")
    update = model.operation_model("UpdateFileSystem").input_shape
    assert list(update.members) == facts["update_file_system_inputs"]
    assert "must be newer" in update.members["FileSystemTypeVersion"].documentation
    assert "DeploymentType" not in model.shape_for("UpdateFileSystemLustreConfiguration").members
    dra = model.operation_model("UpdateDataRepositoryAssociation").input_shape
    assert list(dra.members) == facts["update_data_repository_association_inputs"]
    forced = upstream.facts("pulumi-replacements-2026-11")["aws_force_new"]["aws:fsx/lustreFileSystem:LustreFileSystem"]
    assert "fileSystemTypeVersion" in forced
    (up,) = failing(findings("boto3", cfg_of(storageCapacityGib=2400), {**DEPLOYED, "version": "2.12"}))
    assert "aws fsx update-file-system --file-system-id fs-0123456789abcdef0 --file-system-type-version 2.15" in up
    (down,) = failing(findings("boto3", cfg_of(storageCapacityGib=2400, lustreVersion="2.12"), DEPLOYED))
    assert "a downgrade needs a new file system from a backup" in down


def test_the_tags_preflight_finds_the_file_system_by_are_the_ones_it_carries() -> None:
    from tests.conftest import MINIMAL, resources, run_plan

    plan = run_plan(MINIMAL)
    (fs,) = resources(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")
    cluster = config.parse_stack_values(MINIMAL).cluster.name
    assert file_system_tags(cluster).items() <= fs["inputs"]["tags"].items()
