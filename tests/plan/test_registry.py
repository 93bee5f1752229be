"""ECR: immutable, scanned, KMS-encrypted, protected repositories; pull-only access for nodes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from config.workloads import RECIPES
from infra.iam import ECR_PULL_ACTIONS as PULL_ACTIONS
from tests.conftest import BASE, MINIMAL, plan_exit, resources, run_plan, stack_plan

REPO = "aws:ecr/repository:Repository"
BUILT = {model.REPOSITORY for model in RECIPES.values() if model.REPOSITORY}
"""The repository of every recipe whose image a stack builds (the default set)."""


DEFAULT_REPOSITORIES = {
    "neuronx-nemo-megatron",
    "nemo",
    "bert-neuronx",
    "nemo-megatron-bridge",
    "neuronx-distributed",
    "torchtitan",
    "gpu-fabric",
    "neuron-fabric",
    "fio",
}
"""One per recipe image built from images/."""


def test_default_repositories_for_the_example_workloads(example_stack: str) -> None:
    plan = stack_plan(example_stack)
    repos = {r["inputs"]["name"].split("/", 1)[1]: r for r in resources(plan, REPO)}
    assert set(repos) == BUILT == DEFAULT_REPOSITORIES
    for r in repos.values():
        i = r["inputs"]
        assert i["imageTagMutability"] == "IMMUTABLE"
        assert i["imageScanningConfiguration"]["scanOnPush"] is True
        assert i["encryptionConfigurations"][0]["encryptionType"] == "KMS"
        assert i["encryptionConfigurations"][0]["kmsKey"].startswith("arn:aws:kms:")
        assert i["forceDelete"] is False
        assert r["protect"] is True
    assert set(plan["outputs"]["registryUrls"]) == BUILT


def test_lifecycle_expires_untagged_images_only() -> None:
    plan = stack_plan("dev")
    for lp in resources(plan, "aws:ecr/lifecyclePolicy:LifecyclePolicy"):
        rules = json.loads(lp["inputs"]["policy"])["rules"]
        assert [r["selection"]["tagStatus"] for r in rules] == ["untagged"]
        assert rules[0]["selection"]["countNumber"] == 7


def test_nodes_get_pull_only_access() -> None:
    plan = stack_plan("dev")
    node_role_arn = next(r for r in resources(plan, "aws:iam/role:Role") if r["name"] == "cluster-node")
    policies = resources(plan, "aws:ecr/repositoryPolicy:RepositoryPolicy")
    assert len(policies) == len(BUILT)
    for p in policies:
        (stmt,) = json.loads(p["inputs"]["policy"])["Statement"]
        assert stmt["Action"] == PULL_ACTIONS
        assert stmt["Principal"]["AWS"].endswith("role/" + node_role_arn["name"])
        assert not any(a.startswith(("ecr:Put", "ecr:Delete", "ecr:Upload")) for a in stmt["Action"])


def test_repositories_from_config() -> None:
    values = {
        **MINIMAL,
        "llm-training-eks:registry": {
            "repositories": {"nccl-tests": {"scanOnPush": False, "untaggedExpiryDays": 3}, "nemo": {}}
        },
    }
    plan = run_plan(values)
    repos = {r["inputs"]["name"]: r["inputs"] for r in resources(plan, REPO)}
    assert set(repos) == {"llm-training/nccl-tests", "llm-training/nemo"}
    assert repos["llm-training/nccl-tests"]["imageScanningConfiguration"]["scanOnPush"] is False


BAD_REGISTRY = [
    ({"repositories": {"nemo": {"scanOnPsh": True}}}, "registry.repositories.nemo.scanOnPsh: unknown key"),
    ({"repositories": {"nemo": {"tagMutability": "MUTABLE"}}}, "registry.repositories.nemo.tagMutability: unknown key"),
    ({"repositories": {"Bad_Name": {}}}, "registry.repositories: 'Bad_Name' is not an ECR repository name"),
    ({"repositories": {"nemo": {"untaggedExpiryDays": 0}}}, "registry.repositories.nemo.untaggedExpiryDays"),
    ({"repositories": ["nemo"]}, "registry.repositories"),
    ({"repos": {}}, "registry.repos: unknown key; valid keys here: repositories"),
]


@pytest.mark.parametrize(("registry", "expected"), BAD_REGISTRY)
def test_bad_registry_config_exits_2_naming_the_key(registry: dict[str, Any], expected: str, tmp_path: Any) -> None:
    code, err = plan_exit({**BASE, "llm-training-eks:registry": registry}, tmp_path)
    assert code == 2
    assert expected in err
