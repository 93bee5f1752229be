"""Every refusal a config rule makes is a typed problem whose kind its producer stated.

A rule that still returned a plain `key.path: message` line, or raised a bare ValueError in a
validator, would be read back as kind `invalid` (`Problem.parsed`): CI's annotations would then
guess. The example stacks and the seeded mutants of tests/fuzz.py and tests/campaign/ (the same
generators the fuzz and campaign tests run) are validated as every offline command does, and
each problem they raise must be stated, not parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

import config
from config.problems import Problem, as_problem, problem
from config.stackfile import load_yaml, read_stack_file
from tests import fuzz
from tests.campaign import generate
from tests.conftest import EXAMPLE_STACKS, example_file

SEEDS = range(3)
PER_SEED = 150


def _parsed(values: Mapping[str, Any]) -> tuple[int, list[Problem]]:
    """How many problems validating `values` raised, and those whose kind was parsed from a line."""
    try:
        config.parse_stack_values(values)
    except config.ConfigError as e:
        typed = [p for p in e.problems if p.kind != "too-many"]
        return len(typed), [p for p in typed if p.parsed]
    return 0, []


def _mutants(seed: int) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for case in fuzz.cases(seed, PER_SEED):
        try:
            doc = load_yaml(case.text)
        except Exception:  # noqa: BLE001 - a text mutant the stack file reader refuses: no rule ran
            continue
        if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
            yield case.name, doc["config"]
    for stack in generate.stacks(seed, PER_SEED):
        yield from (stack.layers or {stack.name: stack.values}).items()


def test_a_plain_line_is_marked_parsed_and_a_stated_problem_is_not() -> None:
    assert as_problem("tags.a: bad").parsed
    stated = problem("tags.a", "invalid", "bad")
    assert not stated.parsed and as_problem(stated) is stated
    assert stated.with_line("tags.a: b").parsed is False and as_problem("x: y").with_line("x: z").parsed


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_example_stacks_raise_no_untyped_problem(stack: str) -> None:
    _, parsed = _parsed(read_stack_file(example_file(stack)))
    assert not parsed, parsed


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_and_campaign_mutants_raise_only_problems_of_a_stated_kind(seed: int) -> None:
    seen, parsed = 0, []
    for name, values in _mutants(seed):
        count, found = _parsed(values)
        seen += count
        parsed += [f"{name}: {p}" for p in found]
    assert seen, "the mutants raised no problem at all: the generators changed"
    assert not parsed, f"{len(parsed)} problem(s) of no stated kind:\n" + "\n".join(parsed[:20])
