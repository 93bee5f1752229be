"""How a served model is reached from outside the cluster: an internal Network Load Balancer that the
AWS Load Balancer Controller (v3.5.0) makes for a Service, and the NetworkPolicy that lets its
traffic in (pure builders; the recipe's `endpoint: internalLoadBalancer`).

The controller reconciles a Service annotated `aws-load-balancer-type: external` (its Service
webhook is off here, so it takes no other): an NLB with the `internal` scheme in the private
subnets, its targets the pods' own IPs (`ip`: the VPC CNI gives each pod one, no NodePort hop),
TLS on 443 with an ACM certificate when one is configured. Security groups: the controller
creates a frontend group per NLB (the listener port, open to 0.0.0.0/0 by default, which an
internal scheme limits to the VPC and what is routed to it) and one shared backend group, and
itself adds to the pods' ENI security group (the cluster security group, the one carrying
`kubernetes.io/cluster/<cluster>`) an inbound rule from that backend group on the server's
port; the node groups need no rule of ours. Client IP preservation is off for ip targets, so
the pods see the NLB's own addresses in the private subnets: those CIDRs are what the
NetworkPolicy admits, on the server's port only.
"""

from __future__ import annotations

from config.workloads import VllmServeWorkload
from facts import load_balancer_controller as lbc
from facts import serving
from infra.platform import InternalLoadBalancing
from workloads.manifests.objects import Context, Obj, labels, meta
from workloads.manifests.serve_policies import server_ingress

DEREGISTRATION_SECONDS = 120
"""The target group's deregistration delay (ELB's default is 300 s): a stopping replica's open
connections keep flowing this long, enough for a streamed completion of several thousand tokens;
longer would hold every rollout and drain step that much longer."""
DEREGISTER_MARGIN_SECONDS = 15
"""From the pod's endpoint leaving the Service to the controller's DeregisterTargets call."""
SHUTDOWN_SECONDS = 60
"""vLLM's own stop after SIGTERM (the grace period a server has without a load balancer)."""


def balanced(run: VllmServeWorkload) -> bool:
    """The run asks for an internal load balancer."""
    return run.endpoint == "internalLoadBalancer"


def _placement(ctx: Context) -> InternalLoadBalancing:
    assert ctx.load_balancing is not None, "config.checks refuses internalLoadBalancer without a controller"
    return ctx.load_balancing


def nlb_annotations(run: VllmServeWorkload, ctx: Context) -> dict[str, str]:
    """The controller's annotations: an internal NLB to the pods' IPs in the private subnets, and
    TLS on 443 with the configured certificate."""
    out = {
        lbc.LB_TYPE: lbc.LB_TYPE_EXTERNAL,
        lbc.NLB_TARGET_TYPE: lbc.NLB_TARGET_IP,
        lbc.LB_SCHEME: lbc.LB_SCHEME_INTERNAL,
        lbc.LB_SUBNETS: ", ".join(_placement(ctx).subnets),
    }
    if run.certificate_arn:
        out[lbc.SSL_CERT] = run.certificate_arn
        out[lbc.SSL_PORTS] = str(lbc.TLS_PORT)
        # The controller's default (ELBSecurityPolicy-2016-08) still accepts TLS 1.0 and 1.1.
        out[lbc.SSL_NEGOTIATION_POLICY] = lbc.TLS_POLICY
    out[lbc.TARGET_GROUP_ATTRIBUTES] = f"{lbc.DEREGISTRATION_DELAY}={DEREGISTRATION_SECONDS}"
    return out


def stop_seconds() -> tuple[int, int]:
    """A load-balanced replica's (preStop sleep, terminationGracePeriodSeconds): it keeps serving
    until the NLB has deregistered it and drained its connections (the delay and the controller's
    margin), then vLLM stops on SIGTERM within the rest of the grace period."""
    pre_stop = DEREGISTRATION_SECONDS + DEREGISTER_MARGIN_SECONDS
    return pre_stop, pre_stop + SHUTDOWN_SECONDS


def draining(run: VllmServeWorkload) -> tuple[int, dict[str, object]]:
    """The grace period and the container's `lifecycle` of a server pod: without a load balancer
    vLLM's own stop; behind one, a preStop sleep (Kubernetes' sleep handler, stable since 1.34: no
    binary from the image) that outlasts the target group's deregistration."""
    if not balanced(run):
        return SHUTDOWN_SECONDS, {}
    pre_stop, grace = stop_seconds()
    return grace, {"lifecycle": {"preStop": {"sleep": {"seconds": pre_stop}}}}


def listener_port(run: VllmServeWorkload) -> int:
    """The load balancer's port: 443 with TLS, else the server's own."""
    return lbc.TLS_PORT if run.certificate_arn else serving.PORT


def load_balancer_service(workload_name: str, run: VllmServeWorkload, ctx: Context) -> Obj:
    """A Service of type LoadBalancer beside the ClusterIP one (whose name and port in-cluster
    clients keep). No node ports: ip targets do not use them, so no node opens one."""
    port = listener_port(run)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(f"{workload_name}-lb", ctx, labels(workload_name, "serve"), nlb_annotations(run, ctx)),
        "spec": {
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": False,
            "selector": labels(workload_name, "serve"),
            "ports": [
                {
                    "name": "https" if run.certificate_arn else "http",
                    "port": port,
                    "targetPort": "http",
                    "protocol": "TCP",
                }
            ],
        },
    }


def load_balancer_ingress(workload_name: str, ctx: Context) -> Obj:
    """The NLB's connections (and its health checks, on the traffic port) into the server, from
    its addresses in the private subnets, on the server's port only."""
    peers = [{"ipBlock": {"cidr": cidr}} for cidr in _placement(ctx).cidrs]
    return server_ingress(f"{workload_name}-lb-ingress", workload_name, ctx, peers)
