"""Neuron servers that take part of a node, and the Neuron scheduler extension.

Sources (tests/upstream/neuron-scheduler-extension-2.32.0.yaml, aws-neuron-sdk v2.32.0; and
tests/upstream/chart-neuron-helm-chart-1.1.2.yaml, the chart infra/charts.py pins):
- the device plugin alone "does not guarantee the devices to be contiguous" (deploy/faq.rst) and
  the runtime then stops ("Neuron cores are not contiguous", deploy/troubleshooting.rst);
- the extension "is required for scheduling Pods that request more than one Neuron core or
  device"; one device or all of a node's are always valid (deploy/infrastructure/scheduler.rst);
- on EKS pods name its second scheduler, `my-scheduler` (k8s-multiple-scheduler.rst; the chart's
  custom-scheduler.yaml profile); on trn1/trn1n it places only 1, 4, 8 or 16 devices a pod, and
  trn2/trn2u are the same 4x4 2D torus (about-neuron/arch/neuron-hardware/trn2-arch.rst) whose only
  connected sets the SDK names are 1, 4, 8 or 16 (deploy/eks/dra.rst).
Over time: a replica restarted or moved by a node roll is a new pod of the same template, so it
goes through the extension again; a Kubernetes minor upgrade with the extension on moves its
kube-scheduler to the new minor and leaves the servers' template alone."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from facts import serving
from tests import upstream
from tests.conftest import plan_exit, resources, run_plan, stack_plan, stack_values
from tests.plan import day2
from tests.plan.test_addon_versions import UNRECORDED_136

SDK = upstream.facts("neuron-scheduler-extension-2.32.0")
CHART = upstream.facts("chart-neuron-helm-chart-1.1.2")
NS = "llm-training-eks:"
STACK = "trn2-serve"


def _values(stack: str = STACK, addons: dict[str, Any] | None = None, **server: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values(stack))
    values[f"{NS}workloads"]["qwen"].update(server)
    if addons is not None:
        values[f"{NS}addons"] = {**values.get(f"{NS}addons", {}), **addons}
    return values


def _trn1(addons: dict[str, Any] | None = None, tensor_parallel: int = 8) -> dict[str, Any]:
    """trn2-serve's server on a trn1.32xlarge (2 NeuronCores a device): TP 8 is 4 of its 16 devices."""
    values = _values(addons=addons, tensorParallel=tensor_parallel)
    values[f"{NS}nodeGroups"][0]["instanceType"] = "trn1.32xlarge"
    return values


ON = {"neuronScheduler": True}


def _pod(plan: dict[str, Any]) -> dict[str, Any]:
    (d,) = [r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "Deployment"]
    return dict(d["spec"]["template"]["spec"])


UNJUDGED = ("kubernetes:helm.sh/v3:Release", "aws:eks/addon:Addon")
"""Types whose replacement rules facts/replacements.py does not hold (the day-2 engine refuses to
judge them); their values are read directly here, the rest of the plan is diffed."""


def _judged(plan: dict[str, Any]) -> dict[str, Any]:
    return {**plan, "resources": [r for r in plan["resources"] if r["type"] not in UNJUDGED]}


def _scheduler_values(plan: dict[str, Any]) -> dict[str, Any]:
    (release,) = [r for r in resources(plan, "kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "neuron"]
    return dict(release["inputs"]["values"]["scheduler"])


def test_the_extensions_name_is_the_charts_and_the_sdks() -> None:
    assert SDK["device_plugin_alone_contiguous"] is False and SDK["extension_required_above_devices"] == 1
    assert serving.NEURON_SCHEDULER_NAME == SDK["scheduler_name"] == CHART["custom_scheduler_profile_name"]
    assert "aws.amazon.com/neuron" in CHART["extender_managed_resources"] and CHART["extender_ignorable"] is False
    counts = serving.NEURON_SCHEDULER_DEVICE_COUNTS
    assert {k: counts[k] for k in SDK["extension_device_counts"]} == {
        k: tuple(v) for k, v in SDK["extension_device_counts"].items()
    }
    assert SDK["trn2_topology"] == "4x4 2D torus" and SDK["trn2_connected_sets_needed_the_extension_before_dra"]
    assert counts["trn2"] == counts["trn2u"] == tuple(SDK["dra_trn2_connected_sets"])


def test_a_replica_of_four_devices_goes_through_the_extension() -> None:
    """TP 8 on trn1: 4 of 16 devices, several replicas a node: placed by `my-scheduler`."""
    plan = run_plan(_trn1(ON), STACK)
    pod = _pod(plan)
    assert pod["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "4"
    assert pod["schedulerName"] == SDK["scheduler_name"]
    assert _scheduler_values(plan)["enabled"] is True


def test_without_the_extension_it_is_refused_naming_the_key(tmp_path: Path) -> None:
    code, err = plan_exit(_trn1(), tmp_path)
    assert code == 2 and "addons.neuronScheduler" in err and "workloads.qwen" in err, err


def test_one_device_a_replica_needs_no_extension() -> None:
    """trn2-serve: TP 4 on trn2 (LNC 2) is one device, always contiguous; the default scheduler
    places it and the extension is not installed."""
    plan = stack_plan(STACK)
    pod = _pod(plan)
    assert pod["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "1"
    assert "schedulerName" not in pod
    assert _scheduler_values(plan)["enabled"] is False


def test_two_trn2_devices_have_no_documented_placement(tmp_path: Path) -> None:
    """TP 8 on trn2 is 2 devices: not a connected set of the 4x4 torus the SDK names, so refused
    naming tensorParallel, with the extension on as without it (it was accepted with it on)."""
    code, err = plan_exit(_values(addons=ON, tensorParallel=8), tmp_path)
    assert code == 2 and "workloads.qwen.tensorParallel" in err and "1, 4, 8, 16" in err, err


def test_a_trn1_count_the_extension_never_places_is_refused(tmp_path: Path) -> None:
    """trn1: 2 cores a device, TP 4 = 2 devices, which the extension never schedules (Pending for good)."""
    values = _values(tensorParallel=4)
    values[f"{NS}nodeGroups"][0]["instanceType"] = "trn1.32xlarge"
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and "workloads.qwen.tensorParallel" in err and "1, 4, 8" in err, err


def test_restarts_and_node_rolls_keep_the_scheduler_and_a_minor_upgrade_moves_only_its_image() -> None:
    """1.35 -> 1.36 with the extension on: the nodes roll (new AMIs), the extension's kube-scheduler
    takes the new minor, and the servers' template, schedulerName included, is unchanged: every
    pod the roll recreates goes through the extension again."""
    before_values = _trn1({**ON, "eksAddonVersions": UNRECORDED_136})
    after_values = copy.deepcopy(before_values)
    after_values[f"{NS}cluster"] = {**after_values[f"{NS}cluster"], "kubernetesVersion": "1.36"}
    before_values[f"{NS}cluster"] = {**before_values[f"{NS}cluster"], "kubernetesVersion": "1.35"}
    before, after = run_plan(before_values, STACK), run_plan(after_values, STACK)
    update = day2.diff(_judged(before), _judged(after))
    assert update.named("qwen-serve").op == "same"
    assert any(s.op != "same" for u, s in update.steps.items() if "NodeGroup" in u), "the nodes roll"
    assert _pod(after)["schedulerName"] == SDK["scheduler_name"]
    tags = [_scheduler_values(p)["customScheduler"]["image"]["tag"] for p in (before, after)]
    assert tags[0].startswith("v1.35.") and tags[1].startswith("v1.36."), tags


def test_turning_the_extension_on_replaces_the_replicas_one_at_a_time() -> None:
    """From one device a replica to four on trn1: the template changes (schedulerName, devices), so
    the Deployment rolls its replicas (maxUnavailable 1); nothing is replaced."""
    before = run_plan(_trn1(tensor_parallel=2), STACK)
    update = day2.diff(_judged(before), _judged(run_plan(_trn1(ON), STACK)))
    assert update.named("qwen-serve").op == "update"


def test_a_layered_cluster_says_whether_it_runs_the_extension(tmp_path: Path) -> None:
    """The cluster layer does not see the runs: it exports its switch, and a runs-layer server of 4
    of a trn1's 16 devices is refused, naming the key and the cluster stack, until it is on."""
    from tests.plan.test_layers import LAYERED, _layered_files, _plan_file
    from tests.plan.test_serving_endpoint import _serve_on_trn1

    assert stack_plan("trn1-llama2-cluster")["outputs"]["platform"]["neuronScheduler"] is False

    def patient(c: dict[str, Any]) -> None:
        c.setdefault(NS + "queueing", {}).update(podsReadyTimeoutMinutes=120, recoveryTimeoutMinutes=120)

    d = _layered_files(tmp_path, {"cluster": patient, "runs": _serve_on_trn1})
    for layer in ("aws", "cluster"):
        code, _, err = _plan_file(d / f"Pulumi.{LAYERED[layer]}.yaml")
        assert code == 0, err
    code, _, err = _plan_file(d / f"Pulumi.{LAYERED['runs']}.yaml")
    assert code == 2 and "addons.neuronScheduler: false in the cluster layer" in err, err
