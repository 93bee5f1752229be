"""Where a Neuron server keeps its compiled graphs across restarts, replicas and edits (pure).

Two plugins, two caches (tests/upstream/vllm-neuron-compile-cache.yaml):
- vLLM Neuron 0.24 (the trn2 image) compiles through torch.compile into
  `$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>` (default `~/.cache/vllm`: here the pod's /tmp
  scratch, gone at every restart), and waits `NEURON_LIBTORCH_COMPILATION_TIMEOUT` (600 s) for
  another process's compile; its compile itself is bounded by `VLLM_NEURON_COMPILATION_TIMEOUT`.
- vLLM 0.16.0 on NxD Inference (the trn1/inf2 image, vllm-neuron 0.2.0) loads whatever
  `NEURON_COMPILED_ARTIFACTS` holds, "and any differing model configurations ... will not trigger
  re-compilation"; without it, it writes `local-models/<model>` under its working directory
  (the image's, root's: user 10001 cannot write there).

So the cache is a directory of /shared keyed by what changes the graph: the model and its
revision (or the training run it was converted from), tensor parallelism, max length, batch and
the image. A restart, or the next replica, with the same key loads; any change of them gets a
new directory and compiles, never a stale graph. The server's working directory is in it too.
"""

from __future__ import annotations

import hashlib
import re

from config.workloads import VllmServeWorkload
from facts import serving
from workloads.manifests.objects import Context

COMPILE_TIMEOUT_ENV = ("VLLM_NEURON_COMPILATION_TIMEOUT", "NEURON_LIBTORCH_COMPILATION_TIMEOUT")
"""The plugin's own compile bound and the wait of one process on another's compile (both 600 s by
default): raised to the modeled compile, or a first start fails after ten minutes."""


def neuron_server(ctx: Context) -> bool:
    return ctx.node_group.accelerator == "neuron"


def neuron_scheduling(devices: int, ctx: Context) -> dict[str, str]:
    """The pod's scheduler: the Neuron scheduler extension's where the cluster runs it and the pod
    takes part of a node (it places the pod on connected devices; config/checks/neuron_placement.py
    requires it above one device). A one-device server goes through it too: the extension keeps its
    own map of each node's allocated devices (node annotations), blind to pods the default
    scheduler placed beside them. A whole node needs no choice of devices."""
    if ctx.neuron_scheduler and serving.shares_neuron_node(ctx.node_group.instance, devices):
        return {"schedulerName": serving.NEURON_SCHEDULER_NAME}
    return {}


def cache_key(run: VllmServeWorkload, ctx: Context) -> str:
    """What the compiled graphs depend on, readable, with a short hash of the image (its compiler)."""
    if run.model.hub:
        model = f"{run.model.hub.replace('/', '--')}@{run.model.revision}"
    else:
        source = ctx.source
        model = f"{source.workload}@{source.run_id}" if source is not None else "model"
    image = hashlib.sha256(ctx.image.encode()).hexdigest()[:8]
    key = f"{model}-tp{run.tensor_parallel}-len{run.max_model_len}-seqs{run.max_num_seqs}-img{image}"
    return re.sub(r"[^A-Za-z0-9._@-]", "-", key)


def cache_dir(workload_name: str, run: VllmServeWorkload, ctx: Context) -> str:
    """The compiled graphs of this server's configuration on /shared."""
    return f"{ctx.shared_mount}/{workload_name}/neuron-cache/{cache_key(run, ctx)}"


def working_dir(workload_name: str, run: VllmServeWorkload, ctx: Context) -> str:
    """A working directory the non-root server can write (vllm-neuron writes `local-models/` there)."""
    return f"{cache_dir(workload_name, run, ctx)}/work"


def cache_env(workload_name: str, run: VllmServeWorkload, ctx: Context) -> dict[str, str]:
    """The variables both plugins read: their caches in the keyed directory, their compile timeouts
    at the modeled compile (facts.serving.NEURON_COMPILE_SECONDS)."""
    top = cache_dir(workload_name, run, ctx)
    timeout = str(serving.NEURON_COMPILE_SECONDS)
    return {
        "NEURON_COMPILED_ARTIFACTS": f"{top}/compiled",
        "VLLM_CACHE_ROOT": f"{top}/vllm",
        **dict.fromkeys(COMPILE_TIMEOUT_ENV, timeout),
    }
