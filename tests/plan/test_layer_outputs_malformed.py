"""The runs layer over malformed cluster-layer outputs refuses (exit 2, naming
the output key) or plans (exit 0); it never crashes (exit 1).

Before, a `platform` output without the system node group passed the contract and the program
failed later with `KeyError: 'system'` (exit 1). The outputs here are what `pulumi stack output
--json` of the cluster stack prints (pulumi/pulumi v3.259.0 `pulumi stack output --json`: one
JSON object, outputs by name), made from the offline plan of trn1-llama2-cluster and then broken
one key at a time: removed, or given a value of another JSON kind.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from facts.names import SYSTEM_NODE_GROUP
from infra import layers
from tests.conftest import stack_plan
from tools import plan as plan_mod

CLUSTER = "trn1-llama2-cluster"
RUNS = "trn1-llama2-runs"


def platform_keys() -> list[str]:
    platform = stack_plan(CLUSTER)["outputs"][layers.PLATFORM_OUTPUT]
    groups = platform["nodeGroups"]
    own = [f"nodeGroups.{SYSTEM_NODE_GROUP}.{k}" for k in sorted(groups[SYSTEM_NODE_GROUP])]
    return [*sorted(platform), *(f"nodeGroups.{g}" for g in sorted(groups)), *own]


def wrong_kind(value: Any) -> Any:
    """A value of another JSON kind than `value`."""
    if isinstance(value, dict):
        return "not-a-map"
    if isinstance(value, str):
        return {"not": "a string"}
    return ["not", "a", "scalar"]


def broken(path: str, how: str) -> dict[str, Any]:
    outputs = copy.deepcopy(stack_plan(CLUSTER)["outputs"])
    node = outputs[layers.PLATFORM_OUTPUT]
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    if how == "missing":
        del node[last]
    else:
        node[last] = wrong_kind(node[last])
    return outputs


def plan_runs(outputs: dict[str, Any], tmp_path: Path) -> tuple[int, str]:
    lower = tmp_path / "cluster-outputs.json"
    lower.write_text(json.dumps(outputs))
    out, err = io.StringIO(), io.StringIO()
    code = plan_mod.main(["--stack", RUNS, "--format", "json", "--lower-outputs", str(lower)], out, err)
    return code, err.getvalue()


@pytest.mark.parametrize("how", ["missing", "wrong-kind"])
@pytest.mark.parametrize("path", platform_keys())
def test_malformed_platform_output_refuses_or_plans_never_crashes(path: str, how: str, tmp_path: Path) -> None:
    code, err = plan_runs(broken(path, how), tmp_path)
    assert code in (0, 2), err
    if code == 2:  # one line per problem, each naming its key (the output's, or a run's it breaks)
        assert err.strip() and all(": " in line for line in err.strip().splitlines()), err


def test_no_system_node_group_is_refused_naming_it(tmp_path: Path) -> None:
    """The runs layer places MPI launchers and CPU runs on the system group and sizes start-up on
    it: without it nothing of the layer can be planned, so the contract refuses it by name."""
    code, err = plan_runs(broken(f"nodeGroups.{SYSTEM_NODE_GROUP}", "missing"), tmp_path)
    assert code == 2, err
    assert f"platform.nodeGroups.{SYSTEM_NODE_GROUP}: missing" in err, err
    assert "Traceback" not in err
