"""A seeded mutator of stack files and the contract every mutant must keep.

The contract (docs/configuration.md, "What config refuses"): a stack file either plans with exit 0, and then
everything it declares passes the rules of the systems it reaches (botocore's models for the
AWS inputs, Kubernetes' name and label rules for the objects), or it exits 2 with one short
line per problem naming its key (or the file, for a file that is not a stack file), with
bounded output, no traceback, quickly. The stack file and the engine's view of the same
values (`engine_value`, then `from_stack_values`) must agree.

`cases(seed, n)` makes mutants of the example stacks: keys dropped, renamed (typos, snake_case,
another namespace), list items duplicated, values retyped, boundary numbers, unicode and
long strings, values other systems refuse, and text-level changes (aliases, anchors,
duplicate keys, deep nesting, tags, unquoted versions). Each mutant is a stack-file text.
"""

from __future__ import annotations

import copy
import gzip
import io
import ipaddress
import json
import random
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import moto

import config
from config.stack import StackConfig
from config.stackfile import UsageError, engine_value, from_stack_values, load_yaml, namespace_problems, read_stack_file
from facts import kubernetes
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, example_file, stack_yaml
from tests.plan.test_aws_inputs import SHAPES, values_at
from tools import plan as plan_mod
from tools.cli import bad_input

NS = "llm-training-eks:"
OFFERINGS = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "availability-zone"
ROOTS = {info.alias or name for name, info in StackConfig.model_fields.items()} | {"aws"}
MAX_STDERR = (config.MAX_PROBLEMS + 1) * (config.MAX_LINE + 1)
CASE_SECONDS = 2.0
"""CPU seconds one mutant may take to read and validate (CPU, not wall time: a loaded machine
stretches wall time, a hang or an expanding document does not depend on it)."""
TAG_VALUE = "eks:TagResource:tags.{}"
ENV_NAME = upstream.facts("kubernetes-names")["env_var_name"]["format"]
"""Kubernetes' envVarNameFmt (apimachinery validation.go)."""

ARABIC_INDIC = "".join(chr(0x0660 + i) for i in range(10))
FULLWIDTH = "".join(chr(0xFF10 + i) for i in range(10))
BOUNDARY = [0, -1, 1, 2, 100, 101, 2**31 - 1, 2**31, 2**63, -(2**31) - 1, 0.5, -0.0, 1e308, 3.14, 1.30, 1.35]
RETYPE: list[Any] = [True, False, None, "", "3", "true", 7, 2.5, [], {}, ["x"], {"a": 1}, "x" * 64]
UNICODE = [
    lambda s: s + "\n",
    lambda s: s.translate(str.maketrans("0123456789", ARABIC_INDIC)),  # Arabic-Indic digits
    lambda s: s.translate(str.maketrans("0123456789", FULLWIDTH)),  # fullwidth digits
    lambda s: s.upper(),
    lambda s: s + "\u200b",  # zero-width space
    lambda s: " " + s,
    lambda s: s.replace("-", "\u2010"),  # Unicode hyphen
    lambda s: s + "é",
    lambda s: s + "\u202e",  # right-to-left override
    lambda s: s + "\x00",
]
# Values other systems refuse, by key: what a hostile or careless user would try.
INTERESTING: dict[str, list[Any]] = {
    "aws:region": ["us-gov-west-1", "cn-north-1", "us-west-9", "US-WEST-2", "us-west-2a", "eu-isoe-west-1"],
    "cluster.name": ["LLM-Dev", "xn--llm", "sthree-x", "a" * 101, "a" * 100, "llm_dev", "1llm", "llm-"],
    "cluster.kubernetesVersion": [1.35, 1.3, "1.30", "1.35.0"],
    "cluster.publicAccessCidrs": [
        ["0.0.0.0/1", "128.0.0.0/1"],
        ["10.0.0.0/016"],
        ["203.0.113.10/32", "203.0.113.10/32"],
    ],
    "cluster.adminPrincipalArns": [
        ["arn:aws:sts::123456789012:assumed-role/admin/me"],
        ["arn:aws-cn:iam::123456789012:role/admin"],
        ["arn:aws:iam::123456789012:role/admin", "arn:aws:iam::123456789012:role/admin"],
        ["arn:aws:iam::123456789012:role/path/admin"],
    ],
    "nodeGroups[].availabilityZone": ["us-west-2e", "ap-northeast-1b", "us-east-2a", "us-west-2"],
    "nodeGroups[].labels": [
        {"llm-training-eks/node-group": "x"},
        {"vpc.amazonaws.com/efa.present": "false"},
        {"node-role.kubernetes.io/worker": ""},
        {"node.kubernetes.io/pool": "a"},
        {"a/b/c": "x"},
        {"team": "x" * 64},
        {"team": "-x"},
        {"Team": "ok"},
    ],
    "nodeGroups[].name": ["Trn1", "a" * 41, "trn1-", "1trn", "system"],
    "nodeGroups[].maxUnavailable": [0, 100, 101],
    "nodeGroups[].desiredSize": [True, "2", 2.0, 2**31],
    "workloads.*.runId": ["run-001-run-001", "r" * 20, "R1", "run_1", "1"],
    "workloads.*.nodes": [True, 1000, 2**31 - 1],
    "workloads.*.env": [
        {"HF_TOKEN": "abc"},
        {"WANDB_API_KEY": "0123456789abcdef"},
        {"X": "hf_" + "a" * 34},
        {"TOKENIZERS_PARALLELISM": "false"},
        {"AWS_ACCESS_KEY_ID": "AKIA" + "A" * 16},
    ],
    "tags": [{"aws:owner": "x"}, {"team": "x" * 257}, {"k" * 129: "v"}, {"team": 1234}, {"team": "a\nb"}],
    "storage.dailyBackupStartTime": ["24:00", "5:00", "05:00\n", 300],
    "network.availabilityZones": [
        ["us-west-2a", "us-west-2e"],
        ["us-west-2a", "us-west-2a"],
        ["ap-northeast-1a", "ap-northeast-1b"],
    ],
}
TEXT_MUTATIONS = ("alias", "anchor", "duplicate_key", "deep", "tag", "unquoted_version", "bom", "tab", "big")


@dataclass
class Case:
    name: str
    text: str
    steps: list[str] = field(default_factory=list)


def _walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, (*path, i))


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        root = root[p]
    return root


def _generic(path: tuple[Any, ...]) -> str:
    """`("llm-training-eks:nodeGroups", 0, "labels")` -> `nodeGroups[].labels`; workloads' names -> `*`."""
    if not path:
        return ""
    head = str(path[0]).removeprefix(NS)
    out = head
    for i, p in enumerate(path[1:], 1):
        if isinstance(p, int):
            out += "[]"
        elif head == "workloads" and i == 1:
            out += ".*"
        else:
            out += f".{p}"
    return out


def _mutate(cfg: dict[str, Any], rng: random.Random) -> str:
    """One mutation of the `config:` map in place; returns what it did."""
    nodes = [(p, v) for p, v in _walk(cfg) if p]
    path, value = rng.choice(nodes)
    kind = rng.choice(
        ["drop", "dup", "retype", "boundary", "unicode", "long", "rename", "namespace", "interesting"] * 2
    )
    parent = _get(cfg, path[:-1])
    if kind == "interesting":
        key = rng.choice(sorted(INTERESTING))
        targets = [p for p, _ in _walk(cfg) if p and _generic(p) == key]
        new = copy.deepcopy(rng.choice(INTERESTING[key]))
        if targets:
            target = rng.choice(targets)
            _get(cfg, target[:-1])[target[-1]] = new
            return f"interesting {key}={new!r}"[:120]
        if "." not in key and "[" not in key:
            cfg[key if ":" in key else NS + key] = new
            return f"interesting add {key}"
        kind = "retype"
    if kind == "drop":
        del parent[path[-1]]
    elif kind == "dup" and isinstance(parent, list):
        parent.append(copy.deepcopy(value))
    elif kind == "dup" and isinstance(parent, dict) and isinstance(value, dict) and _generic(path[:-1]) == "workloads":
        # A second run whose workload name and run id join to the first's job name.
        name, run = str(path[-1]), copy.deepcopy(value)
        run_id = str(run.get("runId", "r"))
        first, _, rest = f"{name}-{run_id}".partition("-")
        if rest:
            parent[first] = {**run, "runId": rest}
        else:
            parent[f"{name}-2"] = run
    elif kind == "retype":
        parent[path[-1]] = copy.deepcopy(rng.choice(RETYPE))
    elif kind == "boundary":
        parent[path[-1]] = rng.choice(BOUNDARY)
    elif kind == "unicode" and isinstance(value, str):
        parent[path[-1]] = rng.choice(UNICODE)(value)
    elif kind == "long" and isinstance(value, str):
        parent[path[-1]] = value * rng.choice([4, 40]) if value else "x" * 300
    elif kind == "rename" and isinstance(parent, dict):
        key = str(path[-1])
        renamed = rng.choice(
            [re.sub(r"([A-Z])", r"_\1", key).lower(), key.upper(), key[:-1] + key[-1] * 2, key.swapcase(), key + " "]
        )
        if renamed not in parent:
            parent[renamed] = parent.pop(key)
    elif kind == "namespace" and len(path) == 1 and str(path[0]).startswith(NS):
        key = str(path[0])
        typo = rng.choice(["llm-trainig-eks:", "llm-training-ek:", "LLM-training-eks:", "llm_training_eks:", "asw:"])
        cfg[typo + key.removeprefix(NS)] = cfg.pop(key)
    else:
        return f"noop {kind}"
    return f"{kind} {_generic(path)}"


def _text_mutation(text: str, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(TEXT_MUTATIONS)
    lines = text.splitlines()
    if kind == "alias":
        bomb = ["  llm-training-eks:bomb:", "    a: &a [x, x, x, x, x, x, x, x, x]"]
        bomb += [
            f"    {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(9)
        ]
        return "\n".join([*lines, *bomb]) + "\n", kind
    if kind == "anchor":
        return text.replace("config:", "config: &root", 1), kind
    if kind == "duplicate_key":
        keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[A-Za-z:.-]+:\s*\S", line)]
        if keyed:
            i = rng.choice(keyed)
            lines.insert(i + 1, lines[i])
        return "\n".join(lines) + "\n", kind
    if kind == "deep":
        return text + "  llm-training-eks:deep: " + "[" * 200 + "]" * 200 + "\n", kind
    if kind == "tag":
        return text + "  llm-training-eks:tagged: !!python/object/apply:os.system [echo]\n", kind
    if kind == "unquoted_version":
        return re.sub(r"kubernetesVersion: \S+", "kubernetesVersion: 1.30", text) + "", kind
    if kind == "bom":
        return "\ufeff" + text if rng.random() < 0.5 else text.replace("config:", "config:\x00", 1), kind
    if kind == "tab":
        return text.replace("  ", "\t", 1), kind
    return text + "  llm-training-eks:big: " + "y" * 600_000 + "\n", kind


def cases(seed: int, n: int) -> Iterator[Case]:
    """`n` mutants of the example stacks, the same ones for the same seed."""
    rng = random.Random(seed)
    bases = {s: load_yaml(example_file(s).read_text()) for s in EXAMPLE_STACKS}
    for i in range(n):
        stack = rng.choice(sorted(bases))
        doc = copy.deepcopy(bases[stack])
        steps = [_mutate(doc["config"], rng) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        text = stack_yaml(doc)
        if rng.random() < 0.12:
            text, kind = _text_mutation(text, rng)
            steps.append(f"text {kind}")
        yield Case(f"{seed}-{i}-{stack}", text, steps)


# --------------------------------------------------------------------------- the contract


def workdir(tmp: Path) -> Path:
    """A directory with the example stacks (a layered mutant plans on its lower stack's file)."""
    for stack in EXAMPLE_STACKS:
        (tmp / f"Pulumi.{stack}.yaml").write_bytes(example_file(stack).read_bytes())
    return tmp


@dataclass
class Outcome:
    code: int
    lines: list[str]
    values: dict[str, Any] | None
    seconds: float


def check_file(case: Case, tmp: Path) -> Outcome:
    """Read and validate the mutant as every command does (tools.cli): exit 0 or 2 and its lines."""
    path = tmp / f"Pulumi.{case.name}.yaml"
    path.write_bytes(case.text.encode("utf-8", "surrogatepass"))
    err = io.StringIO()
    start = time.process_time()
    values: dict[str, Any] | None = None
    try:
        values = read_stack_file(path)
        config.parse_stack_values(values)
        code = 0
    except (UsageError, config.ConfigError) as e:
        code = bad_input(e, err)
    return Outcome(code, err.getvalue().splitlines(), values, time.process_time() - start)


def contract_problems(case: Case, out: Outcome, file_name: str) -> list[str]:
    """How an outcome breaks the contract (empty: it keeps it)."""
    problems = []
    if out.seconds > CASE_SECONDS:
        problems.append(f"took {out.seconds:.1f} s")
    if out.code not in (0, 2):
        problems.append(f"exit {out.code}")
    text = "\n".join(out.lines)
    if len(text) > MAX_STDERR or len(out.lines) > config.MAX_PROBLEMS + 1:
        problems.append(f"{len(out.lines)} lines, {len(text)} characters")
    if "Traceback" in text:
        problems.append("traceback")
    if out.code == 2 and not out.lines:
        problems.append("exit 2 without a line")
    file_keys = {k.removeprefix(NS) for k in out.values or ()}
    for line in out.lines:
        if line.startswith("error: "):
            root = re.match(r"error: ([^.\[: ]+)", line)
            if file_name not in line and not (root and root.group(1) in ROOTS):
                problems.append(f"usage line names neither the file nor a key: {line[:100]}")
            continue
        if line.startswith("... and "):
            continue
        root = re.match(r"[^.\[:]+", line)
        named = root is not None and root.group(0) in ROOTS
        if not (named or any(line.startswith(f"{k}: ") or line.startswith(f"{k}.") for k in file_keys)):
            problems.append(f"line does not name a key: {line[:100]}")
    return problems


def engine_agrees(values: Mapping[str, Any]) -> bool:
    """The engine's view of the same stack (values as text, objects as JSON) is refused or accepted alike."""
    engine = {k: engine_value(v) for k, v in values.items()}

    def accepted(vals: Mapping[str, Any]) -> bool:
        try:
            secret = [k.rpartition(":")[2] for k, v in values.items() if v == "[secret]"]
            config.parse(from_stack_values(vals), secret_keys=secret, found=namespace_problems(vals))
            return True
        except config.ConfigError:
            return False

    return accepted(values) == accepted(engine)


# --------------------------------------------------------------------------- the oracle for accepted mutants


def plan_of(case: Case, tmp: Path) -> tuple[int, str, dict[str, Any] | None]:
    """Exit code, stderr and plan of the offline plan of an accepted mutant (the whole CLI)."""
    path = tmp / f"Pulumi.{case.name}.yaml"
    path.write_text(case.text)
    out, err = io.StringIO(), io.StringIO()
    code = plan_mod.main(["--config-file", str(path), "--format", "json"], stdout=out, stderr=err)
    return code, err.getvalue(), json.loads(out.getvalue()) if out.getvalue().startswith("{") else None


@cache
def _aws_regions() -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_available_regions("eks", "aws"))


@cache
def _ec2_azs(region: str) -> frozenset[str] | None:
    path = OFFERINGS / f"{region}.json.gz"
    if not path.is_file():
        return None
    with gzip.open(path) as f:
        return frozenset(o["Location"] for o in json.load(f))


def _where(r: Mapping[str, Any]) -> list[str]:
    """The provider's region (botocore's endpoint data), subnets' AZs (EC2's offerings as moto
    records them) and CIDRs as AWS writes them."""
    out = []
    inputs = r["inputs"]
    if r["type"] == "pulumi:providers:aws" and inputs.get("region") not in _aws_regions():
        out.append(f"provider region {inputs.get('region')!r} has no EKS in the aws partition")
    if r["type"] == "aws:ec2/subnet:Subnet":
        az = str(inputs.get("availabilityZone"))
        known = _ec2_azs(az[:-1])
        if known is not None and az not in known:
            out.append(f"subnet AZ {az!r} does not exist")
    for path, value in _walk(inputs):
        if (path and str(path[-1]).lower().endswith(("cidrblock", "cidripv4"))) or path[-2:-1] == (
            "publicAccessCidrs",
        ):
            try:
                ok = str(ipaddress.ip_network(value)) == value
            except (TypeError, ValueError):
                ok = value == "<computed>"
            if not ok:
                out.append(f"CIDR {value!r} at {'.'.join(map(str, path))}")
    return out


def refused_by_real_systems(plan: Mapping[str, Any]) -> list[str]:
    """What AWS (botocore's models) or Kubernetes (name and label rules) would refuse in a plan."""
    refused = []
    for r in plan["resources"]:
        refused += [f"{r['name']}: {p}" for p in _where(r)]
        for path, address in SHAPES.get(r["type"], {}).items():
            for value in values_at(r["inputs"], path):
                if value != "<computed>":
                    refused += [f"{r['name']} {path}: {p}" for p in config.aws.problems(value, address)]
        tags = r["inputs"].get("tags") if r["type"].startswith("aws:") else None
        for value in (tags or {}).values() if isinstance(tags, dict) else ():
            if value not in ("<computed>", "[secret]"):
                refused += [f"{r['name']} tag value: {p}" for p in config.aws.problems(value, TAG_VALUE)]
        if r["type"] == "aws:s3/bucket:Bucket":
            prefix = r["inputs"].get("bucketPrefix") or r["inputs"].get("bucket") or ""
            if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", prefix, re.ASCII):
                refused.append(
                    f"{r['name']} bucketPrefix {prefix!r}: S3 bucket names are lowercase letters, digits, . and -"
                )
        if r["type"] == "aws:eks/nodeGroup:NodeGroup":
            refused += [
                f"{r['name']} label {k}: the kubelet refuses it in --node-labels"
                for k in r["inputs"].get("labels") or {}
                if kubernetes.kubelet_refuses_node_label(k)
            ]
        if r["type"].startswith("kubernetes:") and isinstance(r["inputs"].get("metadata"), dict):
            refused += [f"{r['name']}: {p}" for p in kubernetes_problems(r["type"], r["inputs"])]
    return refused


def kubernetes_problems(type_: str, obj: Mapping[str, Any]) -> list[str]:
    meta = obj["metadata"]
    name = meta.get("name")
    out = []
    if isinstance(name, str) and name != "<computed>":
        rule = kubernetes.dns1035_label if type_.endswith((":Service", ":Namespace")) else kubernetes.dns1123_subdomain
        out += [f"name {name!r} {p}" for p in rule(name)]
    for path, node in _walk(obj):
        if path and path[-1] == "labels" and isinstance(node, dict) and "metadata" in [str(p) for p in path]:
            for k, v in node.items():
                out += [f"label key {k!r} {p}" for p in kubernetes.label_key(k)]
                out += [f"label {k}={v!r} {p}" for p in kubernetes.label_value(str(v))]
    for path, node in _walk(obj):
        if path and path[-1] == "env" and isinstance(node, list):
            names = [e.get("name") for e in node if isinstance(e, dict)]
            out += [f"env name {n!r}" for n in names if not re.fullmatch(ENV_NAME, str(n), re.ASCII)]
    if type_.endswith(":MPIJob") and isinstance(name, str):
        replicas = (obj.get("spec") or {}).get("mpiReplicaSpecs", {}).get("Worker", {}).get("replicas", 1)
        host = kubernetes.mpi_worker_hostname(name, max(int(replicas), 1) - 1)
        out += [f"worker host {host!r} {p}" for p in kubernetes.dns1035_label(host)]
    return out
