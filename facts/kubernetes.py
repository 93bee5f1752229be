"""Kubernetes' own rules for names and labels, and what a kubelet may set on its node.

Transcribed from kubernetes/kubernetes (apimachinery `pkg/util/validation/validation.go`,
`pkg/api/validate/content/kube.go`; kubelet `pkg/kubelet/apis/well_known_labels.go` and
`cmd/kubelet/app/options/options.go` ValidateKubeletFlags); tests/upstream/kubernetes-names.yaml
holds the facts with their source and tests/unit/test_kubernetes_names.py holds these functions
to them. Go's `regexp` matches ASCII classes and its `$` is the end of the text, so every
pattern here is ASCII-only and used with `fullmatch`: `name\\n` or non-ASCII digits are refused,
as the API server refuses them.

Each function returns the problems it finds (empty: valid), worded like Kubernetes' own.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL, re.ASCII)
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*", re.ASCII)
_DNS1035_LABEL_RE = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)
_LABEL_NAME_RE = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)

KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.kubernetes.io/zone",
        "failure-domain.kubernetes.io/region",
        "kubernetes.io/instance-type",
    }
)
"""Labels in the kubernetes.io namespace a kubelet may set on its own node (`--node-labels`)."""
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""Label prefixes (and their subdomains) a kubelet may set on its own node."""
RESERVED_LABEL_NAMESPACES = ("kubernetes.io", "k8s.io")
"""Prefixes (and their subdomains) reserved for Kubernetes' core components."""


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: object names such as Pod host names, namespaces, Service ports."""
    out = [f"must be no more than {DNS1123_LABEL_MAX} characters"] if len(value) > DNS1123_LABEL_MAX else []
    if not _DNS1123_LABEL_RE.fullmatch(value):
        out.append("must consist of lowercase letters, digits or '-', and start and end with a letter or digit")
    return out


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: most object names (Jobs, Deployments, ConfigMaps, label-key prefixes)."""
    out = [f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"] if len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        out.append("must consist of lowercase letters, digits, '-' or '.', and start and end with a letter or digit")
    return out


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: Service names, and the host names the MPI operator gives its pods."""
    out = [f"must be no more than {DNS1035_LABEL_MAX} characters"] if len(value) > DNS1035_LABEL_MAX else []
    if not _DNS1035_LABEL_RE.fullmatch(value):
        out.append(
            "must consist of lowercase letters, digits or '-', start with a letter and end with a letter or digit"
        )
    return out


def label_key(key: str) -> list[str]:
    """IsLabelKey: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a label key is a name with an optional DNS subdomain prefix and one '/' (e.g. example.com/name)"]
    out: list[str] = []
    if len(parts) == 2:
        out += [f"prefix part {p}" for p in (dns1123_subdomain(parts[0]) if parts[0] else ["must be non-empty"])]
    name = parts[-1]
    if len(name) > LABEL_NAME_MAX:
        out.append(f"name part must be no more than {LABEL_NAME_MAX} characters")
    if not _LABEL_NAME_RE.fullmatch(name):
        out.append(
            "name part must consist of letters, digits, '-', '_' or '.', and start and end with a letter or digit"
        )
    return out


def label_value(value: str) -> list[str]:
    """IsLabelValue: empty, or at most 63 characters like a label name."""
    out = [f"must be no more than {LABEL_VALUE_MAX} characters"] if len(value) > LABEL_VALUE_MAX else []
    if value and not _LABEL_NAME_RE.fullmatch(value):
        out.append(
            "must be empty or consist of letters, digits, '-', '_' or '.', and start and end with a letter or digit"
        )
    return out


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _in(namespace: str, domains: tuple[str, ...]) -> bool:
    return any(namespace == d or namespace.endswith("." + d) for d in domains)


def kubelet_refuses_node_label(key: str) -> bool:
    """A label in the kubernetes.io or k8s.io namespace that the kubelet does not set itself:
    given in `--node-labels` (how EKS hands a node group's labels to its nodes), the kubelet
    refuses to start ("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels")."""
    namespace = _namespace(key)
    if not _in(namespace, RESERVED_LABEL_NAMESPACES):
        return False
    return key not in KUBELET_LABELS and not _in(namespace, KUBELET_LABEL_NAMESPACES)


def mpi_worker_hostname(job: str, index: int) -> str:
    """The host name (and Pod name) the MPI operator gives worker `index` of an MPIJob
    (kubeflow/mpi-operator v0.8.0 `workerName`: `<job>-worker-<i>`); its validation requires the
    last worker's to be a DNS-1035 label."""
    return f"{job}-worker-{index}"
