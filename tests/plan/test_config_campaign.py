"""The seeded campaign of whole stacks (tests/campaign/): combinations legal key by key.

Every generated stack exits 0 or 2 (never 1), and a 2 comes with one short line per problem naming
a key. Of the accepted stacks, those with the most moves are planned in full, layer splits through
their lower stacks, until the chunk's CPU budget is spent; every plan must exit 0 (or 2 naming a
key, for what only a lower stack's outputs tell) and pass the oracle: botocore's models, the EC2,
EKS, FSx and Kueue limits of tests/upstream/, Kubernetes' name and quantity rules, nccl-tests'
buffers, Megatron's head split, and the settings the stack file asked for, applied.

    CAMPAIGN_SEED=21 CAMPAIGN_STACKS=240 CAMPAIGN_CPU_SECONDS=50   the defaults in `make test`
    CAMPAIGN_STACKS=4000 CAMPAIGN_CPU_SECONDS=3000 .venv/bin/pytest -q -n auto tests/plan/test_config_campaign.py
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests import fuzz
from tests.campaign import generate, oracle
from tests.conftest import stack_yaml
from tools import plan as plan_mod

SEED = int(os.environ.get("CAMPAIGN_SEED", "21"))
STACKS = int(os.environ.get("CAMPAIGN_STACKS", "240"))
CPU_SECONDS = float(os.environ.get("CAMPAIGN_CPU_SECONDS", "50"))
"""CPU seconds of the whole campaign, split over its chunks (planning stops when a chunk's is spent)."""
CHUNKS = 4


def _write(tmp: Path, stack: generate.Stack) -> Path:
    files = stack.layers or {stack.name: stack.values}
    for name, values in files.items():
        (tmp / f"Pulumi.{name}.yaml").write_text(stack_yaml({"config": values}))
    return tmp / f"Pulumi.{stack.name}.yaml"


def _checked(tmp: Path, stack: generate.Stack) -> tuple[int, list[str]]:
    """Exit code of reading and validating every file of the stack, and how it breaks the contract."""
    broken, codes = [], []
    for name, values in (stack.layers or {stack.name: stack.values}).items():
        case = fuzz.Case(name, stack_yaml({"config": values}))
        out = fuzz.check_file(case, tmp)
        broken += fuzz.contract_problems(case, out, f"Pulumi.{name}.yaml")
        codes.append(out.code)
    return max(codes), broken


def _planned(path: Path, stack: generate.Stack) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = plan_mod.main(["--config-file", str(path), "--format", "json"], stdout=out, stderr=err)
    if code == 2:
        lines = err.getvalue().splitlines()
        return code, fuzz.contract_problems(
            fuzz.Case(stack.name, ""), fuzz.Outcome(2, lines, stack.values, 0.0), path.name
        )
    if code != 0:
        return code, [f"plan exit {code}: {err.getvalue()[-400:]}"]
    plan: dict[str, Any] = json.loads(out.getvalue())
    return code, oracle.problems(plan, stack.values)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_stacks_are_refused_naming_a_key_or_planned_as_the_destination_takes_them(
    chunk: int, tmp_path: Path
) -> None:
    start = time.process_time()
    broken: list[str] = []
    accepted: list[tuple[generate.Stack, Path]] = []
    refused = 0
    for stack in generate.stacks(SEED * 1000 + chunk, STACKS // CHUNKS):
        path = _write(tmp_path, stack)
        code, found = _checked(tmp_path, stack)
        refused += code == 2
        if code == 0:
            accepted.append((stack, path))
        broken += [f"{stack.name} {stack.moves}: {p}" for p in found]
    planned = 0
    for stack, path in sorted(accepted, key=lambda a: -len(a[0].moves)):
        if time.process_time() - start > CPU_SECONDS / CHUNKS:
            break
        code, found = _planned(path, stack)
        planned += 1
        broken += [f"{stack.name} {stack.moves}: {p}" for p in found]
    print(f"chunk {chunk}: {STACKS // CHUNKS} stacks, {refused} refused, {len(accepted)} accepted, {planned} planned")
    assert planned or not accepted, "the budget planned nothing"
    assert not broken, f"{len(broken)} problem(s):\n" + "\n".join(broken[:25])
