"""Preflight of a Kubernetes upgrade under slow-starting servers (tools/preflight.py runs it).

EKS upgrades a managed node group node by node: it drains each node, and "if the pods don't leave
the node within 15 minutes and there's no force flag, the upgrade phase fails with a
PodEvictionFailure error" (EKS user guide, managed-node-update-behavior;
tests/upstream/aws-eks-managed-node-update-2026-12.yaml). A server's disruption budget
(`maxUnavailable`, 1 by default) lets the drain evict that many replicas, then makes it wait for a
replacement to be ready before it may evict the next. With replicas whose modeled start
(estimates.startup) is longer than those 15 minutes, every replacement is still starting when the
next node drains, so only a budget of every replica lets the update through; a smaller one stops
it part-way. Said before the upgrade, with the ways through."""

from __future__ import annotations

from config.stack import StackConfig
from config.workloads import VllmServeWorkload
from estimates.startup import server_start_seconds
from facts import instances
from tools.aws.account import Account
from tools.aws.reservations import Finding

EVICTION_WINDOW_SECONDS = 15 * 60
"""How long the upgrade phase waits for a node's pods to leave before PodEvictionFailure."""
CHECK = "upgrade"


def _upgrading(account: Account, cfg: StackConfig, group: str) -> str | None:
    """The deployed Kubernetes version of `group` when this update changes it; None otherwise."""
    found = account.node_group(cfg.cluster.name, group)
    if found is None or found.version == cfg.cluster.kubernetes_version:
        return None
    return found.version


def check_upgrade_drains(account: Account, cfg: StackConfig) -> list[Finding]:
    """Each server with two or more replicas, on a node group this update upgrades, whose replica
    starts in more than EKS's 15-minute eviction window: refused, naming the ways through."""
    out = []
    groups = {ng.name: ng for ng in cfg.node_groups}
    for name, run in sorted(cfg.workloads.items()):
        ng = groups.get(run.node_group) if isinstance(run, VllmServeWorkload) else None
        if ng is None or not isinstance(run, VllmServeWorkload) or run.replicas < 2:
            continue
        deployed = _upgrading(account, cfg, ng.name)
        if deployed is None:
            continue
        instance = instances.get(ng.instance_type)
        parameters = run.served_parameters(cfg.workloads)
        start = server_start_seconds(instance, cfg.storage.file_system.mb_per_second, parameters)
        subject = f"workloads.{name}"
        if start <= EVICTION_WINDOW_SECONDS:
            out.append(Finding(CHECK, subject, True, f"a replica starts in {start // 60} min, within the drain's 15"))
            continue
        if run.max_unavailable >= run.replicas:
            ok = (
                f"maxUnavailable {run.max_unavailable} of {run.replicas} replicas: the drain need not wait for a"
                f" replacement; the endpoint may be down while they start again (~{start // 60} min each)"
            )
            out.append(Finding(CHECK, subject, True, ok))
            continue
        out.append(Finding(CHECK, subject, False, _refusal(name, run, ng.name, (deployed, cfg), start)))
    return out


def _refusal(name: str, run: VllmServeWorkload, group: str, versions: tuple[str, StackConfig], start: int) -> str:
    """Why the drain fails and the two keys that let it through, and what each costs."""
    deployed, cfg = versions
    key = f"workloads.{name}"
    return (
        f"the upgrade of node group {group!r} ({deployed} -> {cfg.cluster.kubernetes_version}) drains"
        f" {run.replicas} replicas {run.max_unavailable} at a time (their budget, {key}.maxUnavailable), each"
        f" replacement ready only after ~{start // 60} min; EKS evicts within 15 min, so the update fails with"
        f" PodEvictionFailure. Ways through, before the upgrade and restored after: {key}.maxUnavailable:"
        f" {run.replicas} (the budget lets the drain evict every replica; the endpoint may be down while they"
        f" start again), or {key}.replicas: 1 (down while it starts); or keep the version and upgrade when the"
        " server can stop"
    )
