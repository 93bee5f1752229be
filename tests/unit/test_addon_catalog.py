"""The add-on catalog (infra/addons/catalog.py): what a new entry must say, and what it forgot.

Adding an add-on is one entry plus its values function and facts (docs/contributing.md,
"Checklists"); these tests name what an entry lacks. The facts of its pinned version are held in
tests/plan/test_charts.py (Helm) and tests/plan/test_addon_versions.py (EKS add-ons).
"""

from __future__ import annotations

import pytest

from config.addons import AddonsConfig, EksAddonVersions
from config.nodegroups import NodeGroupConfig
from facts import eks_addons
from facts.nodegroups import NodeGroup
from infra.addons import catalog
from infra.addons.catalog import Addon, EksManaged, HelmChart, IrsaRole, Manifest, PodIdentityRole
from tools.cli import ROOT

ENTRIES = {e.name: e for e in catalog.CATALOG}


def test_names_are_unique_and_in_their_layer() -> None:
    assert len(ENTRIES) == len(catalog.CATALOG)
    assert all(e.layer == "aws" for e in catalog.EKS_ADDONS)
    assert all(e.layer == "cluster" for e in catalog.CLUSTER_ADDONS)
    # The layer follows from the source: EKS's API is the aws layer's, Kubernetes's the cluster's.
    for e in catalog.CATALOG:
        assert (e.layer == "aws") == isinstance(e.source, EksManaged), e.name


@pytest.mark.parametrize("entry", catalog.CATALOG, ids=lambda e: e.name)
def test_each_entry_says_what_its_kind_needs(entry: Addon) -> None:
    if isinstance(entry.source, HelmChart):
        assert entry.values is not None and entry.configuration is None, entry.name
    elif isinstance(entry.source, EksManaged):
        assert entry.values is None and entry.namespace_first is None, entry.name
        assert not isinstance(entry.role, IrsaRole), "an EKS add-on's role is a Pod Identity one"
    else:
        assert isinstance(entry.source, Manifest) and entry.values is None and entry.role is None
    if isinstance(entry.role, PodIdentityRole):
        assert isinstance(entry.source, EksManaged), "EKS Pod Identity associations belong to an EKS add-on"
    for other in entry.after:
        assert ENTRIES[other].layer == entry.layer
        assert catalog.CATALOG.index(ENTRIES[other]) < catalog.CATALOG.index(entry), "declared after what it waits for"


@pytest.mark.parametrize("entry", catalog.CATALOG, ids=lambda e: e.name)
def test_the_version_key_is_a_config_key_with_a_pinned_default(entry: Addon) -> None:
    """Its version is a field of `addons` (a chart or release pin with a default) or of
    `addons.eksAddonVersions` (null: the version facts/eks_addons.py pins for the minor)."""
    if isinstance(entry.source, EksManaged):
        assert entry.version_key in EksAddonVersions.model_fields
        assert eks_addons.ADDON_KEYS[entry.version_key] == entry.source.addon_name
    else:
        assert entry.version_key in AddonsConfig.model_fields
        assert getattr(AddonsConfig(), entry.version_key), f"{entry.config_key} has no pinned default"
    schema = (ROOT / "schema" / "stack-config.schema.json").read_text()
    assert f'"{entry.config_key.rsplit(".", 1)[-1]}"' in schema, entry.config_key


def test_every_eks_add_on_the_facts_pin_has_an_entry() -> None:
    pinned = set(eks_addons.ADDON_KEYS.values())
    assert pinned == {e.source.addon_name for e in catalog.EKS_ADDONS if isinstance(e.source, EksManaged)}


def test_switches_and_roles_are_config_keys_and_unique() -> None:
    for e in catalog.CATALOG:
        if e.switch is not None:
            section, key = e.switch.split(".")
            fields = {f.alias: name for name, f in AddonsConfig.model_fields.items()}
            assert section == "addons" and key in fields, e.switch
    roles = [e.role.name for e in catalog.CATALOG if e.role is not None]
    assert len(roles) == len(set(roles))


def _group(instance: str) -> NodeGroup:
    ng = NodeGroupConfig.model_validate({"name": "g", "instanceType": instance, "desiredSize": 1, "maxSize": 1})
    return ng.node_group("us-west-2a", "1")


def test_wanted_follows_node_kinds_and_switches() -> None:
    trn, gpu = _group("trn1.32xlarge"), _group("p5.48xlarge")
    names = {e.name for e in catalog.cluster_entries([trn], {}, False, AddonsConfig())}
    assert {"neuron", "efa-device-plugin", "kueue", "aws-fsx-csi-driver", "mpi-operator"} == names
    on = AddonsConfig.model_validate({"metricsServer": True})
    names = {e.name for e in catalog.cluster_entries([gpu], {"load-balancer-controller": "arn"}, True, on)}
    assert {"nvidia-device-plugin", "lws", "aws-load-balancer-controller", "metrics-server"} <= names
    assert "neuron" not in names
    aws = {e.name for e in catalog.aws_entries([trn], AddonsConfig())}
    assert {e.name for e in catalog.EKS_ADDONS} | {"neuron", "aws-fsx-csi-driver"} <= aws
    assert "aws-load-balancer-controller" not in aws
