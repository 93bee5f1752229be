"""The add-on resources keep their live resources across the add-on catalog (infra.addons).

Before the catalog one `ClusterAddons` component `addons` held every add-on resource; now one
component per add-on does, and each resource carries `pulumi.Alias(parent=<the old component's
URN>)`. These tests show that what we pass yields exactly the URN the resource had, both as the
Pulumi SDK computes an alias URN (`create_urn`, the engine's rule: the parent URN's type, `$`,
the resource's type, `::`, its name) and as the plan records it.
"""

from __future__ import annotations

import asyncio

import pulumi
import pytest
from pulumi.runtime.resource import create_urn

from infra.addons import catalog
from infra.addons.components import old_parent
from tests.conftest import stack_plan
from tools.offline import mocks

# Recorded from tests/golden/dev/urns.txt at main a5805db, the last commit before the catalog:
# the HelmRelease of Kueue under the one ClusterAddons component.
OLD_KUEUE_URN = (
    "urn:pulumi:dev::llm-training-eks::llm-training-eks:infra:ClusterAddons$kubernetes:helm.sh/v3:Release::addons-kueue"
)
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_the_sdk_turns_the_alias_into_the_old_urn() -> None:
    mocks.install("us-west-2", "llm-training-eks", "dev", {})
    alias = old_parent()
    # A real `pulumi.Alias` (the URN-history test reads aliases from the plan), its parent a URN.
    assert isinstance(alias, pulumi.Alias) and isinstance(alias.parent, str)

    async def resolve() -> str | None:
        # Made inside the loop: an Output belongs to the loop it was made on.
        return await create_urn("addons-kueue", RELEASE, alias.parent).future()

    # A loop left current (not asyncio.run, which leaves none for the plans after this test).
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    urn = loop.run_until_complete(resolve())
    assert urn == OLD_KUEUE_URN
    # The new URN is another one: without the alias `pulumi up` would replace the release.
    (release,) = [r for r in stack_plan("dev")["resources"] if r["name"] == "addons-kueue"]
    assert release["urn"] != OLD_KUEUE_URN


def test_the_plan_records_the_old_urn_as_an_alias() -> None:
    (release,) = [r for r in stack_plan("dev")["resources"] if r["name"] == "addons-kueue"]
    assert release["type"] == RELEASE and OLD_KUEUE_URN in release["aliases"]


@pytest.mark.parametrize("stack", ["dev", "trn1-llama2-aws"])
def test_every_add_on_resource_aliases_its_old_parent(stack: str) -> None:
    """Every resource inside an add-on component (or the log groups, the tenants' namespaces)
    is known by the URN it had under `addons`; the old component itself by the one taking its
    place (an aws-layer stack has no ClusterAddons any more)."""
    plan = stack_plan(stack)
    parents = {"ContainerInsightsLogs", "AddonRole", "EksAddon", "HelmAddon", "ManifestAddon", "TenantNamespaces"}
    moved = [r for r in plan["resources"] if r["parent"].split("::")[-2].split("$")[-1].rsplit(":", 1)[-1] in parents]
    assert moved
    for r in moved:
        old = f"urn:pulumi:{stack}::llm-training-eks::llm-training-eks:infra:ClusterAddons${r['type']}::{r['name']}"
        assert old in r["aliases"], r["urn"]
        assert r["name"].startswith(catalog.PREFIX + "-")
    urns = {r["urn"] for r in plan["resources"]} | {a for r in plan["resources"] for a in r["aliases"]}
    assert (
        f"urn:pulumi:{stack}::llm-training-eks::pulumi:pulumi:Stack$llm-training-eks:infra:ClusterAddons::addons"
        in urns
    )
