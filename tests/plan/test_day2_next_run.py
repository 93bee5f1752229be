"""Day 2: the next training run under a server that serves the previous one, and a conversion
on a training group scaled to zero.

Before, bumping the trained workload's `runId` moved the server's conversion to the new,
unfinished run: the conversion Job, awaited by pulumi-kubernetes (a Job is ready once it
succeeds; pulumi-kubernetes v4.32.0 `provider/pkg/await`, unless `pulumi.com/skipAwait`:
tests/upstream/pulumi-kubernetes-4.32.0-await.yaml), waited `waitForRunMinutes` and `pulumi up`
failed until that run ended, and the server's Deployment rolled to a model folder that did not
exist yet. Now a server that follows its workload serves the newest converted run through a
stable link, the conversion of a run it did not pin is never awaited, and the Deployment is
left alone. An awaited conversion (a pinned run) runs where the node group has nodes.
"""

from __future__ import annotations

import copy
from typing import Any

from facts import awaits
from tests.conftest import plan_exit, run_plan, stack_plan, stack_values
from tests.plan import day2

STACK = "p5-train-serve"


def edited(edit: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(STACK))
    edit(values)
    return values


def next_run(values: dict[str, Any]) -> None:
    values["llm-training-eks:workloads"]["llama"]["runId"] = "run-002"


def kind_named(plan: dict[str, Any], kind: str, part: str) -> list[dict[str, Any]]:
    return [
        r for r in plan["resources"] if r["type"] == f"kubernetes:{kind}" and part in r["inputs"]["metadata"]["name"]
    ]


def awaited(resource: dict[str, Any]) -> bool:
    return awaits.awaits_completion(resource["inputs"])


def test_the_next_training_run_leaves_the_server_serving() -> None:
    before = stack_plan(STACK)
    after = run_plan(edited(next_run), STACK)
    update = day2.diff(before, after)
    (deployment,) = kind_named(after, "apps/v1:Deployment", "chat-serve")
    # The server keeps its pods: no rollout to a folder the unfinished run has not written.
    assert update.steps[deployment["urn"]].op == "same", update.steps[deployment["urn"]]
    # Whatever the update creates for the new run, `pulumi up` waits on none of it.
    created = {u for u in update.of("create")}
    waits = [r["urn"] for r in after["resources"] if r["urn"] in created and r["type"].startswith("kubernetes:")]
    waits = [u for u in waits if awaited(next(r for r in after["resources"] if r["urn"] == u))]
    jobs = [u for u in waits if "batch/v1:Job" in u]
    assert not jobs, jobs


def test_a_followed_run_is_converted_without_an_await() -> None:
    plan = stack_plan(STACK)
    (job,) = kind_named(plan, "batch/v1:Job", "chat-convert")
    assert not awaited(job)
    script = job["inputs"]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    # The newest finished run becomes the served one once its folder is whole.
    assert "ln -sfn" in script and "/models/llama-run-001" in script


def test_a_pinned_run_is_awaited_where_there_are_nodes() -> None:
    def pinned_at_zero(values: dict[str, Any]) -> None:
        values["llm-training-eks:workloads"]["chat"]["model"]["runId"] = "run-001"
        values["llm-training-eks:workloads"]["chat"]["nodeGroup"] = "serve"
        values["llm-training-eks:nodeGroups"][0]["desiredSize"] = 0
        values["llm-training-eks:nodeGroups"][0]["maxSize"] = 2
        values["llm-training-eks:nodeGroups"].append(
            {**values["llm-training-eks:nodeGroups"][0], "name": "serve", "desiredSize": 1, "maxSize": 1}
        )

    plan = run_plan(edited(pinned_at_zero), STACK)
    (job,) = kind_named(plan, "batch/v1:Job", "chat-convert")
    # The training group has no node: the awaited conversion runs on the server's group, which does.
    assert awaited(job)
    selector = job["inputs"]["spec"]["template"]["spec"]["nodeSelector"]
    assert "serve" in selector.values(), selector
    (deployment,) = kind_named(plan, "apps/v1:Deployment", "chat-serve")
    command = deployment["inputs"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[2].endswith("/models/llama-run-001"), command


def test_a_wait_without_a_pinned_run_is_refused(tmp_path: Any) -> None:
    def waits(values: dict[str, Any]) -> None:
        values["llm-training-eks:workloads"]["chat"]["model"]["waitForRunMinutes"] = 240

    code, err = plan_exit(edited(waits), tmp_path)
    assert code == 2, err
    assert "workloads.chat.model.waitForRunMinutes" in err and "runId" in err, err
