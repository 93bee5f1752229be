"""What the pods of one MPIJob may say to each other, on top of their namespace's default deny
(infra.tenancy): everything, and only among themselves.

The launcher reaches every worker over ssh (22) and mpirun's daemons on the workers call back
to it; the workers open the rendezvous (MASTER_PORT), NCCL's and the Neuron runtime's
bootstrap sockets, and the EFA provider's TCP fallback to each other, several on ephemeral
ports. So the policy names its peers, not ports: the pods carrying the job's name in the label
mpi-operator v0.8.0 sets on every pod it creates for the job (`training.kubeflow.org/job-name`).
EFA's own traffic bypasses the IP stack and NetworkPolicy alike.
"""

from __future__ import annotations

from facts.names import MPI_JOB_NAME_LABEL, app_labels
from infra.tenancy import NETWORK_POLICY_API_VERSION
from workloads.manifests.objects import Context, Obj, meta


def job_peers(job: str, ctx: Context) -> Obj:
    """The NetworkPolicy that lets the pods of MPIJob `job` reach each other, and nothing else."""
    peers = [{"podSelector": {"matchLabels": {MPI_JOB_NAME_LABEL: job}}}]
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": meta(f"{job}-peers", ctx, app_labels("network")),
        "spec": {
            "podSelector": {"matchLabels": {MPI_JOB_NAME_LABEL: job}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        },
    }
