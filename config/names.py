"""Names and places: what a stack names must be valid where it ends up.

AZs exist in the region, node group names are unique, workload names and run ids make valid
and distinct Kubernetes object names (the MPI operator's Service and pod host names among
them), team names are Kubernetes names, and no secret sits in a run's plain `env`. The raw
rules read the stack values defensively (they run even when another key is invalid).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.base import AZ_RE, DNS_LABEL_RE, WORKLOAD_NAME_RE, matches
from config.network import vpc_azs as network_azs
from config.problems import problem
from config.secrets import plain_secret
from config.stackfile import SECRET
from config.storage import TEAM_NAME_RULE
from config.workloads import WorkloadConfig
from facts import kubernetes
from facts.names import DEFAULT_QUEUE, training_job_name
from facts.regions import availability_zones

# --------------------------------------------------------------------------- raw values


def az_problem(az: str, region: str) -> str | None:
    """Why `az` (a well-formed AZ name) cannot be used in `region`, or None."""
    if not az.startswith(region) or len(az) != len(region) + 1:
        return f"{az} is not in region {region}"
    known = availability_zones(region)
    if known is not None and az not in known:
        return f"{region} has no AZ {az}; its AZs: {', '.join(known)}"
    return None


def vpc_azs_in_region(raw: Mapping[str, Any]) -> list[str]:
    """Every AZ of network.availabilityZones (or of an existing VPC's subnets) exists in aws:region."""
    region = raw.get("region")
    network = raw.get("network")
    if not isinstance(network, dict) or not isinstance(region, str):
        return []
    listed: list[tuple[str, Any]] = []
    if isinstance(network.get("availabilityZones"), list):
        listed += [(f"network.availabilityZones[{i}]", az) for i, az in enumerate(network["availabilityZones"])]
    for key in ("privateSubnetIds", "publicSubnetIds"):
        if isinstance(network.get(key), dict):
            listed += [(f"network.{key}.{az}", az) for az in network[key]]
    return [
        problem(key, "not-supported", why, value=az)
        for key, az in listed
        if isinstance(az, str) and matches(AZ_RE, az) and (why := az_problem(az, region))
    ]


def node_group_names_unique(raw: Mapping[str, Any]) -> list[str]:
    groups = raw.get("nodeGroups")
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, ng in enumerate(groups if isinstance(groups, list) else []):
        name = ng.get("name") if isinstance(ng, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append(
                problem(
                    f"nodeGroups[{i}].name",
                    "duplicate",
                    f"{name!r} is already used by nodeGroups[{seen[name]}]; names must be unique",
                    value=repr(name),
                )
            )
        else:
            seen[name] = i
    return problems


def node_group_azs_in_vpc(raw: Mapping[str, Any]) -> list[str]:
    """A node group's AZ belongs to aws:region and, when the VPC's AZs are given (or an
    existing VPC's subnets), to them: a node group launches into the private subnet of its AZ."""
    region = raw.get("region")
    groups = raw.get("nodeGroups")
    vpc_key, vpc_azs = network_azs(raw.get("network"))
    problems: list[str] = []
    for i, ng in enumerate(groups if isinstance(groups, list) else []):
        az = ng.get("availabilityZone") if isinstance(ng, dict) else None
        if not isinstance(az, str) or not matches(AZ_RE, az):
            continue
        key = f"nodeGroups[{i}].availabilityZone"
        if isinstance(region, str) and (why := az_problem(az, region)):
            problems.append(problem(key, "not-supported", why, value=az))
        elif vpc_azs is not None and az not in vpc_azs:
            listed = ", ".join(map(str, vpc_azs))
            problems.append(
                problem(key, "conflict", f"{az} is not one of {vpc_key} ({listed})", value=az, allowed=listed)
            )
    return problems


# --------------------------------------------------------------------------- runs and teams


def run_name(name: str) -> list[str]:
    """Workload names start the names of the run's Kubernetes objects, among them Services and the
    MPI operator's pod host names, which are DNS-1035 labels (start with a letter)."""
    if matches(WORKLOAD_NAME_RE, name):
        return []
    rule = "1-20 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen"
    return [
        problem(f"workloads.{name}", "invalid", f"the workload name must be {rule}", value=repr(name), allowed=rule)
    ]


def plain_secrets(workloads: Mapping[str, WorkloadConfig]) -> list[str]:
    """No token, key or password in a run's plain `env` (config.secrets): secrets go in `secretEnv`."""
    return [
        problem(
            f"workloads.{name}.env.{var}",
            "forbidden",
            f"{why}; plain env values are clear text in the stack file and the Kubernetes object: move it to"
            f" secretEnv, stored encrypted, with pulumi config set --secret --path"
            f" 'workloads.{name}.secretEnv.{var}' <value> (the pods read it from a Kubernetes Secret)",
            allowed=f"workloads.{name}.secretEnv.{var}, stored encrypted",
            hint=f"pulumi config set --secret --path 'workloads.{name}.secretEnv.{var}' <value>",
        )
        for name, run in sorted(workloads.items())
        for var, value in sorted(run.env.items())
        if (why := plain_secret(var, value, SECRET))
    ]


def run_objects(workloads: Mapping[str, WorkloadConfig]) -> list[str]:
    """Each run's MPIJob name is its own, and the host names the MPI operator derives from it are
    valid: `<job>-worker-<i>` must be a DNS-1035 label (kubeflow/mpi-operator v0.8.0
    validateMPIJobName), and is also the first part of `<job>-worker-<i>.<job>.<namespace>.svc`."""
    problems: list[str] = []
    owner: dict[str, str] = {}
    for name, run in sorted(workloads.items()):
        if not matches(WORKLOAD_NAME_RE, name):
            continue  # run_name reports it
        job = training_job_name(name, run.run_id)
        if job in owner:
            problems.append(
                problem(
                    f"workloads.{name}.runId",
                    "duplicate",
                    f"the run's MPIJob would be named {job!r}, like workloads.{owner[job]}'s"
                    " (workload name and run id joined by '-'); change one of the run ids",
                    value=repr(run.run_id),
                    hint="change one of the run ids",
                )
            )
            continue
        owner[job] = name
        host = kubernetes.mpi_worker_hostname(job, run.nodes - 1)
        bad = kubernetes.dns1035_label(host)
        if bad:
            problems.append(
                problem(
                    f"workloads.{name}.runId",
                    "invalid",
                    f"the MPI operator names the last worker {host!r}, which {'; '.join(bad)};"
                    " shorten the workload name or run id",
                    value=repr(run.run_id),
                    hint="shorten the workload name or run id",
                )
            )
    return problems


def team_name(name: str) -> list[str]:
    if name == DEFAULT_QUEUE:
        # The stack without teams keeps its one volume and claim under this key (infra.storage):
        # a team of this name would take over that volume, bound to the old `training` claim, and
        # its own claim would never bind (the volume is Released, kept by its Retain policy).
        return [
            problem(
                f"teams.{name}",
                "forbidden",
                f"{DEFAULT_QUEUE!r} names the queue and the shared volume of a stack without teams;"
                " choose another team name",
                value=repr(name),
            )
        ]
    if len(name) <= 40 and matches(DNS_LABEL_RE, name):
        return []
    rule = TEAM_NAME_RULE
    return [problem(f"teams.{name}", "invalid", f"the team name must be {rule}", value=repr(name), allowed=rule)]
