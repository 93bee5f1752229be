"""Config refused where the real system would refuse it, with exit 2 and a line naming the key.

Each case is a value AWS, Kubernetes, the kubelet or the MPI operator refuses (their rules are in
botocore's models, tests/upstream/ and facts/), or a YAML typo that would otherwise pass silently.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import pytest

import config
from config import aws, base
from tests.conftest import BASE, MINIMAL, ROOT, plan_exit

NS = "llm-training-eks:"
RUN = {"recipe": "bert-neuron", "nodeGroup": "trn1", "nodes": 2, "runId": "run-001", "stepSeconds": 2.0}


def _set(values: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`values` with `path` (`cluster.name`, `nodeGroups[0].labels`, `aws:region`) set."""
    out = copy.deepcopy(values)
    if path.startswith("aws:"):
        out[path] = value
        return out
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node: Any = out
    key: Any = NS + parts[0]
    for part in parts[1:]:
        if key not in node if isinstance(node, dict) else False:
            node[key] = {}
        node = node[key]
        key = int(part[1:-1]) if part.startswith("[") else part
    node[key] = value
    return out


def _refused(values: dict[str, Any], key: str, word: str = "") -> list[str]:
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values(values)
    lines = [p for p in e.value.problems if p.startswith(key)]
    assert lines, f"no line starts with {key!r}: {e.value.problems}"
    assert any(word.lower() in line.lower() for line in lines), lines
    return lines


WITH_RUN = {**MINIMAL, NS + "workloads": {"bert": RUN}}
RUNNER = {"enabled": True, "repository": "my-org/llm-training-eks", "previewActorIds": [1], "deployActorIds": [1]}
AWS_LAYER = {**BASE, NS + "layer": "aws", NS + "ciRunner": RUNNER}

# (base values, key path, a valid value): each is refused with a trailing newline, and with
# its ASCII digits written in Arabic-Indic digits (both pass `re.match(...$)` or `\d`).
VALIDATED_TEXT = [
    (MINIMAL, "aws:region", "us-west-2"),
    (MINIMAL, "nodeGroups[0].availabilityZone", "us-west-2d"),
    (MINIMAL, "nodeGroups[0].name", "trn1"),
    (MINIMAL, "cluster.name", "llm-dev2"),
    (MINIMAL, "cluster.publicAccessCidrs[0]", "203.0.113.10/32"),
    (MINIMAL, "cluster.privateAccessSecurityGroupIds", ["sg-0123456789abcdef0"]),
    (MINIMAL, "cluster.adminPrincipalArns", ["arn:aws:iam::123456789012:role/admin"]),
    (MINIMAL, "network.cidr", "10.0.0.0/16"),
    (MINIMAL, "network.availabilityZones", ["us-west-2a", "us-west-2d"]),
    (MINIMAL, "storage.dailyBackupStartTime", "05:00"),
    (MINIMAL, "addons.kueueChart", "0.19.2"),
    (MINIMAL, "addons.mpiOperatorVersion", "v0.8.0"),
    (MINIMAL, "addons.eksAddonVersions.vpcCni", "v1.20.1-eksbuild.3"),
    (MINIMAL, "addons.mpiOperatorImage", "123456789012.dkr.ecr.us-west-2.amazonaws.com/mpi-operator:0.8.0"),
    (MINIMAL, "registry.repositories", {"nemo2": {}}),
    (MINIMAL, "tags", {"team": "ml"}),
    (MINIMAL, "nodeGroups[0].labels", {"pool": "a1"}),
    (WITH_RUN, "workloads.bert.runId", "run-001"),
    (WITH_RUN, "workloads.bert.neuronSdk", "2.22.0"),
    (WITH_RUN, "workloads.bert.imageTag", "v1.2.3"),
    (WITH_RUN, "workloads.bert.healthCheck.messageSize", "2G"),
    (WITH_RUN, "workloads.bert.env", {"NCCL_DEBUG": "INFO"}),
    (AWS_LAYER, "ciRunner.repository", "my-org/llm-training-eks"),
    (AWS_LAYER, "ciRunner.stateBucket", "my-state-1"),
]
ARABIC_INDIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def _hostile(value: Any, how: str) -> Any:
    if isinstance(value, str):
        return value + "\n" if how == "newline" else value.translate(ARABIC_INDIC)
    if isinstance(value, list):
        return [_hostile(value[0], how)]
    return {
        _hostile(k, how) if how == "newline" or any(c.isdigit() for c in k) else k: _hostile(v, how)
        for k, v in value.items()
    }


@pytest.mark.parametrize(("values", "path", "good"), VALIDATED_TEXT, ids=[c[1] for c in VALIDATED_TEXT])
def test_trailing_newlines_and_non_ascii_digits_are_refused(values: dict[str, Any], path: str, good: Any) -> None:
    config.parse_stack_values(_set(values, path, good))  # the valid value passes
    key = path.split("[")[0].removesuffix(".runId").rsplit(".", 0)[0]
    for how in ("newline", "digits"):
        bad = _hostile(good, how)
        if bad == good:
            continue
        with pytest.raises(config.ConfigError) as e:
            config.parse_stack_values(_set(values, path, bad))
        assert any(p.startswith(key.split(".")[0]) for p in e.value.problems), (how, e.value.problems)


def test_every_pattern_of_config_and_facts_is_ascii_and_matched_whole() -> None:
    """No `re.match` (its `$` takes a trailing newline) and no pattern compiled without re.ASCII
    (`\\d` and `\\w` take other scripts' digits and letters) in config/ and facts/."""
    found = []
    for path in sorted([*(ROOT / "config").rglob("*.py"), *(ROOT / "facts").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if node.func.attr == "match":
                found.append(f"{where}: .match()")
            if node.func.attr == "compile" and getattr(node.func.value, "id", "") == "re":
                flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
                if "ASCII" not in flags and path.name not in ("aws.py", "stackfile.py"):
                    found.append(f"{where}: re.compile without re.ASCII")
    assert not found, found


def test_aws_java_patterns_keep_their_ascii_classes() -> None:
    """AWS publishes Java patterns, whose \\d is ASCII; Python's would take Arabic-Indic digits."""
    address = "fsx:CreateFileSystem:LustreConfiguration.DailyAutomaticBackupStartTime"
    assert aws.problems("05:00", address) == []
    assert aws.problems("05:00".translate(ARABIC_INDIC), address)
    assert aws.problems("role\u00e9", "iam:CreateRole:RoleName")  # [\w+=,.@-]+ in Java is ASCII
    assert aws.problems("team\u00e9", "eks:TagResource:tags.<key>") == []  # \p{L} is any letter


@pytest.mark.parametrize(
    ("path", "value", "key", "word"),
    [
        # YAML typos: `true` as a count, a quoted number, an unquoted version, a float where a count is.
        ("nodeGroups[0].desiredSize", True, "nodeGroups[0].desiredSize", "true/false is not a number"),
        ("nodeGroups[0].desiredSize", "2", "nodeGroups[0].desiredSize", "without quotes"),
        ("nodeGroups[0].desiredSize", 2.0, "nodeGroups[0].desiredSize", "whole number"),
        ("cluster.kubernetesVersion", 1.35, "cluster.kubernetesVersion", "quotes"),
        ("tags", {"cost-center": 1234}, "tags.cost-center", "quotes"),
        ("storage.sync_deletes", True, "storage.sync_deletes", "did you mean 'syncDeletes'? keys are camelCase"),
        ("network.flowLogs", "yes", "network.flowLogs", "without quotes"),
        # Numbers: int32 and finite.
        ("nodeGroups[0].maxSize", 2**31, "nodeGroups[0].maxSize", "32-bit"),
        ("queueing.requeueLimit", float("nan"), "queueing.requeueLimit", ""),
        ("nodeGroups[0].maxUnavailable", 101, "nodeGroups[0].maxUnavailable", "100"),
        # Names that end up in S3 and ECR: no capitals; S3's reserved prefixes.
        ("cluster.name", "LLM-Dev", "cluster.name", "no capitals"),
        ("cluster.name", "xn--llm", "cluster.name", "S3 refuses"),
        ("cluster.name", "llm-", "cluster.name", "hyphen"),
        # One ingress rule per security group: EC2 refuses a duplicate (found by a long fuzz run).
        (
            "cluster.privateAccessSecurityGroupIds",
            ["sg-0123456789abcdef0", "sg-0123456789abcdef0"],
            "cluster.privateAccessSecurityGroupIds",
            "twice",
        ),
        # EKS access entries: IAM principals of this partition, once each.
        (
            "cluster.adminPrincipalArns",
            ["arn:aws:sts::123456789012:assumed-role/admin/me"],
            "cluster.adminPrincipalArns",
            "STS",
        ),
        ("cluster.adminPrincipalArns", ["arn:aws:iam::123456789012:role/a"] * 2, "cluster.adminPrincipalArns", "twice"),
        ("cluster.publicAccessCidrs", ["10.0.0.0/016"], "cluster.publicAccessCidrs", "'10.0.0.0/16'"),
        ("cluster.publicAccessCidrs", ["203.0.113.1/32", "203.0.113.1/32"], "cluster.publicAccessCidrs", "twice"),
        # Node labels: Kubernetes' rules, the kubelet's reserved prefixes, the platform's own labels.
        ("nodeGroups[0].labels", {"llm-training-eks/node-group": "x"}, "nodeGroups[0].labels", "platform"),
        ("nodeGroups[0].labels", {"vpc.amazonaws.com/efa.present": "false"}, "nodeGroups[0].labels", "platform"),
        ("nodeGroups[0].labels", {"node-role.kubernetes.io/worker": "true"}, "nodeGroups[0].labels", "kubelet refuses"),
        ("nodeGroups[0].labels", {"a/b/c": "x"}, "nodeGroups[0].labels", "Kubernetes label rules"),
        ("nodeGroups[0].labels", {"team": "-x"}, "nodeGroups[0].labels", "Kubernetes label rules"),
    ],
)
def test_values_real_systems_refuse_exit_2_naming_the_key(path: str, value: Any, key: str, word: str) -> None:
    _refused(_set(MINIMAL, path, value), key, word)


def test_kubelet_allowed_and_plain_labels_pass() -> None:
    config.parse_stack_values(_set(MINIMAL, "nodeGroups[0].labels", {"node.kubernetes.io/pool": "a", "team": "x"}))


def test_snake_case_synonyms_are_refused_at_the_top_too() -> None:
    values = {**MINIMAL, NS + "node_groups": MINIMAL[NS + "nodeGroups"]}
    _refused(values, "node_groups", "did you mean 'nodeGroups'? keys are camelCase")


@pytest.mark.parametrize(
    ("workloads", "key", "word"),
    [
        # A Service and the MPI operator's host names are DNS-1035 labels: start with a letter.
        ({"1bert": RUN}, "workloads.1bert", "starting with a letter"),
        # `a` + `b-run-001` and `a-b` + `run-001` both make the MPIJob `a-b-run-001-train`.
        (
            {"a": {**RUN, "runId": "b-run-001"}, "a-b": RUN},
            "workloads.a-b.runId",
            "like workloads.a's",
        ),
        # <job>-worker-<i> over 63 characters: the operator refuses the MPIJob.
        (
            {"b" * 20: {**RUN, "runId": "r" * 20, "nodes": 2}},
            "",
            "",
        ),
    ],
)
def test_run_names_make_valid_distinct_kubernetes_names(workloads: dict[str, Any], key: str, word: str) -> None:
    values = {**MINIMAL, NS + "workloads": workloads}
    if not key:
        config.parse_stack_values(values)  # 20 + 20 characters still fit: 20-20-train-worker-1 is 56
        big = {"b" * 20: {**RUN, "runId": "r" * 20, "nodes": 200_000_000}}  # ...-worker-199999999 is 64
        ng = {**MINIMAL[NS + "nodeGroups"][0], "maxSize": 200_000_000}
        values = {**MINIMAL, NS + "nodeGroups": [ng], NS + "workloads": big}
        key, word = f"workloads.{'b' * 20}.runId", "worker"
    _refused(values, key, word)


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"HF_TOKEN": "abc-token"}, "HF_TOKEN"),
        ({"WANDB_API_KEY": "0123abcd"}, "WANDB_API_KEY"),
        ({"DB_PASSWORD": "correct-horse"}, "DB_PASSWORD"),
        ({"INNOCENT": "hf_" + "a" * 34}, "INNOCENT"),
        ({"X": "AKIA" + "A" * 16}, "X"),
    ],
)
def test_secrets_in_plain_env_are_refused(env: dict[str, str], var: str) -> None:
    values = {**MINIMAL, NS + "workloads": {"bert": {**RUN, "env": env}}}
    line = _refused(values, f"workloads.bert.env.{var}:", "encrypted")[0]
    assert "move it to secretEnv" in line and f"--path 'workloads.bert.secretEnv.{var}'" in line
    assert env[var] not in line  # the message never repeats the secret


def test_plain_env_that_only_looks_alike_passes() -> None:
    env = {"TOKENIZERS_PARALLELISM": "false", "MAX_TOKENS": "4096", "HF_TOKEN": ""}
    secret_env = {"HF_TOKEN_2": "[secret]"}  # stored encrypted: in secretEnv (an encrypted env value is refused)
    config.parse_stack_values({**MINIMAL, NS + "workloads": {"bert": {**RUN, "env": env, "secretEnv": secret_env}}})


def test_output_is_bounded_one_short_line_per_problem(tmp_path: Path) -> None:
    groups = [{"name": f"g{i}", "instanceType": "x" * 1000, "desiredSize": True} for i in range(300)]
    code, err = plan_exit({**BASE, NS + "nodeGroups": groups}, tmp_path)
    lines = err.splitlines()
    assert code == 2 and len(lines) == config.MAX_PROBLEMS + 1 and lines[-1].startswith("... and ")
    assert max(map(len, lines)) <= config.MAX_LINE
    assert len(err) < 20_000


def test_a_value_with_control_characters_prints_as_one_line(tmp_path: Path) -> None:
    code, err = plan_exit({**MINIMAL, "aws:region": "us-west-2\n\x1b[31mowned"}, tmp_path)
    assert code == 2 and "\x1b" not in err
    starts = (
        "aws:region:",
        "nodeGroups[0].availabilityZone:",
        "storage.availabilityZone:",
        "network.availabilityZones",
    )
    assert all(line.startswith(starts) for line in err.splitlines())


def test_matches_refuses_a_pattern_without_ascii() -> None:
    with pytest.raises(ValueError, match=r"re\.ASCII"):
        base.matches(re.compile(r"\d+"), "1")
