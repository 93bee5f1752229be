"""The serving start-up chain of every serving example stack on the local cluster
(tests/launch/README.md, "Serving"): the model staged from the Hub by a Job with egress, or the
training run it serves trained and converted by its conversion Job; the Deployment's replicas
started (`vllm serve` with the rendered arguments, checked by the stand-in against the pinned
vLLM's options), probed with the rendered startup and readiness probes, and called through the
Service by a client pod that carries the labels or namespace the config names, through the
namespaces' NetworkPolicies; a client without them is refused; the CloudWatch add-on's scraper
(its namespace, its operator's pod labels) reads, at the port and path of the pod's scrape
annotations, every series CloudWatch keeps, labelled with the served name, and another pod of its
namespace is refused. Also: a server whose model folder lacks its weights never gets ready; the
staging Job without egress fails."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from config.stackfile import read_stack_file
from facts import serving
from facts.names import CLOUDWATCH_NAMESPACE
from infra import metrics
from tests.conftest import example_file
from tests.launch import plans
from tests.launch.serving import ServingRun
from tests.launch.test_launch_chain import _why_not, tail

if _why_not:
    pytest.skip(f"launch-chain harness skipped: {_why_not}", allow_module_level=True)

SERVING = [(s, w) for s, w, _ in plans.workloads(serving=True)]
TRAINED = [(s, w) for s, w in SERVING if plans.serving(s, w)["source"]]
FROM_HUB = [(s, w) for s, w in SERVING if not plans.serving(s, w)["source"]]
GROUPS = [(s, w) for s, w in SERVING if any(o["kind"] == "LeaderWorkerSet" for o in plans.serving(s, w)["steps"])]


def clients(stack: str, workload: str) -> dict[str, Any]:
    """The workload's `clients` as its stack file gives them."""
    wl = read_stack_file(example_file(stack))[f"{plans.PREFIX}workloads"][workload]
    return dict(wl.get("clients") or {})


def logs(run: ServingRun) -> str:
    return tail("\n".join(r.log() for r in run.results) + "\n" + run.server_logs())


@pytest.mark.parametrize(("stack", "workload"), SERVING)
def test_the_model_is_served_to_its_clients_only(serve: Any, stack: str, workload: str) -> None:
    run = serve(stack, workload)
    assert run.run_jobs(), logs(run)
    outcome = run.serve()
    replicas = run.server["spec"]["replicas"]
    assert list(outcome.values()) == ["ready"] * replicas, f"{outcome}\n{logs(run)}"
    served = plans.containers(run.server)["command"]
    name = served[served.index("--served-model-name") + 1]
    loaded = run.records(run.server["metadata"]["name"], "vllm-loaded")
    assert len(loaded) == replicas and all(r["weights"] and r["served"] == name for r in loaded), loaded
    nodes = run.server["spec"].get("leaderWorkerTemplate", {}).get("size", 1)  # a group's pods
    assert all(r["nodes"] == nodes for r in loaded), loaded
    assert all(r["offline"] for r in run.records(run.server["metadata"]["name"], "vllm"))

    config = clients(stack, workload)
    namespace = run.server["metadata"]["namespace"]
    labels = config.get("podLabels") or {"llm-training-eks/client-of": workload}
    code, out = run.call("client", namespace, labels, name)
    assert code == 0 and json.loads(out.split(" ", 1)[1])["choices"][0]["text"], out
    for other in config.get("namespaces", []):  # any pod of a namespace the config names
        code, out = run.call(f"client-{other}", other, {}, name)
        assert code == 0, out
    code, out = run.call("stranger", namespace, {"role": "something-else"}, name)
    assert code != 0 and "connection to" in out and "failed" in out, out
    if not config.get("namespaces"):
        code, out = run.call("outsider", "elsewhere", labels, name)
        assert code != 0 and "failed" in out, out

    # The metrics seam: the server's policy, its scrape annotations, the names its vLLM exposes
    # and the series the agent keeps (the example stacks run the scraper: servingMetrics default).
    code, out = run.call("scraper", CLOUDWATCH_NAMESPACE, metrics.scraper_pod_labels(), None)
    assert code == 0, f"{out}\n{logs(run)}"
    for series in serving.SCRAPED_SERIES:
        assert re.search(rf'^{re.escape(series)}{{[^}}]*model_name="{re.escape(name)}"', out, re.M), (series, out[:800])
    code, out = run.call("not-the-scraper", CLOUDWATCH_NAMESPACE, {"app": "something-else"}, None)
    assert code != 0 and "failed" in out, out


@pytest.mark.parametrize(("stack", "workload"), TRAINED[:1])
def test_a_server_without_weights_never_gets_ready(serve: Any, stack: str, workload: str) -> None:
    """The converted folder loses its weights: every replica's vLLM fails its load as vLLM's
    loader does, and its startup probe fails failureThreshold times (the pod is never ready)."""
    run = serve(stack, workload)
    assert run.run_jobs(), logs(run)
    model = run.server["spec"]["template"]["spec"]["containers"][0]["command"][2]
    folder = run.shared / model.removeprefix("/shared/")
    weights = [p for p in folder.iterdir() if p.suffix in (".bin", ".safetensors", ".pt")]
    assert weights, sorted(folder.iterdir())
    for p in weights:
        p.unlink()
    outcome = run.serve()
    threshold = run.server["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureThreshold"]
    assert all(o.startswith(f"startup probe failed {threshold} times") for o in outcome.values()), outcome
    assert "RuntimeError: Cannot find any model weights with" in run.server_logs(), logs(run)
    code, out = run.call("client", run.server["metadata"]["namespace"], clients(stack, workload)["podLabels"], "x")
    assert code != 0, out  # the Service lists no ready pod: its name does not resolve


@pytest.mark.parametrize(("stack", "workload"), FROM_HUB[:1])
def test_staging_without_egress_fails(serve: Any, stack: str, workload: str) -> None:
    """The Hub Job with its egress label taken away cannot reach the Hub: nothing is served."""
    run = serve(stack, workload)
    (job,) = [j for j in run.jobs if j["kind"] == "Job" and "-hub-" in j["metadata"]["name"]]
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.endswith("/egress")}
    assert not run.run_jobs()
    log = run.results[-1].log()
    assert run.results[-1].name == job["metadata"]["name"] and "cannot be reached" in log, log


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--no-such-option", "1"], "unrecognized arguments: --no-such-option"),
        (["--port", "http"], "argument --port: invalid int value: 'http'"),
        (["--dtype", "bf16"], "argument --dtype: invalid choice: 'bf16'"),
    ],
)
def test_the_server_refuses_options_its_vllm_does_not_take(serve: Any, extra: list[str], error: str) -> None:
    """The rendered command with one bad option more: the stand-in's parser (the pinned vLLM's
    options) exits 2 naming it, as vLLM's argparse does, before anything is loaded."""
    stack, workload = next(sw for sw in FROM_HUB if sw not in GROUPS)
    run = serve(stack, workload)
    run.server["spec"]["replicas"] = 1
    run.server["spec"]["template"]["spec"]["containers"][0]["command"] += extra
    (pod,) = run.start_server()
    assert pod.wait(timeout=30) == 2 and error in pod.output(), pod.output()
    assert not run.records(run.server["metadata"]["name"], "vllm")


@pytest.mark.parametrize(("stack", "workload"), GROUPS[:1])
def test_a_group_whose_workers_cannot_reach_the_leader_never_gets_ready(serve: Any, stack: str, workload: str) -> None:
    """The group's peers policy taken away: default-deny stands between a worker and its leader's
    --master-port, so the worker cannot join, the leader waits for it and its startup probe fails
    failureThreshold times (never ready, so the Service lists no pod)."""
    run = serve(stack, workload)
    assert run.run_jobs(), logs(run)
    name = run.server["metadata"]["name"]
    kept = [p for p in run.cluster.policies if p["metadata"]["name"] != f"{name}-peers"]
    assert len(kept) == len(run.cluster.policies) - 1, [p["metadata"]["name"] for p in run.cluster.policies]
    run.cluster.policies = kept
    outcome = run.serve()
    threshold = plans.containers(run.server)["startupProbe"]["failureThreshold"]
    assert list(outcome) == [f"{name}-0"], outcome
    assert all(o.startswith(f"startup probe failed {threshold} times") for o in outcome.values()), outcome
    assert not run.records(name, "vllm-worker") and not run.records(name, "vllm-loaded"), logs(run)
    address = f"{name}-0.{name}.{run.server['metadata']['namespace']}:29501"
    assert f"has failed to connect to {address}" in run.server_logs(), logs(run)
