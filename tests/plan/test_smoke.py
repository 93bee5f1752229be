from tests.conftest import MINIMAL, resources, run_plan


def test_minimal_stack_plans_one_node_group():
    plan = run_plan(MINIMAL)
    groups = resources(plan, "aws:eks/nodeGroup:NodeGroup")
    assert sorted(g["inputs"]["labels"]["llm-training-eks/node-group"] for g in groups) == ["system", "trn1"]
