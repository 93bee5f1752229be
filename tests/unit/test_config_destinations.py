"""Combinations legal key by key that the place they end up refuses or breaks, refused at config
time (exit 2, a line naming the key) or fixed, one test per class (capacity, dates, addresses and quotas, queues, models, settings not applied, units, AWS rules). Each names the
rule's source; the upstream facts are in tests/upstream/ and held in test_destination_limits.py.
"""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import config
from config.checks import capacity
from tests.conftest import BASE, MINIMAL, placed, plan_exit, resources, run_plan, stack_values

NS = "llm-training-eks:"
NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
GROUP = {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
BERT = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "run-001", "stepSeconds": 2.0}
P5 = {"name": "p5", "instanceType": "p5.48xlarge", "desiredSize": 2, "availabilityZone": "us-east-2b"}
NEMO = {"recipe": "nemo-gpu", "nodeGroup": "p5", "nodes": 2, "runId": "run-001"}
ODCR = {"type": "reservation", "reservationId": "cr-0123456789abcdef1"}


def refused(values: dict[str, Any], key: str, *words: str) -> str:
    """The one line naming `key` that refusing `values` gives (it says each of `words`)."""
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    lines = [p for p in e.value.problems if p.startswith(key + ":") or p.startswith(key + ".")]
    assert lines, f"no line names {key}: {e.value.problems}"
    assert all(w.lower() in lines[0].lower() for w in words), lines[0]
    return lines[0]


def _with_placement(values: dict[str, Any], gs: list[dict[str, Any]]) -> dict[str, Any]:
    """The VPC's AZs and the file system's AZ a stack whose groups name AZs gives (config.placement),
    merged under what the test sets itself."""
    azs = list(dict.fromkeys(g["availabilityZone"] for g in gs if isinstance(g, dict) and g.get("availabilityZone")))
    for key, section in (placed(*azs) if azs else {}).items():
        values[NS + key] = {**section, **(values.get(NS + key) or {})}
    return values


def groups(*gs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return _with_placement({**BASE, NS + "nodeGroups": list(gs), **{NS + k: v for k, v in extra.items()}}, list(gs))


def gpu(**extra: Any) -> dict[str, Any]:
    values = {"aws:region": "us-east-2", NS + "cluster": BASE[NS + "cluster"], NS + "nodeGroups": [P5]}
    values.update({NS + k: v for k, v in extra.items()})
    return _with_placement(values, values[NS + "nodeGroups"])


# --------------------------------------------------------------------------- 1. capacity


def test_two_groups_on_one_reservation_agree_on_what_it_is() -> None:
    """A reservation is of one instance type in one AZ (EC2 API reference, CapacityReservation);
    how many of its instances are free is the account's, so preflight adds the groups up
    (test_preflight_shared_reservation)."""
    a, b = {**GROUP, "capacity": ODCR}, {**GROUP, "name": "trn1b", "capacity": ODCR}
    config.parse_stack_values(groups(a, b))
    refused(groups(a, {**b, "instanceType": "trn1n.32xlarge"}), "nodeGroups[1].instanceType", "same reservation")
    refused(groups(a, {**b, "availabilityZone": "us-west-2a"}), "nodeGroups[1].availabilityZone", "one AZ")


def test_one_cluster_placement_group_lives_in_one_az() -> None:
    """EC2 user guide, placement-groups: a cluster group packs instances inside one Availability Zone."""
    a = {**GROUP, "capacity": {"placementGroupName": "pg-1"}}
    b = {**a, "name": "trn1b", "availabilityZone": "us-west-2a"}
    refused(groups(a, b), "nodeGroups[1].capacity.placementGroupName", "one AZ", "us-west-2d")


def test_a_capacity_block_holds_64_instances_of_the_types_ec2_sells() -> None:
    """EC2 user guide, ec2-capacity-blocks: up to 64 instances a block; p5, p5e, p5en, p4d, trn1,
    trn2 only (not p4de, not trn1n)."""
    block = {"type": "capacity-block", "reservationId": "cr-0a1b2c3d4e5f60718", "endsAt": "2027-03-01T11:30:00Z"}
    ok = {**P5, "capacity": block}
    config.parse_stack_values(gpu(**{"nodeGroups": [ok]}))
    refused(gpu(nodeGroups=[{**ok, "desiredSize": 65}]), "nodeGroups[0].desiredSize", "at most 64")
    refused(gpu(nodeGroups=[{**ok, "desiredSize": 8, "maxSize": 80}]), "nodeGroups[0].maxSize", "at most 64")
    p4de = {**ok, "name": "p4de", "instanceType": "p4de.24xlarge"}
    refused(gpu(nodeGroups=[p4de]), "nodeGroups[0].capacity.type", "no capacity blocks of p4de")
    trn1n = {**GROUP, "instanceType": "trn1n.32xlarge", "capacity": block}
    refused(groups(trn1n), "nodeGroups[0].capacity.type", "trn1n.32xlarge")


def test_an_ended_block_is_refused_by_the_offline_plan_as_by_preview(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """EC2 Auto Scaling API reference, PutScheduledUpdateGroupAction: "If you try to schedule your
    action in the past, Amazon EC2 Auto Scaling returns an error message." Config judges it with the
    clock, so `tools.plan` (no account) refuses what preflight inside `pulumi preview` refused."""
    monkeypatch.setattr(capacity, "utc_now", lambda: NOW)
    values = copy.deepcopy(stack_values("p5-capacity-block"))
    block = values[NS + "nodeGroups"][0]["capacity"]
    block.pop("startsAt")  # a block of its own, whose start is not said
    block["endsAt"] = (NOW + dt.timedelta(minutes=30)).isoformat()  # EKS's scale-down 40 min before: past
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and err.startswith("nodeGroups[0].capacity.endsAt:") and "already past" in err, err
    block["endsAt"] = (NOW + dt.timedelta(days=3)).isoformat()
    config.parse_stack_values(values)


# --------------------------------------------------------------------------- 2. dates that overflow


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"scaleDownMinutesBeforeEnd": 2**31 - 1}, "nodeGroups[0].capacity.scaleDownMinutesBeforeEnd"),
        ({"endsAt": "0001-01-01T00:30:00Z"}, "nodeGroups[0].capacity.endsAt"),
    ],
)
def test_dates_that_would_overflow_are_refused_not_crashed(change: dict[str, Any], key: str, tmp_path: Path) -> None:
    """`endsAt - scaleDownMinutesBeforeEnd` once raised OverflowError (exit 1). The lead is bounded
    by the longest block (182 days, EC2 user guide, ec2-capacity-blocks)."""
    values = copy.deepcopy(stack_values("p5-capacity-block"))
    values[NS + "nodeGroups"][0]["capacity"].pop("startsAt")
    values[NS + "nodeGroups"][0]["capacity"].update(change)
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and err.startswith(key + ":"), err


# --------------------------------------------------------------------------- 3. addresses and quotas


def test_a_created_vpc_holds_its_nodes_addresses() -> None:
    """The project's own estimate (config.checks.network.addresses_needed: the VPC CNI's addresses per
    node at maxSize, 16 for EKS) against the private subnet the stack carves, less the 5 addresses AWS
    keeps in every subnet (VPC user guide, subnet-sizing)."""
    p5 = {**P5, "maxSize": 6}  # 6 x 100 + 16 > 507, the /23 of a /20
    refused(gpu(nodeGroups=[p5], network={"cidr": "10.0.0.0/20"}), "nodeGroups[0].maxSize", "at most 4")
    many = [{**P5, "name": f"p5-{i}", "maxSize": 3} for i in range(2)]  # 2 x 300 + 16 + system
    refused(gpu(nodeGroups=many, network={"cidr": "10.0.0.0/20"}), "network.cidr", "/16 gives 8187")
    config.parse_stack_values(gpu(nodeGroups=[p5]))  # the default /16 holds them


def test_kueue_takes_64_flavors_per_resource_group() -> None:
    """kueue v0.19.2 clusterqueue_types.go: ResourceGroup.flavors MaxItems=64; without teams the
    default queue lists every node group and the system group."""
    many = [{**GROUP, "name": f"g{i}", "desiredSize": 0} for i in range(64)]
    refused(groups(*many), "nodeGroups", "65 Kueue flavors", "at most 64")
    config.parse_stack_values(groups(*many[:63]))
    # Beside teams, the default queue the config keeps lists every group too (infra.queues.teams_of).
    many[0] = {**many[0], "desiredSize": 1}
    teams = {"a": {"nodeGroup": "g0", "nodes": 1}}
    kept = groups(*many, teams=teams, queueing={"defaultQueue": True})
    refused(kept, "queueing.defaultQueue", "65 Kueue flavors", "set it to false")
    config.parse_stack_values(groups(*many, teams=teams, queueing={"defaultQueue": False}))


def test_the_file_systems_security_group_does_not_grow_with_node_groups() -> None:
    """29 node groups once put 62 inbound rules on the FSx security group; EC2 allows 60 by default
    (VPC user guide, amazon-vpc-limits: RulesPerSecurityGroupLimitExceeded)."""
    many = [{**GROUP, "name": f"g{i}", "desiredSize": 0} for i in range(29)]
    plan = run_plan(groups(*many))
    (fsx,) = resources(plan, "aws:fsx/lustreFileSystem:LustreFileSystem")
    sg = fsx["inputs"]["securityGroupIds"][0]
    for kind in ("Ingress", "Egress"):
        rules = [r for r in resources(plan, f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule")]
        assert len([r for r in rules if r["inputs"]["securityGroupId"] == sg]) <= 60


def test_the_cluster_security_group_stays_within_its_rule_quota() -> None:
    """Each private-access network is one inbound rule on the cluster security group, beside EKS's
    own and the Lustre callbacks (EKS user guide, sec-group-reqs; VPC user guide, amazon-vpc-limits)."""
    cidrs = [f"10.{i}.0.0/16" for i in range(100, 158)]
    refused({**MINIMAL, NS + "cluster": {"privateAccessCidrs": cidrs}}, "cluster.privateAccessCidrs", "60")
    config.parse_stack_values({**MINIMAL, NS + "cluster": {"privateAccessCidrs": cidrs[:57]}})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("network", {"cidr": "127.0.0.0/16"}),
        ("network", {"cidr": "169.254.0.0/16"}),
        ("cluster", {"publicAccessCidrs": ["169.254.0.0/16"]}),
        ("cluster", {"privateAccessCidrs": ["224.0.0.0/8"]}),
        ("cluster", {"privateAccessCidrs": ["127.0.0.1/32"]}),
    ],
)
def test_cidrs_in_loopback_link_local_and_multicast_space_are_refused(key: str, value: dict[str, Any]) -> None:
    """A VPC takes RFC 1918 space (VPC user guide, vpc-cidr-blocks); no peer has a loopback,
    link-local or multicast source address (IANA special-purpose registry)."""
    refused({**MINIMAL, NS + key: value}, f"{key}.{next(iter(value))}")


# --------------------------------------------------------------------------- 4. queues


def test_a_team_borrows_only_what_other_teams_lend() -> None:
    """kueue v0.19.2 concepts/cluster_queue.md: a ClusterQueue borrows the unused nominalQuota of the
    other ClusterQueues of its cohort, never nodes outside every quota."""
    teams = {"a": {"nodeGroup": "trn1", "nodes": 1, "borrowingLimitNodes": 2}}
    four = {**GROUP, "desiredSize": 4}
    only_teams = {"defaultQueue": False}
    refused(groups(four, teams=teams, queueing=only_teams), "teams.a.borrowingLimitNodes", "lend only 0")
    run = {**BERT, "team": "a", "nodes": 2}
    lent = {"a": {**teams["a"], "borrowingLimitNodes": 1}, "b": {"nodeGroup": "trn1", "nodes": 1}}
    config.parse_stack_values(groups(four, teams=lent, workloads={"r": run}, queueing=only_teams))
    unlimited = {"a": {"nodeGroup": "trn1", "nodes": 1, "borrowingLimitNodes": None}}
    refused(groups(four, teams=unlimited, workloads={"r": run}, queueing=only_teams), "workloads.r.nodes", "never")
    # The default queue kept for runs without a team holds the 3 nodes no team has, and lends them.
    config.parse_stack_values(groups(four, teams=teams, workloads={"r": run}, queueing={"defaultQueue": True}))


# --------------------------------------------------------------------------- 5. models


def test_tensor_parallelism_divides_the_key_value_heads() -> None:
    """megatron-core attention.py: divide(num_query_groups, tensor_model_parallel_size);
    neuronx-nemo-megatron transformer.py: safe_divide(num_kv_heads, world_size)."""
    model = {"numAttentionHeads": 32, "numKvHeads": 4, "tensorParallel": 8}
    refused(gpu(workloads={"n": {**NEMO, "model": model}}), "workloads.n.model.tensorParallel", "numKvHeads 4")
    config.parse_stack_values(gpu(workloads={"n": {**NEMO, "model": {**model, "numKvHeads": 8}}}))


def test_the_nccl_tests_buffers_fit_the_gpu() -> None:
    """nccl-tests v2.13.10 src/common.cu: three buffers of the size with -c 1, plus 1 GiB kept free;
    above that it shrinks the size in silence. An H100 (EC2 GpuInfo) has 80 GiB."""
    big = {**NEMO, "healthCheck": {"messageSize": "30G"}}
    refused(gpu(workloads={"n": big}), "workloads.n.healthCheck.messageSize", "at most 26965M")
    config.parse_stack_values(gpu(workloads={"n": {**NEMO, "healthCheck": {"messageSize": "26G"}}}))


# --------------------------------------------------------------------------- 6. settings not applied


@pytest.mark.parametrize(
    ("setting", "value"),
    [("backupRetentionDays", 7), ("dailyBackupStartTime", "03:00"), ("throughputPerTib", 500), ("syncDeletes", True)],
)
def test_scratch_storage_refuses_what_it_would_not_apply(setting: str, value: Any) -> None:
    """FSx for Lustre user guide, using-backups-fsx: backups are of persistent file systems; the
    throughput tiers and the S3 export are persistent ones' too (infra.storage passes none of them)."""
    storage = {"deploymentType": "SCRATCH_2", "storageCapacityGib": 2400, setting: value}
    refused({**MINIMAL, NS + "storage": storage}, f"storage.{setting}", "not applied")


@pytest.mark.parametrize("setting", [{"messageSize": "2G"}, {"minBusBandwidthGBPerSecond": 20}])
def test_health_check_settings_with_the_check_off_are_refused(setting: dict[str, Any]) -> None:
    """workloads/manifests/healthcheck.py runs no test when enabled is false: its size and floor
    would be dropped in silence."""
    run = {**BERT, "healthCheck": {"enabled": False, **setting}}
    refused({**MINIMAL, NS + "workloads": {"b": run}}, f"workloads.b.healthCheck.{next(iter(setting))}", "not applied")


@pytest.mark.parametrize("var", ["CHECKPOINT_DIR", "MASTER_ADDR", "NNODES"])
def test_a_runs_env_leaves_the_platforms_variables_alone(var: str) -> None:
    """workloads/manifests/mpijob.py base_env sets these for rendezvous and resume; a run's env that
    set one silently broke them (test_workloads holds facts.names.PLATFORM_ENV to base_env)."""
    run = {**BERT, "env": {var: "x"}}
    refused({**MINIMAL, NS + "workloads": {"b": run}}, f"workloads.b.env.{var}", "the platform sets")


def test_a_runs_env_tunes_what_the_recipe_sets() -> None:
    """The bert recipe sets NEURON_RT_EXEC_TIMEOUT; a run's own value used to be dropped in silence."""
    run = {**BERT, "env": {"NEURON_RT_EXEC_TIMEOUT": "1200"}}
    plan = run_plan({**MINIMAL, NS + "workloads": {"b": run}})
    (job,) = [r for r in plan["resources"] if r["name"] == "b-run-001-train"]
    worker = job["inputs"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert {"name": "NEURON_RT_EXEC_TIMEOUT", "value": "1200"} in worker["env"]


# --------------------------------------------------------------------------- 7. units


def test_the_floor_is_named_in_the_unit_the_gate_compares() -> None:
    """nccl-tests prints busbw in GB/s (src/common.cu); the old key said Gbps. It is refused with the
    new key and both readings of the value."""
    old = {**NEMO, "healthCheck": {"minBusBandwidthGbps": 3200}}
    line = refused(gpu(workloads={"n": old}), "workloads.n.healthCheck.minBusBandwidthGbps")
    assert "minBusBandwidthGBPerSecond: 3200" in line and "400 GB/s" in line, line
    new = {**NEMO, "healthCheck": {"minBusBandwidthGBPerSecond": 400}}
    plan = run_plan(gpu(workloads={"n": new}))
    (job,) = [r for r in plan["resources"] if r["name"] == "n-run-001-train"]
    launcher = job["inputs"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "-v min=400 " in launcher["command"][-1]


# --------------------------------------------------------------------------- 8. AWS rules


def test_scaling_to_zero_as_the_docs_say_keeps_max_unavailable_within_max_size() -> None:
    """EKS: "max-unavailable must be within the range 1 and max size of the node group"
    (terraform-provider-aws#26535). desiredSize 0 without maxSize made maxSize 1, which EKS then refused."""
    group = {**GROUP, "desiredSize": 4, "maxUnavailable": 2}
    config.parse_stack_values(groups(group))
    zero = {**group, "desiredSize": 0, "minSize": 0}
    refused(groups(zero), "nodeGroups[0].maxUnavailable", "above maxSize 1", "set maxSize")
    config.parse_stack_values(groups({**zero, "maxSize": 4}))


def test_tag_keys_differ_in_more_than_case() -> None:
    """IAM user guide, id_tags: IAM tag keys are case-insensitive ("Duplicate tag keys found")."""
    refused({**MINIMAL, NS + "tags": {"Team": "a", "team": "b"}}, "tags.team", "only in case")
    refused({**MINIMAL, NS + "tags": {"name": "x"}}, "tags.name", "'Name'")


def test_an_empty_hugging_face_token_is_no_token() -> None:
    """Refused where Pulumi deploys (config.parse, as config.load calls it); offline, a warning."""
    values = copy.deepcopy(stack_values("trn1-llama2"))
    values[NS + "huggingFaceToken"] = ""
    with pytest.raises(config.ConfigError) as e:
        config.parse(config.from_stack_values(values))
    assert any(p.startswith("huggingFaceToken: is empty, but required by workloads.llama2") for p in e.value.problems)
    (warning,) = config.offline_warnings(config.parse_stack_values(values))
    assert warning.startswith("before pulumi up: huggingFaceToken: is empty, but required by workloads.llama2")


def test_a_tiny_step_time_plans_with_a_cost() -> None:
    """round(stepSeconds, 3) made 1e-6 s a zero, and the cost a ValueError (exit 1)."""
    plan = run_plan({**MINIMAL, NS + "workloads": {"b": {**BERT, "stepSeconds": 1e-6}}})
    assert plan["outputs"]["runCosts"] == {"b": 0}
