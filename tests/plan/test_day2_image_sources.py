"""Day 2 on image builds: a stack that stops building an image keeps its protected sources bucket.

Before, when no run built an image any more (a run pinned to an `imageTag`, or the last built run
removed), the CodeBuild projects, their roles and the protected `images-sources` bucket left the
program; the engine refuses to delete a resource whose state is protected ("cannot be deleted
because it is protected", pulumi/pulumi v3.259.0 pkg/resource/deploy/step.go, DeleteStep and
deleteProtectedError), so preview and up stopped there and nothing of the edit deployed. Now the
sources bucket lives with the registry, as the ECR repositories do: declared in every stack that
has the registry, whether a run builds now or not.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "p4de-nemo"
BUCKET = "aws:s3/bucket:Bucket"
PROJECT = "aws:codebuild/project:Project"


def pinned(stack: str, workload: str, tag: str) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    values["llm-training-eks:workloads"][workload]["imageTag"] = tag
    return run_plan(values, stack)


def test_pinning_the_last_built_image_deletes_nothing_protected() -> None:
    before = stack_plan(STACK)
    assert any(r["type"] == PROJECT for r in before["resources"]), "the stack builds an image before"
    after = pinned(STACK, "nemo", "24.07")
    update = day2.diff(before, after)
    assert update.blocked == [], update.blocked
    (bucket,) = [s for u, s in update.steps.items() if s.type == BUCKET and "images-sources" in u]
    assert (bucket.op, bucket.protected) == ("same", True)
    # What no run needs any more goes: the projects and their roles are not protected.
    assert {s.op for s in update.steps.values() if s.type == PROJECT} == {"delete"}


def test_building_again_later_reuses_the_bucket() -> None:
    """The next edit (the pin lifted): the projects come back on the same bucket."""
    after = stack_plan(STACK)
    update = day2.diff(pinned(STACK, "nemo", "24.07"), after)
    assert update.blocked == []
    (bucket,) = [s for u, s in update.steps.items() if s.type == BUCKET and "images-sources" in u]
    assert bucket.op == "same"
    assert {s.op for s in update.steps.values() if s.type == PROJECT} == {"create"}
