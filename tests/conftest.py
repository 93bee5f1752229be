"""Shared fixtures. Every program run goes through `tools.plan.run`, which installs fresh
Pulumi mocks (the same ones the offline plan uses) for each run.

Layout: `unit/` pure functions (facts, config, builders, policy rules, cost, preflight);
`plan/` the program under mocks, by concern; `repo/` the README, workflows, project file and
code structure; `golden/` the rendered Kubernetes objects and URNs of every example stack.

The subjects are the project's stacks: the examples in examples/ and the project's own dev at the
root (tools.cli.project_stacks); "example stacks" below means all of them. A team's own stack files
at the root are not test cases, except those the team keeps snapshots of (tests/snapshots/, `make
snapshot`); and `--stack NAME` in a test never reaches them (`_examples_only`).
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.checks import capacity
from config.stackfile import read_stack_file
from tools import cli, snapshot
from tools import plan as plan_mod

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = cli.EXAMPLES_DIR
GOLDEN = ROOT / "tests" / "golden"
EXAMPLE_FILES = cli.project_stacks()
"""The file of each example stack, by name (examples/Pulumi.<name>.yaml, and the root's Pulumi.dev.yaml)."""
EXAMPLE_STACKS = list(EXAMPLE_FILES)
LAYERED_STACKS = [s for s in EXAMPLE_STACKS if read_stack_file(EXAMPLE_FILES[s]).get("llm-training-eks:layer")]
"""Stacks of one layer each (`layer: aws | cluster | runs`); tests/plan/test_layers.py shows that
the three layers of trn1-llama2 declare exactly what the all-in-one trn1-llama2 does."""
ALL_IN_ONE_STACKS = [s for s in EXAMPLE_STACKS if s not in LAYERED_STACKS]

API_PATH = {"publicAccessCidrs": ["203.0.113.10/32"]}
"""A path to the Kubernetes API (config.checks.api_path): every stack needs one."""
BASE = {"aws:region": "us-west-2", "llm-training-eks:cluster": API_PATH}
"""The smallest valid stack: a region and a path to the API."""
MINIMAL = {
    **BASE,
    "llm-training-eks:nodeGroups": [
        {"name": "trn1", "instanceType": "trn1.32xlarge", "desiredSize": 2, "availabilityZone": "us-west-2d"}
    ],
    # Given once a node group names its AZ (config.placement).
    "llm-training-eks:network": {"availabilityZones": ["us-west-2d", "us-west-2a"]},
    "llm-training-eks:storage": {"availabilityZone": "us-west-2d"},
}


CONFIG_NOW = dt.datetime(2026, 7, 1, 12, 0, tzinfo=dt.UTC)
"""When config is judged in tests (config.checks.capacity.utc_now): the example stacks and the preflight
fixtures carry dated Capacity Blocks, which a real clock would one day find ended; a test about the clock
sets its own."""


@pytest.fixture(autouse=True)
def _config_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capacity, "utc_now", lambda: CONFIG_NOW)


def placed(*azs: str) -> dict[str, Any]:
    """The `network` and `storage` sections (camelCase, unflattened) that a config whose node groups
    name these AZs must give (config.placement): the VPC's AZs, padded to two, and the file
    system in the first."""
    region = azs[0][:-1]
    pad = [f"{region}{x}" for x in "abc" if f"{region}{x}" not in azs]
    return {"network": {"availabilityZones": [*azs, *pad][: max(2, len(azs))]}, "storage": {"availabilityZone": azs[0]}}


def placed_values(*azs: str) -> dict[str, Any]:
    """`placed`, as flat stack-file keys."""
    return {f"llm-training-eks:{k}": v for k, v in placed(*azs).items()}


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by two keys twice: stack files take no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def stack_yaml(doc: Any) -> str:
    """YAML text of a stack file (or any document) as a person would write it: no anchors."""
    return yaml.dump(doc, Dumper=_NoAliasDumper)


def run_plan(values: dict[str, Any], stack: str = "test", deployed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan of a config dict (flat stack-file keys); a layered stack's lower stack is the example's.
    `deployed`: the plan it updates (launch-template versions continue from it)."""
    return plan_mod.run(values, stack, EXAMPLES, deployed=deployed)


def example_file(stack: str) -> Path:
    """The file of an example stack (the dev stack's is at the root, the others in examples/)."""
    return EXAMPLE_FILES[stack]


def stack_values(stack: str) -> dict[str, Any]:
    """The config of an example stack."""
    return read_stack_file(example_file(stack))


_plans: dict[str, dict[str, Any]] = {}


def stack_plan(stack: str) -> dict[str, Any]:
    """The plan of an example stack (computed once per test session)."""
    if stack not in _plans:
        _plans[stack] = run_plan(stack_values(stack), stack)
    return _plans[stack]


def resources(plan: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_]


def by_urn(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan["resources"]}


def deleted_after(urns: dict[str, dict[str, Any]], urn: str) -> set[str]:
    """Every resource a destroy deletes after `urn`: its dependencies, its ancestors and theirs,
    transitively."""
    seen: set[str] = set()
    todo = [urn]
    while todo:
        u = todo.pop()
        r = urns.get(u)
        if r is None:
            continue
        # A destroy deletes a child before its parent, and the parent before what it depends on.
        parent = [r["parent"]] if r.get("parent") else []
        for d in [*r.get("dependencies", []), *r.get("propertyDependencies", {}).values(), *parent]:
            for x in d if isinstance(d, list) else [d]:
                if x not in seen:
                    seen.add(x)
                    todo.append(x)
    return seen


def plan_exit(config: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    """Exit code and stderr of the offline plan of a stack file holding `config`."""
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(stack_yaml({"config": config}))
    out, err = io.StringIO(), io.StringIO()
    code = plan_mod.main(["--config-file", str(path)], stdout=out, stderr=err)
    return code, err.getvalue()


@pytest.fixture(scope="session")
def _no_team_stacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("no-team-stacks")


@pytest.fixture(autouse=True)
def _examples_only(_no_team_stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--stack NAME` means the example in every test: a team's stack files at the root (say a
    `Pulumi.p5en.yaml` started from the example) must not change what the tests see."""
    monkeypatch.setattr(cli, "TEAM_DIR", _no_team_stacks)


def team_stack_lines() -> list[str]:
    """Which of a team's stacks at the root the suite holds to snapshots, and which it leaves alone."""
    team = cli.team_stacks()
    held = [s for s in team if snapshot.snapshot_dir(s).is_dir()]
    lines = [f"your stacks held to snapshots (tests/snapshots): {', '.join(held)}"] if held else []
    if set(team) - set(held):
        lines.append(f"your stacks not tested: {', '.join(sorted(set(team) - set(held)))} (make snapshot STACK=<name>)")
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Said at the end of every run (also with -q), so a team's stack is never silently left out."""
    for line in team_stack_lines():
        terminalreporter.write_line(line)


@pytest.fixture(params=ALL_IN_ONE_STACKS)
def example_stack(request: pytest.FixtureRequest) -> str:
    """Each all-in-one example stack, for the checks of one concern over a whole platform (the
    layered stacks hold the same resources, split; see LAYERED_STACKS)."""
    return str(request.param)
