"""huggingface-hub 1.24.0's `hf` CLI writes its update check into $HF_HOME
(`.check_for_update_done`, tests/upstream/huggingface-hub-1.24.0.yaml `env.writes_home`): every
Job of every example stack that runs `hf` has an HF_HOME outside its read-only mounts (the
token Secret's), and the token file by HF_TOKEN_PATH where it mounts one. The launch harness's
`hf` stand-in fails the same way (tests/launch/test_serving_chain.py)."""

from __future__ import annotations

from tests import upstream
from tests.conftest import resources, stack_plan

HUB = upstream.facts("huggingface-hub-1.24.0")["env"]


def test_hf_runs_with_a_writable_home(example_stack: str) -> None:
    for job in resources(stack_plan(example_stack), "kubernetes:batch/v1:Job"):
        spec = job["inputs"]["spec"]["template"]["spec"]
        for c in spec["containers"]:
            if "hf download" not in "\n".join([*c.get("command", []), *c.get("args", [])]):
                continue
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            home = env.get(HUB["home"]) or "/tmp/.cache/huggingface"  # HOME is /tmp in these pods
            read_only = [m["mountPath"] for m in c.get("volumeMounts", []) if m.get("readOnly")]
            name = job["inputs"]["metadata"]["name"]
            assert not any(home == p or home.startswith(p + "/") for p in read_only), (name, home, read_only)
            if read_only and any("hf-token" in m["name"] for m in c.get("volumeMounts", [])):
                assert env.get(HUB["token_file"], "").startswith(tuple(read_only)), (name, env)
