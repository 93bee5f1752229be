"""The offline plan contract (tools/plan.py): options, output, exit codes, determinism."""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml

import config
import stack as program
from config import stackfile
from infra.protection import stateful
from tests import upstream
from tests.conftest import EXAMPLE_STACKS, MINIMAL, ROOT, example_file, stack_yaml
from tools import plan


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = plan.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_same_stack_twice_gives_byte_identical_json() -> None:
    """Two separate processes, as a reviewer would run them."""
    cmd = [sys.executable, "-m", "tools.plan", "--config-file", "examples/Pulumi.trn1-llama2.yaml", "--format", "json"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    first, second = (p.communicate()[0] for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert first == second
    doc = json.loads(first)
    assert set(doc) >= {"stack", "resources", "outputs", "cost"}
    r = doc["resources"][0]
    assert set(r) >= {"urn", "type", "name", "custom", "parent", "dependencies", "protect", "retainOnDelete", "inputs"}


def test_table_shows_components_and_key_facts() -> None:
    code, out, _ = _main("--stack", "p5-capacity-block")
    assert code == 0
    assert "AcceleratedNodeGroup ng-p5" in out
    assert "p5.48xlarge x 2" in out and "CAPACITY_BLOCK" in out
    assert "EFA interfaces: 32 on 32 network cards" in out
    assert "AZ us-east-2b (1 subnet)" in out
    assert "capacity target: cr-0a1b2c3d4e5f60718 (capacity-block)" in out
    assert "endpoint: private only" in out


def test_out_writes_plan_json(tmp_path: Path) -> None:
    code, out, err = _main("--stack", "dev", "--format", "json", "--out", str(tmp_path))
    assert code == 0
    assert (tmp_path / "plan.json").read_text() == out
    # It says what it wrote, on stderr: stdout stays the plan alone.
    objects = len(list((tmp_path / "kubernetes").glob("*.yaml")))
    assert objects and err.splitlines()[0] == (
        f"wrote {tmp_path / 'plan.json'} ({len(json.loads(out)['resources'])} resources)"
        f" and {objects} Kubernetes objects as YAML in {tmp_path / 'kubernetes'}/"
    )


def test_out_that_is_a_file_is_refused_before_the_plan(tmp_path: Path) -> None:
    """`--out` at an existing file: exit 2 naming the option, no traceback, the file kept."""
    target = tmp_path / "plan.json"
    target.write_text("keep")
    code, out, err = _main("--stack", "dev", "--out", str(target))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: --out {target}: exists and is not a directory; give a directory (it is made if missing)"
    ]
    assert target.read_text() == "keep"


def test_placeholder_secrets_are_named_before_anyone_runs_pulumi() -> None:
    code, out, err = _main("--stack", "trn1-llama2", "--format", "json")
    assert code == 0
    json.loads(out)
    assert err.splitlines() == [
        "before pulumi up: llm-training-eks:huggingFaceToken holds a placeholder; set it for your stack with"
        " `pulumi config set --secret huggingFaceToken <value>` (Pulumi refuses to start until then)"
    ]
    code, _, err = _main("--stack", "dev", "--format", "json")
    assert (code, err) == (0, "")  # the first hour needs no secret


def test_the_placeholder_is_no_ciphertext_any_secrets_provider_decrypts() -> None:
    """Pulumi decrypts every secure value before an update starts and refuses to proceed when one
    fails (tests/upstream/pulumi-config-decrypt-3.259.0.yaml): the placeholder must fail, so
    nothing is created with it, and every `secure:` value committed here must be the placeholder."""
    facts = upstream.facts("pulumi-config-decrypt-3.259.0")
    assert facts["decrypted_before_update"] and facts["last_line"] == "refusing to proceed"
    assert not re.fullmatch(facts["ciphertext_form"], plan.PLACEHOLDER_CIPHERTEXT)  # passphrase and cloud KMS
    with pytest.raises(binascii.Error):  # the service decodes base64 first
        base64.b64decode(plan.PLACEHOLDER_CIPHERTEXT, validate=True)
    for name in EXAMPLE_STACKS:
        doc = yaml.safe_load(example_file(name).read_text())
        for key, value in doc["config"].items():
            if isinstance(value, dict) and "secure" in value:
                assert value["secure"] == plan.PLACEHOLDER_CIPHERTEXT, f"{name}: {key} holds a real ciphertext"


def test_config_file_and_secrets_become_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    values = dict(MINIMAL, **{"llm-training-eks:tags": {"team": {"secure": "v1:abc"}}})
    path.write_text(stack_yaml({"config": values}))
    assert stackfile.read_stack_file(path)["llm-training-eks:tags"] == {"team": stackfile.SECRET}
    code, out, _ = _main("--config-file", str(path), "--format", "json")
    assert code == 0 and json.loads(out)["stack"] == "mine"


def test_missing_stack_is_exit_2_listing_the_stacks() -> None:
    code, _, err = _main("--stack", "nope")
    assert code == 2 and "Traceback" not in err
    assert err == (
        "error: --stack nope: no Pulumi.nope.yaml at the root (your stacks: none) nor among the examples"
        f" ({', '.join(EXAMPLE_STACKS)}); start it from an example with `make new-stack STACK=nope FROM=dev`"
        " (or FROM= another example), or pass --config-file PATH\n"
    )


def test_bad_usage_is_exit_2() -> None:
    code, _, _ = _main("--format", "json")
    assert code == 2


def test_program_failure_is_exit_1_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cfg: object) -> dict:
        raise RuntimeError("boom")

    monkeypatch.setattr(program, "build", broken)
    code, _, err = _main("--stack", "dev")
    assert code == 1 and "boom" in err and "Traceback" not in err


def test_invalid_config_cli_exit_code_in_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(stack_yaml({"config": {"aws:region": "us-west-2", "llm-training-eks:nodeGroup": []}}))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.plan", "--config-file", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("nodeGroup: unknown key (did you mean 'nodeGroups'?)")
    assert proc.stdout == ""


@pulumi.runtime.test
def test_stateful_helper_sets_protect_and_keeps_other_options() -> None:
    parent_opts = pulumi.ResourceOptions(ignore_changes=["tags"])
    assert stateful(True, parent_opts).protect is True
    assert stateful(True, parent_opts).ignore_changes == ["tags"]
    assert stateful(False).protect is False


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_example_stack_plans(stack: str) -> None:
    code, _, err = _main("--stack", stack, "--format", "json")
    assert code == 0, err


def _bad_stack(tmp_path: Path, values: dict[str, object]) -> str:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(stack_yaml({"config": values}))
    return str(path)


def test_invalid_config_as_json_names_each_problem_on_stdout(tmp_path: Path) -> None:
    """`--format json` on an invalid stack: exit 2, stderr the same lines as the table format,
    stdout one `{"problems": [...]}` object whose messages are those lines, in order."""
    values = {
        **MINIMAL,
        "llm-training-eks:nodeGroup": [],  # an unknown key: not-supported, with its did-you-mean
        "llm-training-eks:layer": "everything",  # a value outside a list: not-supported
        "llm-training-eks:huggingFaceToken": "hf_plain",  # a secret in plain text: forbidden
    }
    path = _bad_stack(tmp_path, values)
    code, out, err = _main("--config-file", path, "--format", "json")
    table_code, table_out, table_err = _main("--config-file", path)
    assert code == table_code == 2 and table_out == "" and err == table_err
    problems = json.loads(out)["problems"]
    assert [p["message"] for p in problems] == err.splitlines()
    assert all(set(p) == {"path", "kind", "value", "allowed", "hint", "message"} for p in problems)
    by_path = {p["path"]: p for p in problems}
    assert by_path["nodeGroup"]["kind"] == "not-supported"
    assert by_path["nodeGroup"]["hint"] == "did you mean 'nodeGroups'?"
    assert "nodeGroups" in by_path["nodeGroup"]["allowed"].split(", ")
    assert by_path["layer"]["kind"] == "not-supported" and by_path["layer"]["value"] == "'everything'"
    assert by_path["huggingFaceToken"]["kind"] == "forbidden" and by_path["huggingFaceToken"]["value"] is None
    for p in problems:
        assert p["message"].startswith(f"{p['path']}: ")


def test_invalid_config_as_json_is_bounded(tmp_path: Path) -> None:
    """Many problems: at most MAX_PROBLEMS of them, each line cut to MAX_LINE, then one `too-many`
    entry with the count; stdout stays one JSON object."""
    many = {f"llm-training-eks:unknownKey{i}": i for i in range(config.MAX_PROBLEMS + 7)}
    many["llm-training-eks:tags"] = {"team": "x" * (3 * config.MAX_LINE)}
    code, out, err = _main("--config-file", _bad_stack(tmp_path, {**MINIMAL, **many}), "--format", "json")
    assert code == 2
    problems = json.loads(out)["problems"]
    assert len(problems) == config.MAX_PROBLEMS + 1 == len(err.splitlines())
    assert all(len(p["message"]) <= config.MAX_LINE for p in problems)
    assert problems[-1]["kind"] == "too-many" and problems[-1]["path"] == ""
    assert re.fullmatch(r"\.\.\. and \d+ more problem\(s\); fix these first", problems[-1]["message"])


def test_unusable_stack_file_as_json_is_one_problem_naming_no_key() -> None:
    code, out, err = _main("--stack", "nope", "--format", "json")
    assert code == 2
    assert json.loads(out) == {
        "problems": [
            {"path": "", "kind": "invalid", "value": None, "allowed": None, "hint": None, "message": err.rstrip("\n")}
        ]
    }
