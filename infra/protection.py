"""One rule for stateful resources (KMS keys, FSx, buckets, ECR): protected from deletion.

Every stateful resource takes its options from `stateful()`, so `protectStatefulResources`
switches all of them together and a test can check the rule in one place.
"""

from __future__ import annotations

import pulumi


def stateful(protect: bool, opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
    """Options for a resource that holds data: `protect` so that `pulumi destroy` or a
    replacing `pulumi up` stops instead of deleting it. Turning protection off is a
    per-stack decision (`protectStatefulResources: false`), meant for throwaway stacks."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=protect))


def policy_exception(tag: str, reason: str | None) -> dict[str, str]:
    """The tag that excepts one resource from a mandatory policy rule (`facts.names`), its
    value the reason: the stack-config setting that asked for it. Empty without a reason."""
    return {tag: reason} if reason else {}
