"""Launch template versions as EC2 keeps them, for the offline plan's mocks.

EC2 keeps every version of a launch template. A managed node group names one; this project's
name the template's `latestVersion`, so a new version is a new `launchTemplate.version` of the
group, which EKS carries out by replacing every node (tests/plan/day2.py, `Update.rolls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.runtime import rpc

LAUNCH_TEMPLATE_UNVERSIONED = (
    "name",
    "namePrefix",
    "description",
    "defaultVersion",
    "updateDefaultVersion",
    "tags",
    "tagsAll",
)
"""Launch template inputs whose change makes no new version: every other input is the template's
data, and an edit of it makes EC2 version `latestVersion + 1` (terraform-provider-aws
internal/service/ec2/ec2_launch_template.go, resourceLaunchTemplateUpdate and the CustomizeDiff
on latest_version; tests/upstream/terraform-provider-aws-launch-template-versions.yaml)."""


def _comparable(value: Any) -> Any:
    """An input value as the plan JSON holds it (numbers the engine carries as doubles are ints
    where whole, unknowns are `<computed>`), so a deployed plan's inputs compare with a new run's."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value == rpc.UNKNOWN:
        return "<computed>"
    return value


def launch_template_version(deployed: Mapping[str, Any] | None, inputs: Mapping[str, Any]) -> int:
    """The template's `latestVersion` after this run, as EC2 keeps it: 1 when created; the deployed
    version when its data is unchanged; one more when any data input changed. `deployed` is the
    template's entry in the deployed plan (its `inputs` and `latestVersion`)."""
    if deployed is None:
        return 1

    def data(i: Mapping[str, Any]) -> dict[str, Any]:
        return {k: _comparable(v) for k, v in i.items() if k not in LAUNCH_TEMPLATE_UNVERSIONED}

    version = int(deployed.get("latestVersion") or 1)
    return version if data(deployed["inputs"]) == data(inputs) else version + 1
