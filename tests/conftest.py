"""Shared fixtures. Every program run goes through `tools.plan.run`, which installs fresh
Pulumi mocks (the same ones the offline plan uses) for each run.

Layout: `unit/` pure functions (facts, config, builders, policy rules, cost, preflight);
`plan/` the program under mocks, by concern; `repo/` the README, workflows, project file and
code structure; `golden/` the rendered Kubernetes objects and URNs of every example stack.
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
from tools import plan as plan_mod

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
EXAMPLE_STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))
LAYERED_STACKS = [s for s in EXAMPLE_STACKS if read_stack_file(ROOT / f"Pulumi.{s}.yaml").get("llm-training-eks:layer")]
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


def run_plan(values: dict[str, Any], stack: str = "test") -> dict[str, Any]:
    """The plan of a config dict (flat stack-file keys)."""
    return plan_mod.run(values, stack)


def stack_values(stack: str) -> dict[str, Any]:
    return read_stack_file(ROOT / f"Pulumi.{stack}.yaml")


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


@pytest.fixture(params=ALL_IN_ONE_STACKS)
def example_stack(request: pytest.FixtureRequest) -> str:
    """Each all-in-one example stack, for the checks of one concern over a whole platform (the
    layered stacks hold the same resources, split; see LAYERED_STACKS)."""
    return str(request.param)
