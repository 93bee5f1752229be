"""The fabric acceptance run's modeled length and cost (estimates/acceptance.py): it counts
the all-reduces of the commands the launcher really runs, as nccl-tests v2.18.5 and nccom-test
(Neuron SDK 2.32.0) count them (tests/upstream/all-reduce-iterations.yaml), at the floor's bus
bandwidth; the plan prints it and its cost; a run too long for its job's timeout is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import config
from config.workloads.fabric import CHECKS_SECONDS
from estimates import acceptance as fabric_time
from facts import fabric, prices
from facts import instances as catalog
from facts.fabric import size_bytes
from tests import upstream
from tests.conftest import plan_exit, stack_plan, stack_values
from tests.plan.test_fabric_acceptance import STACKS, _values, acceptance_job, launcher_script
from tools.offline.plan_table import render_table

FACTS = upstream.facts("all-reduce-iterations")


def test_the_tools_counts_are_upstreams() -> None:
    nccl, nccom = FACTS["nccl_tests"], FACTS["nccom_test"]
    assert nccl["defaults"]["warmup_iters"] == fabric.NCCL_TESTS_WARMUP
    assert (
        nccom["defaults"]["iters"],
        nccom["defaults"]["warmup_iters"],
    ) == (fabric.NCCOM_TEST_ITERS, fabric.NCCOM_TEST_WARMUP)
    assert nccom["gb"] == fabric.NCCOM_TEST_GIB and nccl["gb"] == 10**9
    assert nccl["size_units"] == {u: size_bytes(f"1{u}") for u in "GMK"}
    gated = fabric_time.nccl_tests("gate", (1 << 30,), 50, 16)
    assert gated.per_size == eval(nccl["per_size"], {}, {**nccl["defaults"], "iters": 50})
    neuron = fabric_time.nccom_test("gate", (1 << 30,), 128)
    assert neuron.per_size == eval(nccom["per_size"], {}, nccom["defaults"])
    assert "normally lasting seconds" in FACTS["dcgm"]["level_1"]


def test_a_ring_all_reduce_at_the_floor() -> None:
    """2 x p6-b200 (16 ranks), 16 GiB, 105 all-reduces at 320.4 GB/s: each moves 16 GiB x 30/16."""
    gate = fabric_time.nccl_tests("gate", (16 << 30,), 50, 16)
    assert gate.seconds(320.4) == pytest.approx(105 * (16 << 30) * 30 / 16 / 320.4e9)
    neuron = fabric_time.nccom_test("gate", (2 << 30,), 128)
    assert neuron.seconds(50) == pytest.approx(25 * 2 * 127 / 128 * 2 / 50)
    assert fabric_time.doubling(8 << 20, 16 << 30)[-1] == 16 << 30
    assert len(fabric_time.doubling(8 << 20, 16 << 30)) == 12


def _rendered(script: str) -> list[tuple[int, int, int | None, int]]:
    """(first size, last size, -n or None, ranks) of every all-reduce command of a launcher script."""
    found = []
    for m in re.finditer(r"-np (\d+) [^\n]*?all_reduce_perf -b (\S+) -e (\S+) -f 2 -g 1 -c 1 -n (\d+)", script):
        np_, b, e, n = m.groups()
        found.append((size_bytes(b), size_bytes(e), int(n), int(np_)))
    for m in re.finditer(r"nccom-test -r (\d+)(?: -N \d+)? -b (\S+) -e (\S+) (?!-n)", script):
        r, b, e = m.groups()
        found.append((size_bytes(b), size_bytes(e), None, int(r)))
    return found


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_model_counts_the_commands_the_launcher_runs(stack: str) -> None:
    """Sizes, iterations and ranks of each all_reduce_perf / nccom-test in the rendered launcher
    script are the model's (none run with an -n or -w of their own on Neuron: the defaults hold)."""
    (name, run) = next(iter(stack_values(stack)["llm-training-eks:workloads"].items()))
    plan = stack_plan(stack)
    model = next(r for r in plan["resources"] if r["name"] == name and r["type"].endswith(":Workload"))
    rendered = _rendered(launcher_script(acceptance_job(stack)))
    cfg = config.parse(config.from_stack_values(stack_values(stack)))
    typed = cfg.workloads[name]
    instance = catalog.get(next(g.instance_type for g in cfg.node_groups if g.name == run["nodeGroup"]))
    length = typed.length_on(instance)
    want = [
        (c.sizes[0], c.sizes[-1], None if c.unit == fabric.NCCOM_TEST_GIB else _iters(c), c.ranks)
        for c in length.collectives
    ]
    assert sorted(rendered) == sorted(want)
    assert model["inputs"]["throughput"]["acceptance"] == length.as_dict()
    assert 0 < length.seconds < CHECKS_SECONDS


def _iters(c: fabric_time.Collectives) -> int:
    return (c.per_size - fabric.NCCL_TESTS_WARMUP) // 2 - 2


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_plan_prints_the_length_and_the_cost(stack: str) -> None:
    plan = stack_plan(stack)
    (run,) = [r for r in plan["cost"]["trainingRuns"] if r["name"] == "fabric"]
    itype = stack_values(stack)["llm-training-eks:nodeGroups"][0]["instanceType"]
    price = prices.EC2_ON_DEMAND_HOURLY[itype]
    assert run["total"] == pytest.approx(run["nodes"] * price * run["modeledSeconds"] / 3600, abs=0.01)
    assert run["total"] > 0 and run["stepTimeBasis"].startswith("modeled: ")
    assert plan["outputs"]["runCosts"][run["name"]] == run["total"]
    table = render_table(plan)
    assert f"acceptance run {run['name']}: {run['nodes']} x {itype} for ~{run['modeledSeconds']:,.0f} s" in table
    assert f"${run['total']:,.2f}" in table
    assert "acceptance: ~" in table and "awaited at most 3,600 s" in table


def test_an_acceptance_longer_than_its_timeout_is_refused(tmp_path: Path) -> None:
    """16G on p5 against a floor of 3 GB/s: ~11 s per all-reduce at the floor, 105 in the gate and
    45 per size of the sweep (at 20 GB/s it fits)."""
    slow = _values("fabric-gpu", "p5.48xlarge", healthCheck={"minBusBandwidthGBPerSecond": 3})
    code, err = plan_exit(slow, tmp_path)
    assert code == 2 and "workloads.fab.healthCheck.messageSize: 16G takes ~" in err, err
    assert f"more than the {CHECKS_SECONDS:,} s" in err and "Traceback" not in err
    fits = _values("fabric-gpu", "p5.48xlarge", healthCheck={"minBusBandwidthGBPerSecond": 20})
    assert plan_exit(fits, tmp_path) == (0, "")
