"""A team's run outputs expire from S3 like everyone else's, and stay so as teams come and go.

A team's pods see `teams/<team>/` of the file system as /shared (infra.tenancy), and the file
system links to the bucket at its root, so a team's runs are exported under
`teams/<team>/runs/`. The aws layer declares the bucket and does not read `teams`: it makes a
rule per team of `storage.exportRetentionTeams` (an all-in-one stack defaults it to its own
teams), exports the list, and the cluster layer refuses a team the list misses. Sources, at the
pinned botocore (1.44.x, tests/upstream/botocore-s3-lifecycle.yaml): S3 PutBucketLifecycleConfiguration
("up to 1,000 rules", not adjustable; Expiration.Days >= 1; rule ID up to 255 characters).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from pydantic import ValidationError

from config.storage import MAX_LIFECYCLE_RULES, SHARED_RULES, StorageConfig
from facts.names import PROJECT
from infra import layers
from infra.storage import team_expiry_rule_id
from tests import upstream
from tests.conftest import example_file, run_plan, stack_plan, stack_values, stack_yaml
from tests.plan import day2
from tests.plan.test_export_retention import LIFECYCLE, data_rules, expiring
from tests.plan.test_layers import _layered_files, _plan_file

ENV = "trn1-shared"
LAYERED = {layer: f"{ENV}-{layer}" for layer in ("aws", "cluster", "runs")}
TEAMS = f"{PROJECT}:teams"
STORAGE = f"{PROJECT}:storage"
EVAL = {"nodeGroup": "trn1", "nodes": 0, "borrowingLimitNodes": 2, "priority": 50}
"""A team added on day 2: no nodes of its own (the group's 4 are the two teams'), it borrows."""


def edited(stack: str, edit: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    edit(values)
    return run_plan(values, stack)


def sub_paths(plan: dict[str, Any]) -> set[str]:
    """Every subPath the plan's pods mount /shared from (a team's: `teams/<team>`)."""
    return set(re.findall(r"'subPath': '([^']+)'", str([r["inputs"] for r in plan["resources"]])))


def layered_files(tmp_path: Path, edit: dict[str, Any]) -> Path:
    """The three trn1-shared layer files in tmp_path, `edit[layer]` applied to its config."""
    return _layered_files(tmp_path, edit, LAYERED)


def test_every_teams_runs_expire_and_the_layers_agree() -> None:
    """trn1-shared: a rule per team on the prefix its pods write (their subPath + runs/), the
    same days; its layered aws stack lists the teams and declares the same rules."""
    plan = stack_plan(ENV)
    teams = sorted(stack_values(ENV)[TEAMS])
    written = {f"{p}/runs/" for p in sub_paths(plan)}
    assert written == {f"teams/{t}/runs/" for t in teams}
    assert expiring(plan) == {"runs/": 30, **{p: 30 for p in written}}
    assert expiring(stack_plan(LAYERED["aws"])) == expiring(plan)
    assert {r["id"] for r in data_rules(plan)} >= {team_expiry_rule_id(t) for t in teams}
    exported = stack_plan(LAYERED["aws"])["outputs"][layers.AWS_LAYER_OUTPUT][layers.RUN_OUTPUT_EXPIRY]
    assert exported == {"expires": True, "days": 30, "teams": teams}


def test_adding_a_team_later_updates_the_lifecycle_only() -> None:
    """All-in-one, day 2: a third team gets its rule by default; on AWS the only change is the
    bucket's lifecycle configuration, updated in place (replaced only on bucket or
    expectedBucketOwner: facts/replacements.py)."""
    after = edited(ENV, lambda v: v[TEAMS].update(eval=EVAL))
    assert expiring(after)["teams/eval/runs/"] == 30
    update = day2.diff(stack_plan(ENV), after)
    on_aws = {s.type: s.op for s in update.touched().values() if s.type.startswith("aws:")}
    assert on_aws == {LIFECYCLE: "update"}, on_aws
    assert update.blocked == []


def test_removing_a_team_drops_its_rule_in_place() -> None:
    """A team removed (with its run): its rule goes in the same lifecycle update; the objects
    already under teams/<team>/runs/ stay in S3 (no rule names them any more; docs/platform.md)."""

    def removed(v: dict[str, Any]) -> None:
        del v[TEAMS]["research"]
        v[f"{PROJECT}:workloads"] = {k: w for k, w in v[f"{PROJECT}:workloads"].items() if w.get("team") != "research"}

    after = edited(ENV, removed)
    assert "teams/research/runs/" not in expiring(after) and "teams/product/runs/" in expiring(after)
    update = day2.diff(stack_plan(ENV), after)
    steps = {s.op for s in update.steps.values() if s.type == LIFECYCLE and s.urn.endswith("::storage-data")}
    assert steps == {"update"} and update.blocked == []
    assert not [s.urn for s in update.steps.values() if s.type.startswith("aws:") and s.op == "replace"]


def test_a_team_the_aws_layer_does_not_expire_is_refused_until_it_is_deployed(tmp_path: Path) -> None:
    """Layered, day 2: the cluster layer adds a team first and is refused (exit 2, naming the
    aws stack's key and the team); the aws layer lists it (a lifecycle update only), and then
    the cluster layer plans."""
    cluster = f"Pulumi.{LAYERED['cluster']}.yaml"
    d = layered_files(tmp_path, {"cluster": lambda c: c[TEAMS].update(eval=EVAL)})
    code, _, err = _plan_file(d / cluster)
    assert code == 2, err
    assert "teams.eval:" in err and "storage.exportRetentionTeams" in err and LAYERED["aws"] in err, err
    assert "deploy that stack first" in err

    def listed(c: dict[str, Any]) -> None:
        c[STORAGE]["exportRetentionTeams"].append("eval")

    d = layered_files(tmp_path, {"cluster": lambda c: c[TEAMS].update(eval=EVAL), "aws": listed})
    code, aws_plan, err = _plan_file(d / f"Pulumi.{LAYERED['aws']}.yaml")
    assert code == 0 and aws_plan is not None, err
    touched = {s.type: s.op for s in day2.diff(stack_plan(LAYERED["aws"]), aws_plan).touched().values()}
    assert {t: op for t, op in touched.items() if t.startswith("aws:")} == {LIFECYCLE: "update"}, touched
    code, _, err = _plan_file(d / cluster)
    assert code == 0, err


def test_no_retention_needs_no_list(tmp_path: Path) -> None:
    """`exportRetentionDays: null` in the aws layer: nothing expires, so any team is fine."""

    def kept(c: dict[str, Any]) -> None:
        c[STORAGE].update(exportRetentionDays=None, exportRetentionTeams=[])

    d = layered_files(tmp_path, {"aws": kept, "cluster": lambda c: c[TEAMS].update(eval=EVAL)})
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['cluster']}.yaml")
    assert code == 0, err


def test_an_aws_stack_from_before_the_contract(tmp_path: Path) -> None:
    """Its outputs lack runOutputExpiry: a cluster layer without teams plans; one with teams is
    refused, saying that stack predates the key."""
    for cluster, aws in (("trn1-llama2-cluster", "trn1-llama2-aws"), (LAYERED["cluster"], LAYERED["aws"])):
        outputs = copy.deepcopy(stack_plan(aws)["outputs"])
        del outputs[layers.AWS_LAYER_OUTPUT][layers.RUN_OUTPUT_EXPIRY]
        recorded = tmp_path / f"{aws}.json"
        recorded.write_text(json.dumps(outputs))
        code, _, err = _plan_file(example_file(cluster), "--lower-outputs", str(recorded))
        teams = bool(stack_values(cluster).get(TEAMS))
        assert (code == 2) == teams, err
        assert not teams or ("predates the key" in err and "teams.product:" in err), err


def test_an_all_in_one_list_that_misses_a_team_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load(example_file(ENV).read_text())
    doc["config"][STORAGE]["exportRetentionTeams"] = ["research"]
    (tmp_path / f"Pulumi.{ENV}.yaml").write_text(stack_yaml(doc))
    code, _, err = _plan_file(tmp_path / f"Pulumi.{ENV}.yaml")
    assert code == 2 and "teams.product:" in err and "this stack" in err, err


def test_the_list_is_bounded_by_s3s_rule_limit() -> None:
    """botocore's s3 model: a lifecycle configuration holds up to 1,000 rules; two are the
    bucket's own, so 998 teams fit and 999 are refused. Names are team names."""
    facts = upstream.facts("botocore-s3-lifecycle")
    s3 = botocore.session.get_session().get_service_model("s3")
    assert facts["max_rules"] in s3.operation_model("PutBucketLifecycleConfiguration").documentation
    assert MAX_LIFECYCLE_RULES == 1000 and len(data_rules(stack_plan("dev"))) == SHARED_RULES
    most = [f"team-{i}" for i in range(MAX_LIFECYCLE_RULES - SHARED_RULES)]
    assert StorageConfig.model_validate({"exportRetentionTeams": most}).export_retention_teams == sorted(most)
    with pytest.raises(ValidationError, match="S3 allows 1000 per bucket"):
        StorageConfig.model_validate({"exportRetentionTeams": [*most, "one-more"]})
    for bad in (["Research"], ["default"], ["a" * 41], ["x", "x"]):
        with pytest.raises(ValidationError, match="exportRetentionTeams"):
            StorageConfig.model_validate({"exportRetentionTeams": bad})
    assert len(team_expiry_rule_id("a" * 40)) <= facts["id_max_length"]
