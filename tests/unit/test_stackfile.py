"""Reading a stack file: read as the Pulumi CLI reads it (yaml.v3 into Pulumi's config objects,
pulumi/pulumi v3.259.0 sdk/go/common/resource/config/object.go), bounded, and stricter where a
difference would be silent."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

import pulumi_aws
import pytest

import config
from config import stackfile
from config.stack import StackConfig
from tests.conftest import MINIMAL, stack_yaml

ALIAS_BOMB = """config:
  aws:region: us-west-2
  llm-training-eks:tags:
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def _read(tmp_path: Path, text: str) -> dict[str, object]:
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(text)
    return stackfile.read_stack_file(path)


def test_an_alias_bomb_of_1kb_is_refused_without_expanding(tmp_path: Path) -> None:
    assert len(ALIAS_BOMB) < 1024
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(stackfile.UsageError) as e:
        _read(tmp_path, ALIAS_BOMB)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "anchors (&a) are not allowed" in str(e.value) and "(line 4)" in str(e.value)
    assert seconds < 1 and peak < 5_000_000 and len(str(e.value)) < 300


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("config:\n  aws:region: us-west-2\n  aws:region: us-east-1\n", "key 'aws:region' appears twice"),
        ("config:\n  x: *nothing\n", "aliases (*nothing) are not allowed"),
        ("config:\n  x: !!python/object/apply:os.system [id]\n", "YAML tag"),
        ("config:\n  x: !!binary aGk=\n", "YAML tag"),
        ("config:\n  x: {1: a}\n", "map key 1 is not text"),
        ("config:\n  x: 0755\n", "plain decimals"),
        ("config:\n  x: 0x1F\n", "plain decimals"),
        ("config:\n  x: 1_000\n", "plain decimals"),
        ("config:\n  x: " + "[" * 40 + "]" * 40 + "\n", "nested more than 32"),
        ("config: [\n", "not a valid stack file"),
        ("- a\n", "expected a top-level 'config:' map"),
    ],
)
def test_what_the_reader_refuses(text: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(stackfile.UsageError) as e:
        _read(tmp_path, text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_big_and_binary_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(stackfile.UsageError, match="bytes; a stack file is at most"):
        _read(tmp_path, "config:\n  x: " + "y" * stackfile.MAX_FILE_BYTES + "\n")
    path = tmp_path / "Pulumi.bin.yaml"
    path.write_bytes(b"config:\n  x: \xff\xfe\n")
    with pytest.raises(stackfile.UsageError, match="not UTF-8"):
        stackfile.read_stack_file(path)


def test_plain_scalars_read_as_yaml_v3_reads_them(tmp_path: Path) -> None:
    """PyYAML's YAML 1.1 rules would make `12:30` the number 750 (sexagesimal), `yes` a boolean and an
    unquoted timestamp a datetime; yaml.v3 (the Pulumi CLI) gives text for all three."""
    values = _read(
        tmp_path,
        "config:\n  a: 12:30\n  b: yes\n  c: 2027-03-01T11:30:00Z\n  d: on\n  e: true\n  f: 12\n  g: 1.5\n  h: ~\n",
    )
    assert values == {
        "a": "12:30",
        "b": "yes",
        "c": "2027-03-01T11:30:00Z",
        "d": "on",
        "e": True,
        "f": 12,
        "g": 1.5,
        "h": None,
    }


def test_an_unquoted_backup_time_means_what_it_says(tmp_path: Path) -> None:
    values = {k: v for k, v in MINIMAL.items() if k != "llm-training-eks:storage"}
    text = stack_yaml({"config": values})
    text += "  llm-training-eks:storage:\n    availabilityZone: us-west-2d\n    dailyBackupStartTime: 12:30\n"
    assert config.parse_stack_values(_read(tmp_path, text)).storage.daily_backup_start_time == "12:30"


def test_aws_config_keys_are_the_providers() -> None:
    source = Path(pulumi_aws.__file__).parent / "config" / "vars.py"
    keys = re.findall(r"__config__\.get(?:_bool|_int|_float|_object)?\('(\w+)'\)", source.read_text())
    assert sorted(stackfile.AWS_CONFIG_KEYS) == sorted(keys)


def test_top_level_booleans_are_the_models() -> None:
    booleans = {info.alias for info in StackConfig.model_fields.values() if info.annotation is bool}
    assert set(stackfile.TOP_LEVEL_BOOLEANS) == booleans


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("llm-trainig-eks:workloads", "did you mean 'llm-training-eks:workloads'"),
        ("LLM-Training-EKS:tags", "did you mean 'llm-training-eks:tags'"),
        ("llm_training_eks:nodeGroups", "did you mean 'llm-training-eks:nodeGroups'"),
        ("aws:regoin", "not a configuration key of the AWS provider (did you mean 'region'?)"),
        ("asw:region", "did you mean 'aws:region'"),
    ],
)
def test_keys_the_program_would_ignore_are_refused(key: str, says: str) -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse_stack_values({**MINIMAL, key: {}})
    assert any(p.startswith(f"{key}: ") and says in p for p in e.value.problems), e.value.problems


def test_other_tools_namespaces_pass() -> None:
    config.parse_stack_values(
        {**MINIMAL, "aws:profile": "x", "kubernetes:context": "y", "pulumi:tags": {"a": "b"}, "mycompany:owner": "z"}
    )


def test_top_level_scalars_read_as_the_engine_hands_them() -> None:
    """The engine hands top-level values to the program as text (`lowerStack: 2.5` is "2.5"):
    the stack file gives the same result."""
    native = {**MINIMAL, "llm-training-eks:protectStatefulResources": False}
    engine = {k: stackfile.engine_value(v) for k, v in native.items()}
    assert config.parse_stack_values(native) == config.parse_stack_values(engine)
    assert stackfile.from_stack_values({"llm-training-eks:lowerStack": 2.5})["lowerStack"] == "2.5"


def test_a_null_value_reaches_the_program_as_empty_text() -> None:
    """`lowerStack: null` is "" to the engine (a Go string left empty by yaml.v3), not "None":
    the runs layer is then refused for a missing lower stack, whichever way the file is read
    (found by the config fuzzer: 'retype lowerStack')."""
    assert stackfile.engine_value(None) == ""
    values = {
        "aws:region": "us-west-2",
        "llm-training-eks:layer": "runs",
        "llm-training-eks:lowerStack": None,
    }
    engine = {k: stackfile.engine_value(v) for k, v in values.items()}
    for view in (values, engine):
        with pytest.raises(config.ConfigError) as e:
            config.parse_stack_values(view)
        assert any(p.startswith("lowerStack: required for the runs layer") for p in e.value.problems)
