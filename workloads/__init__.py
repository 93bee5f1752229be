"""Training workloads as Kubernetes resources: pure builders plus a thin Pulumi layer."""
