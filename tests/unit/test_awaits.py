"""facts.awaits, the one rule of what `pulumi up` waits for, held to pulumi-kubernetes v4.32.0
(tests/upstream/pulumi-kubernetes-4.32.0-await.yaml: metadata/annotations.go, overrides.go,
await/job.go), and every reader of the rule in the project asking it rather than the annotations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from facts import awaits
from tests import upstream

FACTS = upstream.facts("pulumi-kubernetes-4.32.0-await")
ROOT = Path(__file__).resolve().parents[2]


def obj(kind: str, **notes: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "x", "annotations": notes}}


def test_the_annotations_are_the_providers() -> None:
    assert FACTS["skip_await_annotation"] == awaits.SKIP_AWAIT
    assert FACTS["skip_await_value"] == awaits.TRUE
    assert FACTS["wait_for_annotation"] == awaits.WAIT_FOR
    assert awaits.TIMEOUT in FACTS["timeout_precedence"]
    assert set(FACTS["awaited_to_completion_without_annotation"]) < set(awaits.COMPLETION_KINDS)


@pytest.mark.parametrize(
    ("o", "expected"),
    [
        (obj("Job"), True),
        (obj("Job", **{awaits.SKIP_AWAIT: "true"}), False),
        # IsAnnotationTrue compares with "true" exactly: any other spelling is awaited.
        (obj("Job", **{awaits.SKIP_AWAIT: "True"}), True),
        (obj("MPIJob"), False),
        (obj("MPIJob", **{awaits.WAIT_FOR: "condition=Succeeded"}), True),
        (obj("MPIJob", **{awaits.WAIT_FOR: "condition=Succeeded", awaits.SKIP_AWAIT: "true"}), False),
        (obj("Deployment"), False),
        ({"kind": "Job", "metadata": {"name": "x"}}, True),
    ],
)
def test_what_pulumi_up_waits_to_finish(o: dict[str, Any], expected: bool) -> None:
    assert awaits.awaits_completion(o) is expected


def test_the_timeout_is_read_as_seconds() -> None:
    assert awaits.timeout_seconds(obj("Job", **{awaits.TIMEOUT: "900"})) == 900
    assert awaits.timeout_seconds(obj("Job")) is None


def test_no_reader_spells_the_rule_again() -> None:
    """Code outside facts/awaits.py names the annotations through it, so the rule cannot split
    again (it was written in five places: the product's admission, make diff, the plan's lines,
    the day-2 and the launch tests)."""
    spelled = re.compile(r'"pulumi\.com/(skipAwait|waitFor|timeoutSeconds)"')
    found = []
    for folder in ("workloads", "tools", "infra", "config", "tests/plan", "tests/launch"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                # Tests may read a rendered annotation by its name: only a rule (a comparison) counts.
                if spelled.search(line) and ("!=" in line or "==" in line or " in " in line) and "assert" not in line:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "\n".join(found)
