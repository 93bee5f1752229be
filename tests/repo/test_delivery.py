"""Delivery: the workflows and the layers agree, and every `pulumi` command line exists.

- Every `pulumi ...` command in the workflows, the README and docs/ uses only flags the pinned CLI
  defines (tests/upstream/pulumi-cli-3.259.0.yaml, read from its cobra commands), and every
  action input exists at the pinned action commit.
- Pull requests save an update plan per stack with the policy pack; the deploy applies
  exactly that plan; the drift check refreshes and expects no changes, per stack, and fails.
- Each layered example stack is routed (tools.ci) to the job of its layer, on the runner that
  reaches what it needs: GitHub-hosted for the aws layer, the in-VPC CodeBuild runner that
  its aws layer declares for the cluster and runs layers.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.stackfile import read_stack_file
from facts.names import LOWER_LAYER
from infra.ci_runner import runner_label
from tests import upstream
from tests.conftest import (
    EXAMPLE_FILES,
    EXAMPLE_STACKS,
    EXAMPLES,
    LAYERED_STACKS,
    ROOT,
    example_file,
    stack_plan,
    stack_yaml,
)
from tests.repo.test_workflows import WORKFLOW_DIR, _load, _steps
from tools import ci

CLI = upstream.facts("pulumi-cli-3.259.0")
COMMANDS: dict[str, Any] = CLI["commands"]
PR, DEPLOY, DRIFT = (_load(WORKFLOW_DIR / f) for f in ("pull-request.yml", "deploy.yml", "drift.yml"))
LABELS = {kind: runner_label("${{ matrix." + kind + " }}") for kind in ("preview", "deploy")}
ACTIONS = {
    "aws-actions/configure-aws-credentials": "configure-aws-credentials-v4.2.1",
    "pulumi/actions": "pulumi-actions-v7.0.0",
    "actions/upload-artifact": "upload-artifact-v7.0.0",
    "actions/download-artifact": "download-artifact-v8.0.1",
}


# --------------------------------------------------------------------------- pulumi command lines


def pulumi_invocations(script: str) -> Iterator[list[str]]:
    """The argument lists of every `pulumi` command in a shell script."""
    text = script.replace("\\\n", " ")
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            continue
        for i, tok in enumerate(tokens):
            if tok == "pulumi" and (i == 0 or tokens[i - 1] in ("!", "|", "||", "&&", ";", "(", "$(")):
                args = []
                for t in tokens[i + 1 :]:
                    if set(t) <= set("|&;<>()"):
                        break
                    args.append(t)
                yield args


def command_of(args: list[str]) -> tuple[str, list[str]]:
    """The recorded command an argument list runs (aliases resolved), and its flags."""
    words = [a for a in args if not a.startswith("-")]
    names = {name: name for name in COMMANDS} | {
        f"{name.rsplit(' ', 1)[0]} {alias}" if " " in name else alias: name
        for name, c in COMMANDS.items()
        for alias in c["aliases"]
    }
    groups = {name.split(" ")[0] for name in COMMANDS if " " in name}
    for n in (2, 1):
        if n == 1 and words[:1] and words[0] in groups and len(words) > 1:
            break  # `pulumi stack <sub>` with a subcommand not recorded
        if len(words) >= n and " ".join(words[:n]) in names:
            return names[" ".join(words[:n])], [a for a in args if a.startswith("-")]
    raise AssertionError(f"`pulumi {' '.join(args)}`: command not in tests/upstream/pulumi-cli-3.259.0.yaml")


def unknown_flags(args: list[str]) -> list[str]:
    command, flags = command_of(args)
    scopes = [command, "(root)", *([command.split(" ")[0]] if " " in command else [])]
    long = {f for s in scopes for f in COMMANDS[s]["flags"]}
    short = {k for s in scopes for k in COMMANDS[s]["short"]}
    bad = []
    for flag in flags:
        if flag.startswith("--"):
            if flag[2:].split("=", 1)[0] not in long:
                bad.append(flag)
        elif any(c not in short for c in flag[1:]):
            bad.append(flag)
    return bad


def scripts() -> Iterator[tuple[str, str]]:
    for path in sorted(WORKFLOW_DIR.glob("*.yml")):
        for name, _job, step in _steps(_load(path)):
            if "run" in step:
                yield f"{path.name}:{name}", step["run"]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```sh\n(.*?)```", page.read_text(), re.S)):
            yield f"{page.relative_to(ROOT)} sh block {i}", block


def test_the_flag_checker_catches_what_does_not_exist() -> None:
    (args,) = pulumi_invocations('if ! pulumi preview --stack "$S" --save-plan p.json --refresh 2>&1; then exit 1; fi')
    assert args[:1] == ["preview"] and unknown_flags(args) == []
    assert unknown_flags(["up", "--plann", "p.json"]) == ["--plann"]
    assert unknown_flags(["stack", "output", "--json", "-s", "x"]) == []
    assert unknown_flags(["stack", "init", "dev", "--secrets-provider", "passphrase"]) == []
    assert unknown_flags(["preview", "-q"]) == ["-q"]
    with pytest.raises(AssertionError):
        command_of(["stack", "frobnicate"])


def test_every_pulumi_command_uses_only_flags_the_pinned_cli_defines() -> None:
    found = 0
    for where, script in scripts():
        for args in pulumi_invocations(script):
            found += 1
            assert unknown_flags(args) == [], f"{where}: `pulumi {' '.join(args)}`"
    assert found >= 10


def test_the_cli_version_is_pinned_once_and_is_the_one_read() -> None:
    assert (ROOT / ".pulumi-version").read_text().strip() == CLI["version"]
    for path in sorted(WORKFLOW_DIR.glob("*.yml")):
        for name, _job, step in _steps(_load(path)):
            if step.get("uses", "").startswith("pulumi/actions@"):
                assert step.get("with") == {"pulumi-version-file": ".pulumi-version"}, f"{path.name}:{name}"


def test_actions_are_the_read_commits_and_use_only_their_inputs() -> None:
    for path in sorted(WORKFLOW_DIR.glob("*.yml")):
        for name, _job, step in _steps(_load(path)):
            repo, _, rest = step.get("uses", "").partition("@")
            if repo not in ACTIONS:
                continue
            doc = upstream.load(ACTIONS[repo])
            assert rest.split()[0] == doc["source"]["commit"], f"{path.name}:{name}: {repo} is not the commit read"
            assert set(step.get("with", {})) <= set(doc["facts"]["inputs"]), f"{path.name}:{name}"


# --------------------------------------------------------------------------- plans and drift


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def _pulumi(job: dict[str, Any]) -> list[list[str]]:
    return list(pulumi_invocations(_runs(job)))


def _option(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_pull_requests_save_the_update_plan_of_each_stack_with_the_policy_pack() -> None:
    jobs = {n: j for n, j in PR["jobs"].items() if _pulumi(j)}
    assert set(jobs) == {"preview-aws", "preview-in-vpc"}
    for name, job in jobs.items():
        (args,) = _pulumi(job)
        assert args[0] == "preview" and _option(args, "--policy-pack") == "policy", name
        assert _option(args, "--save-plan") == "plan-$STACK.json" and _option(args, "--stack") == "$STACK", name
        assert job["env"]["STACK"] == "${{ matrix.stack }}"
        (upload,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert upload["with"]["name"] == "plan-${{ matrix.stack }}"
        assert upload["with"]["path"] == "plan-${{ matrix.stack }}.json"
        assert upload["with"]["if-no-files-found"] == "error"


def test_the_deploy_applies_exactly_the_reviewed_plan() -> None:
    ups = {n: j for n, j in DEPLOY["jobs"].items() if _pulumi(j)}
    assert set(ups) == {"up-aws", "up-cluster", "up-runs"}
    for name, job in ups.items():
        (args,) = _pulumi(job)
        assert args[0] == "up" and _option(args, "--plan") == "plan-$STACK.json", name
        assert "--yes" in args and _option(args, "--policy-pack") == "policy", name
        (download,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
        assert download["with"]["name"] == "plan-${{ matrix.stack }}"
        assert download["with"]["run-id"] == "${{ needs.test.outputs.reviewed-run }}"
        assert job["permissions"]["actions"] == "read"
        assert job["concurrency"] == {
            "group": "pulumi-up-${{ matrix.stack }}",
            "cancel-in-progress": False,
            "queue": "max",
        }
        assert job["environment"] == "${{ matrix.stack }}" and job["strategy"]["max-parallel"] == 1
    finder = _runs(DEPLOY["jobs"]["test"])
    assert "actions/workflows/pull-request.yml/runs?head_sha=" in finder and ".commit.tree.sha" in finder


def test_layers_deploy_in_order_and_a_run_failure_stops_nothing_below() -> None:
    jobs = DEPLOY["jobs"]
    assert jobs["up-cluster"]["needs"] == ["test", "up-aws"]
    assert jobs["up-runs"]["needs"] == ["test", "up-cluster"]
    assert "needs.up-aws.result != 'failure'" in jobs["up-cluster"]["if"]
    assert not any("up-runs" in str(j.get("needs", "")) for j in jobs.values()), "nothing waits for the runs"


def test_the_drift_check_is_scheduled_per_stack_and_fails_visibly() -> None:
    assert DRIFT["on"]["schedule"] and "workflow_dispatch" in DRIFT["on"]
    checks = {n: j for n, j in DRIFT["jobs"].items() if _pulumi(j)}
    assert set(checks) == {"drift-aws", "drift-in-vpc"}
    for name, job in checks.items():
        (args,) = _pulumi(job)
        assert args[0] == "preview" and {"--refresh", "--expect-no-changes"} <= set(args), name
        script = _runs(job)
        assert "::error title=Drift in $STACK::" in script and "exit 1" in script, name
        assert job["strategy"]["fail-fast"] is False, "one drifted stack does not hide the others"


# --------------------------------------------------------------------------- the right job on the right runner

# workflow -> phase -> the job that takes the stacks of that phase
JOBS = {
    "pull-request.yml": {"aws": "preview-aws", "cluster": "preview-in-vpc", "runs": "preview-in-vpc"},
    "deploy.yml": {"aws": "up-aws", "cluster": "up-cluster", "runs": "up-runs"},
    "drift.yml": {"aws": "drift-aws", "cluster": "drift-in-vpc", "runs": "drift-in-vpc"},
}
PHASE_OUTPUT = {"preview-in-vpc": "in_vpc", "drift-in-vpc": "in_vpc"}


def _aws_stack_under(stack: str) -> str:
    values = read_stack_file(example_file(stack))
    while values.get("llm-training-eks:layer") in LOWER_LAYER:
        stack = values["llm-training-eks:lowerStack"].rpartition("/")[2]
        values = read_stack_file(example_file(stack))
    return stack


@pytest.mark.parametrize("stack", LAYERED_STACKS)
def test_every_layered_example_stack_goes_to_its_layers_job_on_the_right_runner(stack: str) -> None:
    layer = read_stack_file(example_file(stack))["llm-training-eks:layer"]
    routes = ci.route([stack], EXAMPLES)
    ((entry,),) = [m for phase, m in routes.items() if m and phase != "in_vpc"]
    assert entry["layer"] == layer and entry in routes[layer]
    if layer == "aws":
        assert entry["preview"] == entry["deploy"] == ""
    else:
        aws = _aws_stack_under(stack)
        projects = {
            r["inputs"]["name"]
            for r in stack_plan(aws)["resources"]
            if r["type"] == "aws:codebuild/project:Project" and "ci-runner" in r["urn"]
        }
        assert {entry["preview"], entry["deploy"]} == projects, "the runners its aws layer declares"
    for workflow, jobs in JOBS.items():
        doc = {"pull-request.yml": PR, "deploy.yml": DEPLOY, "drift.yml": DRIFT}[workflow]
        name = jobs[layer]
        job = doc["jobs"][name]
        output = PHASE_OUTPUT.get(name, layer)
        assert output in job["strategy"]["matrix"]["include"], f"{workflow}:{name} takes the {output} stacks"
        if layer == "aws":
            assert job["runs-on"] == ci.HOSTED_RUNNER, f"{workflow}:{name}"
            assert job["permissions"].get("id-token") == "write", "AWS credentials through OIDC"
        else:
            kind = "deploy" if workflow == "deploy.yml" else "preview"
            assert job["runs-on"] == LABELS[kind], f"{workflow}:{name} runs on the {kind} runner"
            assert "id-token" not in job["permissions"], "the runner's own role, no OIDC exchange"


def test_ci_refuses_what_no_runner_can_do(tmp_path: Path) -> None:
    with pytest.raises(ci.UsageError, match="all-in-one stack"):
        ci.route(["trn1-llama2"], EXAMPLES)
    aws = yaml.safe_load((EXAMPLES / "Pulumi.trn1-llama2-aws.yaml").read_text())
    aws["config"]["llm-training-eks:ciRunner"]["enabled"] = False
    # Without the runner the aws stack needs another path to the API to be valid config.
    aws["config"]["llm-training-eks:cluster"]["publicAccessCidrs"] = ["203.0.113.20/32"]
    (tmp_path / "Pulumi.trn1-llama2-aws.yaml").write_text(stack_yaml(aws))
    for name in ("cluster", "runs"):
        stack = f"Pulumi.trn1-llama2-{name}.yaml"
        (tmp_path / stack).write_text((EXAMPLES / stack).read_text())
    with pytest.raises(ci.UsageError, match="declares no in-VPC runner"):
        ci.route(["trn1-llama2-runs"], tmp_path)


def test_a_change_previews_the_stacks_it_touches() -> None:
    stacks = ["a-aws", "a-cluster", "a-runs"]
    assert ci.touched(stacks, ["Pulumi.a-runs.yaml"]) == ["a-runs"]
    assert ci.touched(stacks, ["README.md", "tests/unit/test_x.py"]) == []
    assert ci.touched(stacks, ["infra/queues.py"]) == stacks
    assert ci.touched(stacks, ["requirements.txt"]) == stacks
    # An example is nobody's deployed stack: its file is not a team's, and not the program.
    assert ci.touched(stacks, ["examples/Pulumi.a-runs.yaml", "examples/Pulumi.dev.yaml"]) == []


def test_ci_routes_a_teams_stacks_and_refuses_an_example(tmp_path: Path) -> None:
    """PULUMI_STACKS are a team's stacks at the root of the checkout, where `pulumi preview
    --stack` reads them; an example of the same name in examples/ is never routed in their place."""
    (tmp_path / "examples").mkdir()
    for layer in ("aws", "cluster", "runs"):
        name = f"Pulumi.trn1-llama2-{layer}.yaml"
        (tmp_path / "examples" / name).write_text((EXAMPLES / name).read_text())
    for layer in ("aws", "cluster"):
        text = (EXAMPLES / f"Pulumi.trn1-llama2-{layer}.yaml").read_text()
        (tmp_path / f"Pulumi.prod-{layer}.yaml").write_text(text.replace("/trn1-llama2-aws", "/prod-aws"))
    routes = ci.route(["prod-aws", "prod-cluster"], tmp_path, budgets=False)
    assert [e["stack"] for e in routes["aws"]] == ["prod-aws"]
    assert [e["stack"] for e in routes["in_vpc"]] == ["prod-cluster"]
    err = io.StringIO()
    args = ["stacks", "--stacks", '["trn1-llama2-runs"]', "--no-budget", "--stack-dir", str(tmp_path)]
    assert ci.main(args, stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == (
        "error: trn1-llama2-runs: only the example examples/Pulumi.trn1-llama2-runs.yaml exists; CI runs"
        " `pulumi preview --stack trn1-llama2-runs`, which reads Pulumi.trn1-llama2-runs.yaml at the root:"
        " copy the example there to make it a stack of yours (make new-stack STACK=trn1-llama2-runs"
        " FROM=trn1-llama2-runs)\n"
    )


def test_an_image_change_routes_the_stacks_that_build_or_run_it() -> None:
    """images/<repo>/ makes the aws layer's build inputs and the runs' image tags: a change there
    touches the aws stacks that build that image and the stacks whose runs use it."""
    stacks = ["trn1-llama2-aws", "trn1-llama2-cluster", "trn1-llama2-runs", "p4de-nemo", "trn1-bert"]
    llama = ci.touched(stacks, ["images/neuronx-nemo-megatron/Dockerfile"], EXAMPLES)
    assert llama == ["trn1-llama2-aws", "trn1-llama2-runs"]
    # The Trainium environment builds no NeMo image; the GPU stack that runs it is touched.
    assert ci.touched(stacks, ["images/nemo/Dockerfile"], EXAMPLES) == ["p4de-nemo"]
    assert ci.touched(stacks, ["images/bert-neuronx/Dockerfile"], EXAMPLES) == ["trn1-llama2-aws", "trn1-bert"]
    assert ci.touched(stacks, ["images/README.md"], EXAMPLES) == []


def test_the_github_output_format() -> None:
    out = io.StringIO()
    stacks = '["trn1-llama2-aws", "trn1-llama2-runs"]'
    code = ci.main(["stacks", "--stacks", stacks, "--format", "github", "--stack-dir", str(EXAMPLES)], stdout=out)
    assert code == 0
    lines = dict(line.split("=", 1) for line in out.getvalue().splitlines())
    assert set(lines) == {"aws", "cluster", "runs", "in_vpc", "count"} and lines["count"] == "2"
    (runs,) = json.loads(lines["runs"])
    assert set(runs) == {"stack", "layer", "preview", "deploy", "timeout"}
    err = io.StringIO()
    assert ci.main(["stacks", "--stacks", "dev"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().startswith("error: --stacks: not a JSON list")


def test_the_pull_request_plans_every_example_by_its_file(tmp_path: Path) -> None:
    """The job summary gets the offline plan of each example stack by its file (the project's dev at
    the root, the rest in examples/): a team's own `Pulumi.p5en.yaml` at the root is neither planned
    in the example's place nor listed as an example."""
    (step,) = [s for _, _, s in _steps(PR) if s.get("name") == "Offline plan of every example stack"]
    (tmp_path / "examples").mkdir()
    files = {name: path.relative_to(ROOT) for name, path in EXAMPLE_FILES.items()}
    for path in files.values():
        (tmp_path / path).write_text("")
    (tmp_path / "Pulumi.p5en.yaml").write_text("")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/bash\necho "python $*"\n')
    python.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {"PATH": os.environ["PATH"], "GITHUB_STEP_SUMMARY": str(summary)}
    bash = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
    subprocess.run(bash, cwd=tmp_path, env=env, check=True)
    text = summary.read_text()
    assert sorted(re.findall(r"^### Offline plan of the example `(.+)`$", text, re.M)) == EXAMPLE_STACKS
    assert sorted(re.findall(r"^python (.+)$", text, re.M)) == sorted(
        f"-m tools.plan --config-file {path}" for path in files.values()
    )


def test_each_preview_shows_make_diff_above_pulumis_preview() -> None:
    """The pull request's preview of each stack posts what the edit does to running work
    (tools.diff against the base) above `pulumi preview`'s output; exit 3 (disruption) is shown,
    not a failure; the checkout has the history `git show <base>:<file>` reads."""
    for job in ("preview-aws", "preview-in-vpc"):
        steps = PR["jobs"][job]["steps"]
        names = [s.get("name", s.get("uses", "")) for s in steps]
        at = next(i for i, n in enumerate(names) if "make diff" in n)
        assert at < next(i for i, n in enumerate(names) if n.startswith("Preview with the policy pack"))
        script = steps[at]["run"]
        assert '-m tools.diff --stack "$STACK" --base "$BASE"' in script and "GITHUB_STEP_SUMMARY" in script
        assert '[ "$code" -ne 3 ]' in script
        assert steps[at]["env"]["BASE"] == "${{ github.event.pull_request.base.sha }}"
        checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@"))
        assert checkout["with"]["fetch-depth"] == 0
