"""Fixed ports the programs bind lie outside Linux's ephemeral range in the pod's network namespace
(tests/upstream/linux-ephemeral-ports.yaml: the kernel's default 32768-60999, left as is by the
AL2023 AMI; an unprivileged pod cannot reserve a port as the upstream scripts do on hosts), so no
outgoing connection of the pod can be handed the port before the program binds it."""

from __future__ import annotations

import itertools
import re

import pytest

from tests import upstream
from tests.conftest import stack_plan
from tests.pods import pods, rendered_stacks

LOW, HIGH = upstream.facts("linux-ephemeral-ports")["ephemeral_range"]
ROOT_COMM = re.compile(r"NEURON_RT_ROOT_COMM_ID=\$root:(\d+)")


def _bound_ports(stack: str) -> list[tuple[str, int]]:
    out = []
    for pod in pods(stack_plan(stack)):
        for c in pod.spec["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if env.get("MASTER_PORT"):
                out.append((f"{pod.name} MASTER_PORT", int(env["MASTER_PORT"])))
            out += [
                (f"{pod.name} NEURON_RT_ROOT_COMM_ID", int(p))
                for p in ROOT_COMM.findall(" ".join(c.get("command", [])))
            ]
            out += [(f"{pod.name} containerPort", p["containerPort"]) for p in c.get("ports", [])]
            words = c.get("command", [])
            # vLLM's rendezvous on a group's leader (its default when not given: 29501).
            pairs = itertools.pairwise(words)
            out += [(f"{pod.name} --master-port", int(v)) for k, v in pairs if k == "--master-port"]
    return out


@pytest.mark.parametrize("stack", [s for s in rendered_stacks() if "+" not in s])
def test_bound_ports_are_outside_the_ephemeral_range(stack: str) -> None:
    ports = _bound_ports(stack)
    inside = [(what, port) for what, port in ports if LOW <= port <= HIGH]
    assert not inside, f"{stack}: ports inside {LOW}-{HIGH}: {inside}"


def test_the_rule_sees_the_ports() -> None:
    assert any("MASTER_PORT" in what for what, _ in _bound_ports("trn1-llama2"))
    assert any("NEURON_RT_ROOT_COMM_ID" in what for what, _ in _bound_ports("trn1-llama2"))
    assert any("--master-port" in what for what, _ in _bound_ports("p5-serve-405b"))
