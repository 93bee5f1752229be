"""One rule for stateful resources (KMS keys, FSx, buckets, ECR, audit logs): protected from deletion.

Every stateful resource takes its options from `stateful()`, so `protectStatefulResources`
switches all of them together and a test can check the rule in one place; the same switch lets
a destroy empty the buckets and repositories (`empties_on_delete`).
"""

from __future__ import annotations

import pulumi


def stateful(protect: bool, opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
    """Options for a resource that holds data: `protect` so that `pulumi destroy` or a
    replacing `pulumi up` stops instead of deleting it. Turning protection off is a
    per-stack decision (`protectStatefulResources: false`), meant for throwaway stacks."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=protect))


def empties_on_delete(protect: bool) -> bool:
    """Whether deleting a bucket or ECR repository also deletes what is in it (S3 `force_destroy`,
    ECR `force_delete`): only when the stack does not protect its data. A bucket or repository
    that still holds objects or images is refused by S3 and ECR, so without this a
    `protectStatefulResources: false` stack could never be destroyed: the training data bucket
    holds exported checkpoints, the repositories the images the stack built. pulumi-aws acts on
    the value in state: it takes the `pulumi up` that lifts the protection to set it, before the
    destroy (tests/upstream/pulumi-aws-destroy-7.51.1.yaml)."""
    return not protect


def audit_trail(protect: bool, opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
    """Options for an audit log group (the EKS control-plane log, the VPC flow log): protected
    like the data, and retained on delete while protected, so an operator who lifts protection
    outside the stack config (`pulumi state unprotect`) and destroys still leaves the record.

    Retention follows protection rather than being unconditional because both groups have fixed
    names (EKS writes to `/aws/eks/<cluster>/cluster`): a group left behind makes the next
    `pulumi up` of a cluster of the same name fail on CreateLogGroup. A stack that turns
    protection off (`protectStatefulResources: false`, a throwaway stack) deletes them with
    the stack and can be re-created under the same name."""
    return stateful(protect, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=protect)))


def policy_exception(tag: str, reason: str | None) -> dict[str, str]:
    """The tag that excepts one resource from a mandatory policy rule (`facts.names`), its
    value the reason: the stack-config setting that asked for it. Empty without a reason."""
    return {tag: reason} if reason else {}
