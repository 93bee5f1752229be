"""A team's own stacks, held to the snapshots the team asked for (tools.snapshot).

A stack file of yours at the root is not a test case; `make snapshot STACK=<name>` makes it one:
from then on this file plans it and fails when a URN or a rendered Kubernetes object differs
from tests/snapshots/<name>/. The examples are held to tests/golden by test_urns and
test_workloads. The second half shows the mechanism on a stack made in a folder of its own.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import GOLDEN, ROOT, stack_yaml
from tools import cli, newstack, snapshot


@pytest.mark.parametrize("stack", snapshot.held_stacks())
def test_your_stack_matches_its_snapshot(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "TEAM_DIR", ROOT)  # this test is about your stacks, on purpose
    problems = snapshot.check(stack)
    assert not problems, "\n".join(
        [*problems, f"deliberate? `make snapshot STACK={stack}` rewrites it; review and commit the diff"]
    )


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cli, "TEAM_DIR", tmp_path)
    monkeypatch.setattr(snapshot, "SNAPSHOTS", tmp_path / "tests" / "snapshots")
    return tmp_path


def test_make_snapshot_writes_and_the_check_then_holds_the_stack(team: Path) -> None:
    assert newstack.main(["prod", "--from", "dev"], stderr=io.StringIO()) == 0
    assert snapshot.held_stacks() == []
    err = io.StringIO()
    assert snapshot.main(["--stack", "prod"], stderr=err) == 0
    folder = team / "tests" / "snapshots" / "prod"
    urns = (folder / "urns.txt").read_text().splitlines()
    objects = sorted(p.name for p in folder.glob("*.yaml"))
    assert err.getvalue() == (
        f"wrote {folder}/ ({len(urns)} URNs, {len(objects)} Kubernetes objects); commit it: make test now holds prod to it\n"
    )
    # The copy of the example declares what the example does, under the new stack's name.
    example = (GOLDEN / "dev" / "urns.txt").read_text().splitlines()
    assert urns == [u.replace("urn:pulumi:dev::", "urn:pulumi:prod::", 1) for u in example]
    run_objects = [o for o in objects if "run-001" in o]
    assert any(o.startswith("mpijob-") for o in run_objects) and snapshot.held_stacks() == ["prod"]
    out = io.StringIO()
    assert snapshot.main(["--stack", "prod", "--check"], stdout=out, stderr=io.StringIO()) == 0
    assert out.getvalue() == f"prod: matches {folder}/\n"

    # A new runId: the run's objects are new ones (the old ones deleted), and the check says which.
    path = team / "Pulumi.prod.yaml"
    path.write_text(path.read_text().replace("runId: run-001", "runId: run-002"))
    out, err = io.StringIO(), io.StringIO()
    assert snapshot.main(["--stack", "prod", "--check"], stdout=out, stderr=err) == 1
    lines = err.getvalue().splitlines()
    assert any(x.startswith("prod: URN gone (a deleted live resource unless it has an alias): ") for x in lines)
    assert any(x.startswith("prod: URN new: ") and "run-002" in x for x in lines)
    for name in run_objects:
        assert f"prod: object gone: {name}" in lines and f"prod: object new: {name.replace('001', '002')}" in lines
    assert out.getvalue() == "" and len(lines) <= snapshot.MAX_LINES + 1


def test_a_urn_gone_that_a_resource_aliases_is_the_same_resource(team: Path) -> None:
    """A snapshot taken before the workloads had a kind (type `TrainingRun`) still holds: the
    Workload component aliases that type and its objects inherit the alias. A URN gone that
    nothing aliases is still a difference."""
    assert newstack.main(["prod", "--from", "dev"], stderr=io.StringIO()) == 0
    assert snapshot.main(["--stack", "prod"], stderr=io.StringIO()) == 0
    urns = team / "tests" / "snapshots" / "prod" / "urns.txt"
    now = urns.read_text()
    assert ":workloads:Workload" in now
    urns.write_text(now.replace(":workloads:Workload", ":workloads:TrainingRun"))
    assert snapshot.check("prod") == []
    urns.write_text(now.replace(":workloads:Workload", ":workloads:Job"))
    gone = [line for line in snapshot.check("prod") if line.startswith("URN gone")]
    assert len(gone) == now.count(":workloads:Workload") and all(":workloads:Job" in line for line in gone)


def test_a_snapshot_is_only_of_a_stack_of_yours(team: Path) -> None:
    """An example is held by tests/golden; a snapshot without its stack file fails the check."""
    for stack, path in (("dev", "Pulumi.dev.yaml"), ("p5en", "examples/Pulumi.p5en.yaml")):
        err = io.StringIO()
        assert snapshot.main(["--stack", stack], stderr=err) == 2
        assert err.getvalue() == (
            f"error: {stack}: an example ({path}); the tests hold the examples to tests/golden already"
            " (UPDATE_GOLDEN=1 regenerates them). A snapshot is for a stack of yours at the root\n"
        )
    (team / "tests" / "snapshots" / "gone").mkdir(parents=True)
    assert snapshot.check("gone") == [
        f"{team}/tests/snapshots/gone holds a snapshot of gone, which has no Pulumi.gone.yaml at the root:"
        " restore the stack file or delete the folder"
    ]
    (team / "Pulumi.new.yaml").write_text(stack_yaml({"config": {}}))
    assert snapshot.check("new") == [f"no snapshot in {team}/tests/snapshots/new/: make snapshot STACK=new writes one"]


def test_differences_are_bounded_and_say_what_changed(tmp_path: Path) -> None:
    (tmp_path / "urns.txt").write_text("".join(f"urn:a{i}\n" for i in range(30)))
    (tmp_path / "job-a.yaml").write_text("a: 1\n")
    lines = snapshot.differences({"urns.txt": "urn:b\n", "job-a.yaml": "a: 2\n"}, tmp_path)
    assert len(lines) == snapshot.MAX_LINES + 1 and lines[-1] == "... and 12 more"
    assert snapshot.differences({"urns.txt": "urn:b\n", "job-a.yaml": "a: 2\n"}, tmp_path)[:1] == [
        "URN gone (a deleted live resource unless it has an alias): urn:a0"
    ]


def test_the_end_of_a_run_says_which_of_your_stacks_are_tested(team: Path) -> None:
    assert conftest.team_stack_lines() == []
    for name in ("prod-aws", "prod-runs"):
        (team / f"Pulumi.{name}.yaml").write_text(stack_yaml({"config": {}}))
    (team / "tests" / "snapshots" / "prod-aws").mkdir(parents=True)
    assert conftest.team_stack_lines() == [
        "your stacks held to snapshots (tests/snapshots): prod-aws",
        "your stacks not tested: prod-runs (make snapshot STACK=<name>)",
    ]
