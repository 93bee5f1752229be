"""Cluster add-ons: a catalog of entries (`catalog`) and one small component per entry
(`components`). EKS managed add-ons and the IAM roles of add-on service accounts are the aws
layer's (`EksAddons`); Helm charts and manifests the cluster layer's (`ClusterAddons`). A Helm
release is declared only where a node group needs it: no NVIDIA plugin on a Trainium-only
stack, and the reverse. What each chart gets is in `infra.charts`.
"""
