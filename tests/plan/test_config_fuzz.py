"""The seeded fuzz run: mutated stack files keep the contract (tests/fuzz.py).

Every mutant exits 0 or 2, quickly, with at most MAX_PROBLEMS + 1 short lines each naming a key
(or the file), no traceback, and the engine's view of the same values agrees. Of each chunk's
accepted mutants, those most likely to carry a bad value (hostile values, unicode, boundary numbers
first) are planned in full: the plan must exit 0 (or 2 naming a key, for what only a lower stack's
outputs can tell) and nothing it declares may break botocore's models, the regions and AZs that
exist, or Kubernetes' name and label rules.

    FUZZ_SEED=15 FUZZ_CASES=400 FUZZ_PLANS=16   the defaults in `make test`
    FUZZ_CASES=8000 FUZZ_PLANS=400 .venv/bin/pytest -q -n auto tests/plan/test_config_fuzz.py   a long run
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import fuzz

SEED = int(os.environ.get("FUZZ_SEED", "15"))
CASES = int(os.environ.get("FUZZ_CASES", "400"))
PLANS = int(os.environ.get("FUZZ_PLANS", "16"))
CHUNKS = 8


def _priority(case: fuzz.Case) -> int:
    """Plan first the accepted mutants most likely to carry a value AWS or Kubernetes refuses."""
    kinds = [step.split()[0] for step in case.steps]
    return -sum(
        {"interesting": 4, "unicode": 3, "long": 2, "boundary": 2, "dup": 2, "retype": 1}.get(k, 0) for k in kinds
    )


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_mutated_stack_files_keep_the_contract(chunk: int, tmp_path: Path) -> None:
    work = fuzz.workdir(tmp_path)
    broken: list[str] = []
    accepted: list[tuple[fuzz.Case, fuzz.Outcome]] = []
    for case in fuzz.cases(SEED * 1000 + chunk, CASES // CHUNKS):
        out = fuzz.check_file(case, work)
        found = fuzz.contract_problems(case, out, f"Pulumi.{case.name}.yaml")
        if out.values is not None and not fuzz.engine_agrees(out.values):
            found.append("the engine's view of the same values is judged differently")
        if out.code == 0:
            accepted.append((case, out))
        if found:
            broken.append(f"{case.name} {case.steps}: {'; '.join(found)[:500]}")
    for case, out in sorted(accepted, key=lambda c: _priority(c[0]))[: PLANS // CHUNKS]:
        code, err, plan = fuzz.plan_of(case, work)
        found = []
        if code == 2:
            found += fuzz.contract_problems(case, fuzz.Outcome(2, err.splitlines(), out.values, 0.0), case.name)
        elif code != 0 or plan is None:
            found.append(f"plan exit {code}: {err[:300]}")
        else:
            found += [f"planned, but refused by AWS or Kubernetes: {r}" for r in fuzz.refused_by_real_systems(plan)]
        if found:
            broken.append(f"{case.name} {case.steps}: {'; '.join(found)[:500]}")
    assert not broken, f"{len(broken)} mutant(s) break the contract:\n" + "\n".join(broken[:20])
