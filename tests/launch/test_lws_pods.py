"""How the harness makes a LeaderWorkerSet's pods (tests/launch/lws.py), held to LWS v0.9.0
(tests/upstream/lws-v0.9.0.yaml: pkg/utils/pod/pod_utils.go AddLWSVariables) and to the
kubelet's expansion of `$(VAR)` in a container's command and args (Kubernetes' documented
"Define a command and arguments": `$(VAR)` from the container's environment, `$$` escapes)."""

from __future__ import annotations

import pytest

from tests import upstream
from tests.launch import lws

LWS = upstream.facts("lws-v0.9.0")


def test_the_leader_address_is_the_one_lws_injects() -> None:
    # The default "Shared" subdomain policy: the pods' subdomain is the set's headless Service, named as the set.
    template = LWS["leader_address"]
    expected = template.replace("<lws>", "serve").replace("<group-index>", "3").replace("<subdomain>", "serve")
    assert lws.leader_address("serve", 3, "training") == expected.replace("<namespace>", "training")
    assert set(LWS["injected_env"]) == {"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(LWS_WORKER_INDEX)", "1"),
        ("--x=$(LWS_LEADER_ADDRESS):29501", "--x=a.b.c:29501"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$$(LWS_WORKER_INDEX)", "$(LWS_WORKER_INDEX)"),
        ("cost $$5", "cost $5"),
    ],
)
def test_arguments_expand_as_the_kubelet_expands_them(text: str, expanded: str) -> None:
    env = {"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "a.b.c"}
    assert lws.expand(text, env) == expanded
