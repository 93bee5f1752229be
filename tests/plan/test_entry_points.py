"""Bad input exits 2 in every entry point, one bounded line per problem, no traceback; under
`pulumi up` it fails before any resource is registered. And the offline plan refuses a duplicate
URN as the engine does, instead of silently keeping the last registration."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest
from pulumi.runtime import config as runtime_config

import config
from config import stackfile
from facts import names
from tests.conftest import MINIMAL, ROOT, stack_yaml
from tests.unit.test_stackfile import ALIAS_BOMB
from tools import ci, cost, diagram, plan, preflight
from tools.offline import mocks

NS = "llm-training-eks:"
BAD_FILES = {
    "alias-bomb": ALIAS_BOMB,
    "duplicate-key": stack_yaml({"config": MINIMAL}) + "  aws:region: us-east-1\n",
    "namespace-typo": stack_yaml({"config": {**MINIMAL, "llm-trainig-eks:workloads": {}}}),
    "invalid-config": stack_yaml({"config": {**MINIMAL, NS + "cluster": {"name": "LLM Dev"}}}),
    "many-problems": stack_yaml(
        {"config": {**MINIMAL, NS + "nodeGroups": [{"name": "N" * 900, "desiredSize": True} for _ in range(100)]}}
    ),
}


def _plan(path: Path, err: io.StringIO) -> int:
    return plan.main(["--config-file", str(path)], stdout=io.StringIO(), stderr=err)


def _cost(path: Path, err: io.StringIO) -> int:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        return cost.main(["--config-file", str(path)])


def _preflight(path: Path, err: io.StringIO) -> int:
    return preflight.main(["--config-file", str(path)], stdout=io.StringIO(), stderr=err, session=object())


def _ci(path: Path, err: io.StringIO) -> int:
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    args = ["stacks", "--stacks", json.dumps([name]), "--stack-dir", str(path.parent)]
    return ci.main(args, stdout=io.StringIO(), stderr=err)


def _diagram(path: Path, err: io.StringIO) -> int:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        return diagram.main(["--config-file", str(path)])


ENTRY_POINTS: dict[str, Callable[[Path, io.StringIO], int]] = {
    "plan": _plan,
    "cost": _cost,
    "preflight": _preflight,
    "diagram": _diagram,
    "ci": _ci,
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("bad", sorted(BAD_FILES))
def test_every_entry_point_exits_2_with_bounded_lines(entry: str, bad: str, tmp_path: Path) -> None:
    path = tmp_path / f"Pulumi.{bad}.yaml"
    path.write_text(BAD_FILES[bad])
    err = io.StringIO()
    code = ENTRY_POINTS[entry](path, err)
    lines = err.getvalue().splitlines()
    assert code == 2, err.getvalue()
    assert lines and len(lines) <= config.MAX_PROBLEMS + 1 and "Traceback" not in err.getvalue()
    assert all(len(line) <= config.MAX_LINE + len(f"error: {bad}: invalid stack config: ") for line in lines)


@pytest.mark.parametrize("entry", sorted(set(ENTRY_POINTS) - {"ci"}))
def test_every_entry_point_says_which_file_is_missing(entry: str, tmp_path: Path) -> None:
    """A stack file that is not there, or a directory: exit 2 and one line naming it."""
    (tmp_path / "Pulumi.dev.yaml").write_text(stack_yaml({"config": MINIMAL}))
    for path, line in [
        (
            tmp_path / "Pulumi.prod.yaml",
            f"error: Pulumi.prod.yaml: no such stack file in {tmp_path}; stacks there: dev",
        ),
        (tmp_path, f"error: {tmp_path}: a directory, not a stack file"),
    ]:
        err = io.StringIO()
        assert (ENTRY_POINTS[entry](path, err), err.getvalue().splitlines()) == (2, [line])


def _load_under_the_engine(values: dict[str, Any]) -> mocks.RecordingMonitor:
    monitor = mocks.install("us-west-2", names.PROJECT, "bad")
    runtime_config.set_all_config({k: stackfile.engine_value(v) for k, v in values.items()}, [])
    return monitor


@pulumi.runtime.test
def test_pulumi_up_stops_before_anything_is_registered() -> None:
    """`config.load` is what `__main__.py` calls first: a typo'd namespace or a bad value fails
    the program with one Pulumi error per problem and no resource."""
    monitor = _load_under_the_engine({**MINIMAL, "llm-trainig-eks:workloads": "{}", NS + "tags": {"aws:x": "y"}})
    with pytest.raises(pulumi.RunError, match=r"invalid stack config \(2 problem"):
        config.load()
    assert monitor.registrations == {}


def test_the_program_file_loads_config_before_it_declares_anything() -> None:
    source = (ROOT / "__main__.py").read_text()
    assert source.index("config.load()") < source.index("stack.build_layer(") < source.index("pulumi.export")


def test_the_mock_monitor_refuses_a_duplicate_urn_as_the_engine_does() -> None:
    """pulumi/pulumi v3.259.0, pkg/engine/lifecycletest TestDuplicateURN: "Duplicate resource URN
    '<urn>'; try giving it a unique name". Pulumi's own MockMonitor keeps the last one silently."""
    monitor = mocks.install("us-west-2", names.PROJECT, "dup")

    @pulumi.runtime.test
    def program() -> None:
        aws.s3.Bucket("same")
        aws.s3.Bucket("same", bucket_prefix="other-")

    with pytest.raises(Exception, match=r"Duplicate resource URN '.*::same'; try giving it a unique name"):
        program()
    assert [r.name for r in monitor.registrations.values()] == ["same"]


def test_two_runs_that_would_share_an_mpijob_exit_2_not_1(tmp_path: Path) -> None:
    """`a` + `b-run-001` and `a-b` + `run-001` make the same MPIJob (the same URN): config refuses it,
    naming the run id, before the program runs."""
    run = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "run-001", "stepSeconds": 2.0}
    values = {**MINIMAL, NS + "workloads": {"a": {**run, "runId": "b-run-001"}, "a-b": run}}
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_text(stack_yaml({"config": values}))
    err = io.StringIO()
    assert _plan(path, err) == 2
    assert err.getvalue().startswith("workloads.a-b.runId: the run's MPIJob would be named 'a-b-run-001-train'")


def test_without_the_config_rule_the_plan_fails_on_the_duplicate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mock monitor is the second line: with the rule switched off the plan fails (exit 1), as
    `pulumi up` would, instead of planning one MPIJob where two were asked for."""
    run = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "run-001", "stepSeconds": 2.0}
    values = {**MINIMAL, NS + "workloads": {"a": {**run, "runId": "b-run-001"}, "a-b": run}}
    monkeypatch.setattr(config.checks.runs, "run_objects", lambda workloads: [])
    with pytest.raises(Exception, match="Duplicate resource URN"):
        plan.run(values, "dup")
