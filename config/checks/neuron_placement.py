"""Neuron servers that take more than one device but not the whole node: where their devices come from.

The Neuron device plugin alone "does not guarantee the devices to be contiguous", and the runtime
refuses devices that are not ("Neuron cores are not contiguous"); the scheduler extension places
such pods on connected devices, and "is required for scheduling Pods that request more than one
Neuron core or device"; one device, or all of a node's, is always valid (aws-neuron-sdk v2.32.0
deploy/faq.rst, deploy/troubleshooting.rst, deploy/infrastructure/scheduler.rst;
tests/upstream/neuron-scheduler-extension-2.32.0.yaml). So such a server needs
`addons.neuronScheduler`, its pods name the extension's scheduler
(workloads/manifests/vllm_serve.py), and on the 2D torus of trn1 and trn2 it takes a count the
extension places (refused first: no switch places another count).
"""

from __future__ import annotations

from config.checks.groups import Groups
from config.problems import problem
from config.stack import StackConfig
from config.workloads import VllmServeWorkload
from facts import serving


def neuron_replicas_placed(cfg: StackConfig, groups: Groups, where: str = "") -> list[str]:
    """Each Neuron server of several devices a pod (fewer than a node's) against the extension.
    `where`: the stack that sets addons (a runs layer's cluster stack), for the message."""
    out: list[str] = []
    for name, run in sorted(cfg.workloads.items()):
        ng = groups.get(run.node_group) if isinstance(run, VllmServeWorkload) else None
        if ng is None or not isinstance(run, VllmServeWorkload) or run.spans_nodes:
            continue
        instance, devices = ng.instance, run.devices(ng.instance)
        if devices < 2 or not serving.shares_neuron_node(instance, devices):
            continue
        counts = serving.NEURON_SCHEDULER_DEVICE_COUNTS.get(instance.family)
        if counts is not None and devices not in counts:
            # Checked first: no switch places this count, so naming addons.neuronScheduler would mislead.
            cores = serving.neuron_cores_per_device(instance)
            valid = ", ".join(str(c * cores) for c in counts)
            said = (
                f"{run.tensor_parallel} takes {devices} Neuron devices a replica; on {instance.name}'s 2D torus"
                f" only sets of {', '.join(map(str, counts))} devices are connected (the scheduler extension"
                f" leaves any other count Pending); use a tensorParallel of {valid} ({cores} NeuronCores a device)"
            )
            key = f"workloads.{name}.tensorParallel"
            out.append(problem(key, "not-supported", said, value=str(run.tensor_parallel), allowed=valid))
        elif not cfg.addons.neuron_scheduler:
            said = (
                f"false{where}, but workloads.{name} takes {devices} of a {instance.name}'s"
                f" {instance.accelerator_count} Neuron devices a replica: the device plugin alone may give it"
                " unconnected ones, which the Neuron runtime refuses; set addons.neuronScheduler: true (the"
                " scheduler extension places it on connected devices), or take 1 device or the whole node"
            )
            out.append(problem("addons.neuronScheduler", "required", said, value="false", allowed="true"))
    return out
