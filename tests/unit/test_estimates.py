"""estimates/ from typed inputs alone: no stack file, no config model (the figures the plan and the
stack outputs show are held by test_cost.py, test_checkpoints.py and test_throughput.py through the
example stacks)."""

from __future__ import annotations

import pytest

from estimates import cost, model, step_time, throughput
from estimates.checkpoints import CheckpointInput, CheckpointSize, FileSystem, NotSized, plan
from facts import prices
from facts.names import NODE_GROUP_LABEL
from tools.plan import bill_from_plan

PRICES = cost.Prices()


def _run(**kw: object) -> cost.RunBill:
    base: dict[str, object] = dict(
        name="r", instance_type="trn1.32xlarge", nodes=4, steps=None, step_seconds=None, basis="b"
    )
    return cost.RunBill(**{**base, **kw})  # type: ignore[arg-type]


def test_a_run_with_steps_costs_its_hours_and_one_on_the_system_nodes_nothing() -> None:
    trained = cost.run_cost(_run(steps=1000, step_seconds=7.2), "us-west-2", PRICES)
    assert trained["hours"] == 2.0 and trained["total"] == 4 * 21.50 * 2 and trained["stepTimeBasis"] == "b"
    system = cost.run_cost(_run(steps=1000, step_seconds=7.2, on_system_nodes=True), "us-west-2", PRICES)
    assert system["total"] == 0.0 and system["onSystemNodes"] and "system nodes" in system["stepTimeBasis"]


def test_a_modeled_length_is_priced_and_a_server_by_the_hour_with_its_balancer() -> None:
    modeled = cost.run_cost(_run(modeled=(1800.0, "modeled: x")), "us-west-2", PRICES)
    assert modeled["total"] == round(4 * 21.50 * 0.5, 2) and modeled["stepTimeBasis"] == "modeled: x"
    served = cost.run_cost(_run(node_share=0.5, load_balancers=1, hourly_basis="serving"), "us-west-2", PRICES)
    assert served["total"] is None
    assert served["hourly"] == round(0.5 * 21.50 + prices.NETWORK_LOAD_BALANCER_HOURLY, 4)
    assert served["stepTimeBasis"].startswith("serving; its internal NLB $0.0225/h included")


def test_stack_items_come_in_the_bills_order_and_the_plan_sorts_by_name() -> None:
    bill = cost.StackBill(
        "us-west-2", 1, 2, (cost.NodeCount("b", "m6i.xlarge", 1), cost.NodeCount("a", "m6i.xlarge", 2))
    )
    assert [i.name for i in cost.items(bill, PRICES)] == [
        "eks-control-plane",
        "nat-gateways",
        "node-group/b",
        "node-group/a",
    ]
    groups = [{"type": "aws:eks/nodeGroup:NodeGroup", "inputs": {"labels": {NODE_GROUP_LABEL: n}}} for n in "ba"]
    planned = bill_from_plan([*groups, {"type": "aws:ec2/natGateway:NatGateway"}], "us-west-2")
    assert planned.clusters == 0 and planned.nat_gateways == 1
    assert [g.name for g in planned.node_groups] == ["a", "b"]
    assert cost.items(cost.StackBill("us-west-2"), PRICES) == []  # a cluster or runs layer bills nothing


def test_checkpoints_are_sized_only_where_the_recipe_sizes_them() -> None:
    fs = FileSystem(1200, True, 250)
    assert fs.mb_per_second == pytest.approx(1200 / 1024 * 250)
    assert FileSystem(1200, False, 250).mb_per_second == pytest.approx(1200 / 1024 * 200)
    sized = CheckpointInput(CheckpointSize(12, "x", kept_beyond=1), 10**9, 2, 100)
    p = plan(sized, fs, 10.0)
    assert p is not None and p.size_bytes == 12 * 10**9 and p.kept == 3 and sized.size_bytes == p.size_bytes
    assert plan(CheckpointInput(NotSized("no"), 10**9, 2, 100), fs) is None
    assert plan(CheckpointInput(CheckpointSize(12, "x"), None, 2, 100), fs) is None


def test_step_time_is_configured_then_published_then_unknown() -> None:
    assert step_time.step_time(3.0, (5.0, "published"), "k") == (3.0, "configured")
    assert step_time.step_time(None, (5.0, "published"), "k") == (5.0, "published")
    assert step_time.step_time(None, None, "workloads.x.stepSeconds")[1].endswith(
        "set workloads.x.stepSeconds from a measured step"
    )
    source = step_time.PublishedStepTime("s", "basis", lambda shape, itype: 2.0 if itype == "a" else None)
    assert step_time.estimated(source, None, "a") == (2.0, "basis") and step_time.estimated(source, None, "b") is None
    assert step_time.published_setup(source, None, "a") is None
    assert step_time.estimated(step_time.UnknownStepTime("why"), None, "a") is None


def test_throughput_of_a_run_that_trains_nothing_has_no_step() -> None:
    work = throughput.RunWork(nodes=2, tokens_per_step=1000, trains=False, support="current")
    out = throughput.plan(work, "trn1.32xlarge", 10.0, "configured", None)
    assert out == {"stepTimeBasis": "it trains nothing", "support": "current", "loads": {}}


def test_a_decoders_parameters_and_padded_vocabulary() -> None:
    """Llama 2 7B: 6.74 billion parameters (untied embedding); GPT-2's vocabulary padded to 128 x TP 8.
    (Its FLOPs per token are estimates/flops.py's: tests/unit/test_flops.py.)"""
    assert model.llama_parameters(model.DecoderShape(4096, 11008, 32, 32, 32, 4096)) == 6_738_415_616
    assert model.padded_vocab(50257, 128, 8) == 51200
