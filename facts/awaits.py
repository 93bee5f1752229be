"""What `pulumi up` waits for in a Kubernetes object it creates or updates.

pulumi-kubernetes v4.32.0 (a03ff6ba), recorded in tests/upstream/pulumi-kubernetes-4.32.0-await.yaml:
- `pulumi.com/skipAwait` set to exactly "true" skips every wait (metadata/overrides.go
  SkipAwaitLogic, annotations.go IsAnnotationTrue compares with "true").
- A Job is awaited until it completes (await/job.go jobInitAwaiter), within
  `pulumi.com/timeoutSeconds`, else the provider's 10-minute default.
- A kind without its own awaiter (an MPIJob) is awaited only when `pulumi.com/waitFor` names a
  condition (overrides.go ReadyCondition; PULUMI_K8S_AWAIT_ALL is not set by this project).

The product sets these annotations (workloads/manifests); everything that asks whether a deploy
waits for an object (make diff, the plan's workload lines, the day-2 and launch tests) asks
`awaits_completion`, so the rule is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SKIP_AWAIT = "pulumi.com/skipAwait"
WAIT_FOR = "pulumi.com/waitFor"
TIMEOUT = "pulumi.com/timeoutSeconds"
TRUE = "true"
COMPLETION_KINDS = ("Job", "MPIJob")
"""The kinds whose wait is for their work to finish (a Job always, an MPIJob through waitFor)."""


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Kubernetes object's annotations, `{}` when it has none."""
    meta = obj.get("metadata") or {}
    return (meta.get("annotations") or {}) if isinstance(meta, Mapping) else {}


def skips_await(obj: Mapping[str, Any]) -> bool:
    """Whether pulumi-kubernetes skips every wait for `obj`."""
    return annotations_of(obj).get(SKIP_AWAIT) == TRUE


def awaits_completion(obj: Mapping[str, Any]) -> bool:
    """Whether `pulumi up` waits for this Job or MPIJob to finish; False for any other kind."""
    if obj.get("kind") not in COMPLETION_KINDS or skips_await(obj):
        return False
    return obj.get("kind") == "Job" or bool(annotations_of(obj).get(WAIT_FOR))


def timeout_seconds(obj: Mapping[str, Any]) -> int | None:
    """The object's `pulumi.com/timeoutSeconds`, None when unset."""
    value = annotations_of(obj).get(TIMEOUT)
    return int(value) if value else None
