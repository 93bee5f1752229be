"""Day-2 sequences: the tests plan a stack before and after an edit and diff the two plans the
way a real `pulumi up` would go. The diff is the product's (`make diff`): tools/offline/plan_diff.py,
strict here (a changed type without replacement rules fails the test: NoFacts)."""

from tools.offline.plan_diff import NoFacts, Step, Update, conflicting_creates, diff

__all__ = ["NoFacts", "Step", "Update", "conflicting_creates", "diff"]
