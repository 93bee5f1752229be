"""Preflight of a Kubernetes upgrade under slow-starting servers: EKS drains a managed node group
node by node and fails the update with PodEvictionFailure when a node's pods do not leave within
15 minutes (EKS user guide, managed-node-update-behavior; tests/upstream/aws-eks-managed-node-update-2026-12.yaml).
With two replicas, a budget of one unavailable and a replica that takes longer than that to be
ready again, the second eviction waits past the window: said before the upgrade, with the way through."""

from __future__ import annotations

import copy

import config
from tests import upstream
from tests.conftest import stack_values
from tools import preflight
from tools.aws import upgrade_checks
from tools.aws.account import DeployedNodeGroup

EKS = upstream.facts("aws-eks-managed-node-update-2026-12")
NS = "llm-training-eks:"


class Deployed:
    """An account whose node groups all run `version` (only what the check asks)."""

    def __init__(self, version: str):
        self.version = version

    def node_group(self, cluster: str, name: str) -> DeployedNodeGroup:
        return DeployedNodeGroup(self.version, 1)


def trn2_serve() -> config.StackConfig:
    values = copy.deepcopy(stack_values("trn2-serve"))
    return config.parse_stack_values(values)


def test_the_window_is_eks_s() -> None:
    assert EKS["eviction_window_minutes"] * 60 == upgrade_checks.EVICTION_WINDOW_SECONDS


def test_an_upgrade_under_two_slow_replicas_is_refused_naming_the_way_through() -> None:
    cfg = trn2_serve()
    older = f"1.{int(cfg.cluster.kubernetes_version.split('.')[1]) - 1}"
    (finding,) = upgrade_checks.check_upgrade_drains(Deployed(older), cfg)  # type: ignore[arg-type]
    assert not finding.ok and finding.subject == "workloads.qwen", finding
    assert EKS["failure"] in finding.message and "workloads.qwen.replicas: 1" in finding.message
    assert "workloads.qwen.maxUnavailable: 2" in finding.message
    assert any(f.check == "upgrade" and not f.ok for f in preflight.check_upgrade_drains(Deployed(older), cfg))  # type: ignore[arg-type]


def test_no_upgrade_or_one_replica_passes() -> None:
    cfg = trn2_serve()
    assert upgrade_checks.check_upgrade_drains(Deployed(cfg.cluster.kubernetes_version), cfg) == []  # type: ignore[arg-type]
    values = copy.deepcopy(stack_values("trn2-serve"))
    values[f"{NS}workloads"]["qwen"]["replicas"] = 1
    one = config.parse_stack_values(values)
    assert upgrade_checks.check_upgrade_drains(Deployed("1.34"), one) == []  # type: ignore[arg-type]


def test_a_budget_of_every_replica_lets_the_drain_through() -> None:
    """The user's budget (maxUnavailable: 2 of 2 replicas): the drain never waits on a replacement,
    so EKS's window holds; the finding says the endpoint may be down meanwhile."""
    values = copy.deepcopy(stack_values("trn2-serve"))
    values[f"{NS}workloads"]["qwen"]["maxUnavailable"] = 2
    (finding,) = upgrade_checks.check_upgrade_drains(Deployed("1.34"), config.parse_stack_values(values))  # type: ignore[arg-type]
    assert finding.ok and "maxUnavailable 2" in finding.message, finding


def test_a_budget_short_of_every_replica_is_still_refused() -> None:
    """Three replicas, two allowed down: the third eviction waits on a replacement past the window."""
    values = copy.deepcopy(stack_values("trn2-serve"))
    values[f"{NS}workloads"]["qwen"].update(replicas=3, maxUnavailable=2)
    (finding,) = upgrade_checks.check_upgrade_drains(Deployed("1.34"), config.parse_stack_values(values))  # type: ignore[arg-type]
    assert not finding.ok and "workloads.qwen.maxUnavailable: 3" in finding.message, finding
