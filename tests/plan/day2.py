"""Day-2 sequences: the tests plan a stack before and after an edit and diff the two plans the
way a real `pulumi up` would go. The diff is the product's (`make diff`): tools/offline/plan_diff.py,
strict here (a changed type without replacement rules fails the test: NoFacts).

`preflight_in_up` plays the other half of a real `pulumi up` of the after stack: preflight's gate
(__main__.py runs it before any resource is declared), through the stack's own AWS provider, with
the account's answers given per invoke (tests/unit/preflight_sources.py: the SDK's result types)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

import config
from facts import instances
from tests.unit.preflight_sources import TOKENS, InvokeMocks, under_provider, wire
from tools import diff as diff_cli
from tools import preflight
from tools.offline.plan_diff import NoFacts, Step, Update, conflicting_creates, diff

__all__ = ["Gate", "NoFacts", "Step", "Update", "conflicting_creates", "diff", "make_diff", "preflight_in_up"]


@dataclass
class Gate:
    """What preflight inside `pulumi up` did: stopped it (RunError) or not, and what it logged."""

    refused: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def preflight_in_up(
    cfg: config.StackConfig, answers: dict[str, Any], quotas: dict[str, float], monkeypatch: Any
) -> Gate:
    """Run preflight's gate for `cfg` under the provider: its groups' types offered in their AZs
    with EFA, the caller, each quota code at `quotas`' value (10,000 when not given), plus
    `answers` (token -> answer). Pulumi's log calls are caught (the engine would print them)."""
    gate = Gate()
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: gate.warnings.append(msg))
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: gate.errors.append(msg))
    azs = sorted({g.availability_zone for g in cfg.node_groups if g.availability_zone})
    every = {
        TOKENS["offerings"]: wire(aws.ec2.GetInstanceTypeOfferingsResult, id=cfg.region, locations=azs),
        TOKENS["instance_type"]: lambda a: wire(
            aws.ec2.GetInstanceTypeResult,
            id=a["instanceType"],
            efa_supported=True,
            efa_maximum_interfaces=instances.get(a["instanceType"]).efa_interfaces,
        ),
        TOKENS["caller"]: wire(aws.GetCallerIdentityResult, arn="arn:aws:iam::123456789012:user/deployer", id="x"),
        TOKENS["quota"]: lambda a: wire(
            aws.servicequotas.GetServiceQuotaResult, value=float(quotas.get(a["quotaCode"], 10_000)), id=a["quotaCode"]
        ),
    }
    try:
        under_provider(InvokeMocks({**every, **answers}), lambda: preflight.gate(cfg))
    except pulumi.RunError:
        gate.refused = True
    return gate


def make_diff(folder: Path, stack: str, before: dict[str, Any], after: dict[str, Any]) -> tuple[int, str, str]:
    """`make diff` (tools.diff) of `before` as the stack's deployed file in `folder` (a stack of your
    own: judged at the real clock unless `folder` is the examples folder) and `after` as the edit:
    (exit code, stdout, stderr)."""
    folder.mkdir(parents=True, exist_ok=True)
    deployed, edit = folder / f"Pulumi.{stack}.yaml", folder / "Pulumi.edited.yaml"
    deployed.write_text(yaml.safe_dump({"config": before}))
    edit.write_text(yaml.safe_dump({"config": after}))
    out, err = io.StringIO(), io.StringIO()
    code = diff_cli.main(["--config-file", str(deployed), "--file", str(edit)], out, err)
    return code, out.getvalue(), err.getvalue()
