"""facts/kubernetes.py against Kubernetes' own rules (tests/upstream/kubernetes-names.yaml) and the
MPI operator's (tests/upstream/mpi-operator-v0.8.0-names.yaml)."""

from __future__ import annotations

import re

import pytest

from facts import kubernetes
from tests import upstream

K8S = upstream.facts("kubernetes-names")
MPI = upstream.facts("mpi-operator-v0.8.0-names")

# Strings every rule must refuse as Go's regexp does: a trailing newline (Python's `$` would take
# it), non-ASCII digits and letters (Python's \d and \w would take them), an empty string.
HOSTILE = ["abc\n", "abc\r", "a\u0661b", "\u0661\u0662", "ab\u00e9", "ab\u200b", "", "-abc", "abc-", "a_b", "A"]


def _go(format_: str) -> re.Pattern[str]:
    # Go's regexp with ^...$ anchors is a full match with ASCII classes.
    return re.compile(format_, re.ASCII)


SAMPLES = ["a", "abc", "a-b", "1abc", "abc1", "a.b", "a" * 63, "a" * 64, "my-name", "123-abc", *HOSTILE]


@pytest.mark.parametrize("value", SAMPLES)
def test_dns_rules_match_upstream(value: str) -> None:
    for name, rule in (
        ("dns1123_label", kubernetes.dns1123_label),
        ("dns1123_subdomain", kubernetes.dns1123_subdomain),
        ("dns1035_label", kubernetes.dns1035_label),
    ):
        fact = K8S[name]
        upstream_ok = _go(fact["format"]).fullmatch(value) is not None and len(value) <= fact["max"]
        assert (not rule(value)) == upstream_ok, (name, value)


@pytest.mark.parametrize(
    "key",
    ["team", "example.com/team", "a/b/c", "/x", "example.com/", "Example.com/x", "x" * 64, "p/" + "x" * 63, *HOSTILE],
)
def test_label_keys_match_upstream(key: str) -> None:
    fact = K8S["label_key"]
    parts = key.split("/")
    name_ok = _go(fact["name_format"]).fullmatch(parts[-1]) is not None and len(parts[-1]) <= fact["name_max"]
    prefix_ok = len(parts) == 1 or (
        parts[0] != ""
        and _go(K8S["dns1123_subdomain"]["format"]).fullmatch(parts[0]) is not None
        and len(parts[0]) <= K8S["dns1123_subdomain"]["max"]
    )
    assert (not kubernetes.label_key(key)) == (len(parts) <= 2 and name_ok and prefix_ok), key


@pytest.mark.parametrize("value", ["", "x", "X_y.z", "x" * 63, "x" * 64, "-x", *HOSTILE])
def test_label_values_match_upstream(value: str) -> None:
    fact = K8S["label_value"]
    ok = _go(fact["format"]).fullmatch(value) is not None and len(value) <= fact["max"]
    assert (not kubernetes.label_value(value)) == ok, value


def test_kubelet_node_label_rules_are_upstreams() -> None:
    fact = K8S["kubelet"]
    assert set(fact["allowed_labels"]) == kubernetes.KUBELET_LABELS
    assert tuple(fact["allowed_namespaces"]) == kubernetes.KUBELET_LABEL_NAMESPACES
    assert tuple(fact["reserved_namespaces"]) == kubernetes.RESERVED_LABEL_NAMESPACES
    refused = ["node-role.kubernetes.io/worker", "kubernetes.io/role", "app.kubernetes.io/name", "x.k8s.io/y"]
    allowed = ["node.kubernetes.io/pool", "a.node.kubernetes.io/x", "kubernetes.io/arch", "example.com/x", "team"]
    assert all(kubernetes.kubelet_refuses_node_label(k) for k in refused)
    assert not any(kubernetes.kubelet_refuses_node_label(k) for k in allowed)


def test_mpi_worker_host_names_are_the_operators() -> None:
    assert kubernetes.mpi_worker_hostname("llama2-run-001-train", 3) == MPI["worker_hostname"].format(
        job="llama2-run-001-train", index=3
    )
    assert MPI["validation"]["last_worker_hostname"] == "dns1035_label"
