"""A server through its life on the local cluster (tests/launch/README.md, "Serving through its
life"), from the objects the plan renders before and after a day-2 edit:

- a rolling update behind the internal NLB: the Deployment controller's strategy, the readiness
  gate, each old pod's deletion as the kubelet plays it (endpoint out, preStop sleep, SIGTERM,
  SIGKILL at the grace period) against the target group's deregistration delay; a caller that
  never pauses loses no request, and without the preStop it does (rollout.py);
- a restart that finds its compile cache: the first start compiles into the keyed directory on
  /shared (one replica compiles, the other waits and loads), a replica deleted and recreated
  loads, a new maxModelLen gets a new key and compiles;
- the next training run while the server serves the last: run 1 trained, converted and served
  through the `-served` link; the after-stack (runId bumped) trains run 2 and converts it while
  the caller is answered throughout by the pods that loaded run 1; the link moves and the next
  start of a replica serves run 2.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.launch import plans, rollout
from tests.launch.harness import Faults
from tests.launch.netpolicy import Peer
from tests.launch.serving import ServingRun
from tests.launch.test_launch_chain import _why_not, tail
from tests.launch.test_serving_chain import logs

if _why_not:
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)

SERVING = [(s, w) for s, w, _ in plans.workloads(serving=True)]


def kinds(stack: str, workload: str) -> tuple[set[str], set[str]]:
    plan = plans.serving(stack, workload)
    return {o["kind"] for o in plan["steps"]}, {s["spec"].get("type", "ClusterIP") for s in plan["services"]}


def server_of(plan: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in plan["steps"] if o["kind"] in ("Deployment", "LeaderWorkerSet"))


BALANCED = [(s, w) for s, w in SERVING if "Deployment" in kinds(s, w)[0] and "LoadBalancer" in kinds(s, w)[1]]
NEURON = [(s, w) for s, w in SERVING if "VLLM_CACHE_ROOT" in str(plans.containers(server_of(plans.serving(s, w))))]
FOLLOWING = [
    (s, w) for s, w in SERVING if plans.serving(s, w)["source"] and "-served" in str(server_of(plans.serving(s, w)))
]
PREFIX = plans.PREFIX
ROLLOUT_SCALE = 0.05
"""The rollout's clock: a rendered second lasts 50 ms. The rendered preStop (135 s) outlasts the
deregistration delay (120 s) by 0.75 s here (0.3 s at the probes' 0.02), so a loaded machine's
scheduling cannot turn the rendered variant's margin into a lost request."""


def served_name(run: ServingRun) -> str:
    command = plans.containers(run.server)["command"]
    return str(command[command.index("--served-model-name") + 1])


def edit(workload: str, **changes: Any) -> Any:
    def apply(values: dict[str, Any]) -> None:
        values[f"{PREFIX}workloads"][workload].update(changes)

    return apply


def started(run: ServingRun) -> None:
    assert run.run_jobs(), logs(run)
    outcome = run.serve()
    assert list(outcome.values()) == ["ready"] * run.server["spec"]["replicas"], f"{outcome}\n{logs(run)}"


@pytest.mark.parametrize("pre_stop", ["rendered", "removed", "shorter"])
@pytest.mark.parametrize(("stack", "workload"), BALANCED)
def test_a_rollout_behind_the_load_balancer_loses_no_request(
    serve: Any, stack: str, workload: str, pre_stop: str
) -> None:
    """maxNumSeqs halved (an in-place update of the Deployment): every old pod is replaced while a
    caller calls the NLB without pause. With the rendered preStop every request is answered and
    every old pod stops on SIGTERM; with the preStop removed, or half the deregistration delay,
    the target still draining sends connections to a pod that has stopped listening: requests
    are lost."""
    run = serve(stack, workload)
    hook = plans.containers(run.server)["lifecycle"]
    if pre_stop == "removed":  # the pods the rollout replaces are the ones without the hook
        del hook["preStop"]
    elif pre_stop == "shorter":  # half the deregistration delay the Service's annotation sets
        (balancer,) = [s for s in run.plan["services"] if s["spec"].get("type") == "LoadBalancer"]
        hook["preStop"]["sleep"]["seconds"] = rollout.deregistration_delay(balancer) // 2
    started(run)
    before = run.server
    (service,) = [s for s in run.plan["services"] if s["spec"].get("type") == "LoadBalancer"]
    (port,) = service["spec"]["ports"]
    target = run.deployment.port(plans.containers(before), port["targetPort"])  # type: ignore[union-attr]
    nlb, group = rollout.start_nlb(run.cluster, service, target, ROLLOUT_SCALE)
    for pod in run.pods:  # the first pods' targets, registered by the controller's readiness gate
        group.register(pod.spec.name, pod.address, target)
    seqs = int(plans.containers(before)["command"][plans.containers(before)["command"].index("--max-num-seqs") + 1])
    assert run.apply(plans.serving(stack, workload, edit(workload, maxNumSeqs=seqs // 2))), logs(run)
    assert run.server["spec"]["template"] != before["spec"]["template"]
    caller = rollout.start_caller(
        run.cluster, "caller", f"http://{nlb.address}:{port['port']}/v1/completions", served_name(run)
    )
    time.sleep(0.5)
    assert run.deployment is not None
    run.deployment.obj = run.server
    update = rollout.Rollout(run.deployment, list(run.pods), before, group, target, ROLLOUT_SCALE)
    update.run()
    time.sleep(group.delay + 0.5)  # past the last target's draining
    answered, lost = rollout.outcomes(caller)
    run.pods = update.new
    delay, grace = rollout.deregistration_delay(service), plans.pod_spec(before)["terminationGracePeriodSeconds"]
    print(f"{pre_stop}: {answered} answered, {len(lost)} lost; terminations {update.gone}")
    if pre_stop == "rendered":
        assert answered > 50 and not lost, (answered, lost[:5], tail(nlb.output()))
        assert all(events == ["SIGTERM", "exited 0"] for events in update.gone.values()), update.gone
        assert len(update.gone) == len(update.new) == before["spec"]["replicas"]
        sleep = plans.containers(before)["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert delay < sleep < grace, (delay, sleep, grace)
    else:
        assert lost and "refused the connection" in nlb.output(), (answered, tail(nlb.output()))


@pytest.mark.parametrize(("stack", "workload"), NEURON[:1])
def test_a_restart_finds_its_compile_cache(serve: Any, stack: str, workload: str) -> None:
    """The first start compiles once into the rendered keyed directory on /shared (the replica
    starting beside it waits and loads); a replica deleted and recreated loads and compiles
    nothing; a new maxModelLen renders a new key and compiles there."""
    run = serve(stack, workload)
    started(run)
    name = run.server["metadata"]["name"]
    root = plans.containers(run.server)
    cache_root = next(e["value"] for e in root["env"] if e["name"] == "VLLM_CACHE_ROOT")
    first = run.records(name, "vllm-neuron-cache")
    assert sorted(r["compiled"] for r in first) == [False, True], first
    (folder,) = {r["folder"] for r in first}
    assert (
        folder.startswith(cache_root + "/") and (run.shared / folder.removeprefix("/shared/") / "model.neff").is_file()
    )

    assert run.deployment is not None
    run.cluster.remove(run.pods[0].spec.name)  # the pod deleted; its ReplicaSet makes another
    again = run.deployment.replica("again")
    assert run.deployment.probe([again]) == {again.spec.name: "ready"}, logs(run)
    restart = [r for r in run.records(name, "vllm-neuron-cache") if r["host"] == again.spec.name]
    assert [(r["folder"], r["compiled"]) for r in restart] == [(folder, False)], restart

    length = int(root["command"][root["command"].index("--max-model-len") + 1])
    assert run.apply(plans.serving(stack, workload, edit(workload, maxModelLen=length // 2))), logs(run)
    new_root = next(e["value"] for e in plans.containers(run.server)["env"] if e["name"] == "VLLM_CACHE_ROOT")
    assert new_root != cache_root, "a new maxModelLen must render a new cache key"
    run.deployment.obj = run.server
    edited = run.deployment.replica("edited")
    assert run.deployment.probe([edited]) == {edited.spec.name: "ready"}, logs(run)
    (late,) = [r for r in run.records(name, "vllm-neuron-cache") if r["host"] == edited.spec.name]
    assert late["compiled"] and late["folder"].startswith(new_root + "/"), late


@pytest.mark.parametrize(("stack", "workload"), FOLLOWING[:1])
def test_the_next_run_trains_while_the_server_serves_the_last(serve: Any, stack: str, workload: str) -> None:
    """Run 1 is served through the link; the after-stack (runId bumped) leaves the Deployment as
    it is, trains run 2 and converts it while a caller is answered throughout by the pods that
    loaded run 1; the link then names run 2 (moved in one rename), and a replica started after
    that serves run 2 beside the one still serving run 1."""
    run = serve(stack, workload)
    started(run)
    assert run.source is not None
    source, name = run.source.workload, run.server["metadata"]["name"]
    link = next(a for a in plans.containers(run.server)["command"] if str(a).endswith("-served"))
    runs = {r["resolved"] for r in run.records(name, "vllm-loaded")}
    first_run = str(plans.serving_values(stack, workload)[f"{PREFIX}workloads"][source]["runId"])
    assert runs == {str(Path(link).parent / f"{source}-{first_run}")}, runs
    labels = run_clients(stack, workload)
    caller = rollout.start_caller(
        run.cluster,
        "caller",
        run.url(),
        served_name(run),
        peer=Peer("caller", run.server["metadata"]["namespace"], labels),
    )

    before = run.server
    after = plans.serving(stack, workload, edit(source, runId="run-002"))
    assert server_of(after) == before, "the next run must leave the server's Deployment as it is"
    run.source.jobs = after["source"]
    run.source.policies = tuple(after["policies"])  # the new run's own (its MPIJob's peers)
    run.cluster.policies = list(after["policies"])
    run.source.training = plans.training_job(after["source"])
    run.source.results = []
    answered_before, _ = rollout.outcomes(caller)
    assert all(r.succeeded for r in run.source.pipeline(Faults())), tail(run.source.log())
    answered_during, lost = rollout.outcomes(caller)
    assert answered_during > answered_before and not lost, (answered_before, answered_during, lost[:5])
    shared_link = run.shared / link.removeprefix("/shared/")
    assert os.readlink(shared_link) == f"{source}-{first_run}", "the link moved before run 2 was converted"
    assert run.apply(after), logs(run)
    assert os.readlink(shared_link) == f"{source}-run-002", os.readlink(shared_link)
    assert all(p.alive() for p in run.pods), "the server restarted under the next run"
    answered, lost = rollout.outcomes(caller)
    print(f"next run: {answered_before} answered before run 2, {answered} by its conversion, {len(lost)} lost")
    assert answered > answered_during and not lost, (answered, lost[:5])

    assert run.deployment is not None
    run.cluster.remove(run.pods[0].spec.name)
    fresh = run.deployment.replica("next")
    assert run.deployment.probe([fresh]) == {fresh.spec.name: "ready"}, logs(run)
    latest = [r for r in run.records(name, "vllm-loaded") if r["host"] == fresh.spec.name]
    assert [r["resolved"] for r in latest] == [str(Path(link).parent / f"{source}-run-002")], latest


def run_clients(stack: str, workload: str) -> dict[str, str]:
    """The labels a client of the workload carries (its `clients.podLabels`, else the default)."""
    wl = plans.serving_values(stack, workload)[f"{PREFIX}workloads"][workload]
    return dict((wl.get("clients") or {}).get("podLabels") or {"llm-training-eks/client-of": workload})
