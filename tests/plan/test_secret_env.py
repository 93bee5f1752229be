"""`secure:` values of a workload's environment reach the pods through a Kubernetes Secret and
`secretKeyRef`, never the objects: the plan shows placeholders, and under the engine (where the
program gets the decrypted value) no rendered object holds it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import config
from config.stackfile import SECRET
from tests import upstream
from tests.conftest import plan_exit, stack_values
from tools import plan as plan_mod
from tools.offline import mocks

PLAINTEXT = "wandb-0123456789abcdef-plaintext"
WORKLOAD = "llm-training-eks:workloads"


def with_secret_env(value: Any, **more: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values("trn1-llama2"))
    values[WORKLOAD]["llama2"]["secretEnv"] = {"WANDB_API_KEY": value}
    values[WORKLOAD]["llama2"].update(more)
    return values


def named(plan: dict[str, Any], name: str) -> dict[str, Any]:
    (r,) = [r for r in plan["resources"] if r["name"] == name]
    return dict(r["inputs"])


def test_a_secret_env_value_reaches_the_pods_through_a_secret() -> None:
    plan = plan_mod.run(with_secret_env(SECRET), "trn1-llama2")
    secret = named(plan, "llama2-env")
    assert secret["kind"] == "Secret" and secret["stringData"] == {"WANDB_API_KEY": SECRET}
    job = named(plan, "llama2-run-001-train")
    assert named(plan, "llama2-env")["metadata"]["namespace"] == job["metadata"]["namespace"]
    for replica in job["spec"]["mpiReplicaSpecs"].values():
        (c,) = replica["template"]["spec"]["containers"]
        ref = {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llama2-env", "key": "WANDB_API_KEY"}}}
        assert ref in c["env"]
        assert not any(e["name"] == "WANDB_API_KEY" and "value" in e for e in c["env"])
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
    assert "-x WANDB_API_KEY" in launcher  # ranks started over ssh get it from mpirun
    job_urn = next(r for r in plan["resources"] if r["name"] == "llama2-run-001-train")
    secret_urn = next(r["urn"] for r in plan["resources"] if r["name"] == "llama2-env")
    assert secret_urn in job_urn["dependencies"]


def test_under_the_engine_no_object_holds_the_decrypted_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine hands the program the decrypted `workloads` object and marks the whole key
    secret (tests/upstream/pulumi-config-secrets-3.259.yaml); emulated here. The value goes to
    the Secret's stringData as a Pulumi secret, and nowhere else."""
    facts = upstream.facts("pulumi-config-secrets-3.259")
    assert "top-level keys only" in facts["secure_keys"] and facts["blinded_leaf"] == SECRET
    engine_secret_keys = ["llm-training-eks:huggingFaceToken", WORKLOAD]
    monkeypatch.setattr(plan_mod, "secret_keys", lambda values: engine_secret_keys)
    monkeypatch.setattr(config, "secret_keys", lambda values: engine_secret_keys)
    seen: list[mocks.RecordingMonitor] = []
    install = mocks.install

    def recording(*args: Any, **kwargs: Any) -> mocks.RecordingMonitor:
        seen.append(install(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(plan_mod.mocks, "install", recording)
    plan = plan_mod.run(with_secret_env(PLAINTEXT), "trn1-llama2")
    assert PLAINTEXT not in plan_mod.to_json(plan)
    holders = [r for r in seen[-1].registrations.values() if PLAINTEXT in json.dumps(r.inputs, default=str)]
    assert [r.name for r in holders] == ["llama2-env"]
    data = holders[0].inputs["stringData"]
    assert data["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270"  # a Pulumi secret
    assert data["value"] == {"WANDB_API_KEY": PLAINTEXT}


def test_a_plain_secret_env_value_is_refused_naming_its_key(tmp_path: Path) -> None:
    values = with_secret_env(PLAINTEXT)
    values["llm-training-eks:huggingFaceToken"] = {"secure": "AAAB"}
    code, err = plan_exit(values, tmp_path)
    assert code == 2, err
    assert (
        "workloads.llama2.secretEnv.WANDB_API_KEY: must be stored encrypted, not in plain text:"
        " pulumi config set --path --secret 'workloads.llama2.secretEnv.WANDB_API_KEY' <value>"
    ) in err
    assert PLAINTEXT not in err


def test_an_encrypted_env_value_is_refused_pointing_at_secret_env(tmp_path: Path) -> None:
    values = copy.deepcopy(stack_values("trn1-llama2"))
    values[WORKLOAD]["llama2"]["env"] = {"WANDB_API_KEY": {"secure": "AAAB"}}
    values["llm-training-eks:huggingFaceToken"] = {"secure": "AAAB"}
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump({"config": values}))
    code, err = plan_exit(yaml.safe_load(path.read_text())["config"], tmp_path)
    assert code == 2, err
    assert "workloads.llama2.env.WANDB_API_KEY: is stored encrypted, but env values are written into the objects" in err


def test_under_the_engine_a_secret_env_needs_the_workloads_key_secret() -> None:
    raw = config.from_stack_values(with_secret_env(PLAINTEXT))
    with pytest.raises(config.ConfigError) as e:
        config.parse(raw, secret_keys=["huggingFaceToken"])
    assert any(
        p.startswith("workloads.llama2.secretEnv.WANDB_API_KEY: must be stored encrypted") for p in e.value.problems
    )
    assert config.parse(raw, secret_keys=["huggingFaceToken", "workloads"]).workloads["llama2"].secret_env


@pytest.mark.parametrize(
    ("secret_env", "env", "expected"),
    [
        ({"1X": SECRET}, {}, "workloads.llama2.secretEnv: '1X' is not an environment variable name"),
        ({"X": SECRET}, {"X": "1"}, "workloads.llama2.secretEnv.X: is also in env"),
    ],
)
def test_bad_secret_env_names_exit_2(
    tmp_path: Path, secret_env: dict[str, str], env: dict[str, str], expected: str
) -> None:
    values = with_secret_env(SECRET)
    values[WORKLOAD]["llama2"].update(secretEnv=secret_env, env=env)
    values["llm-training-eks:huggingFaceToken"] = {"secure": "AAAB"}
    code, err = plan_exit(values, tmp_path)
    assert code == 2 and expected in err, err
