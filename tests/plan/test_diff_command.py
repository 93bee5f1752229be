"""`make diff`: a before/after pair of stack files for each class of consequence, with the lines the
command prints and its exit code (0: nothing running touched; 3: running work disrupted or
`pulumi up` would stop; 2: invalid config)."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tools import diff
from tools.cli import EXAMPLES_DIR, ROOT

Edit = Callable[[dict[str, Any]], None]


def _write(folder: Path, name: str, doc: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def pair(tmp_path: Path, example: str, edit: Edit, before: Edit | None = None) -> tuple[Path, Path]:
    """The example's file (edited by `before`, if given) as deployed, and it edited by `edit`."""
    doc = yaml.safe_load((EXAMPLES_DIR / f"Pulumi.{example}.yaml").read_text())
    if before is not None:
        before(doc["config"])
    after = copy.deepcopy(doc)
    edit(after["config"])
    return _write(tmp_path / "deployed", example, doc), _write(tmp_path, "edited", after)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = diff.main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def run_pair(tmp_path: Path, example: str, edit: Edit, before: Edit | None = None) -> tuple[int, str]:
    deployed, edited = pair(tmp_path, example, edit, before)
    code, out, err = run("--config-file", str(deployed), "--file", str(edited))
    assert code in (0, 3), err
    return code, out


def workloads(c: dict[str, Any]) -> dict[str, Any]:
    return c["llm-training-eks:workloads"]


def test_a_release_bump_rolls_the_nodes_under_a_run_and_a_server(tmp_path: Path) -> None:
    """node_group.go resourceNodeGroupUpdate: releaseVersion -> UpdateNodegroupVersion (every node)."""

    def pinned(release: str) -> Edit:
        return lambda c: c["llm-training-eks:nodeGroups"][0].update(releaseVersion=release)

    code, out = run_pair(tmp_path, "p5-train-serve", pinned("1.35.6-20260714"), before=pinned("1.35.6-20260625"))
    assert code == 3
    assert "! node group p5: its 2 node(s) roll (releaseVersion); on them: chat (serving), llama (training)" in out
    assert "! run llama: its nodes roll (p5); it restarts from its latest checkpoint (every 100 steps)" in out
    assert "- server chat: its nodes roll (p5); keeps serving (one replica at a time)" in out
    assert "~ NodeGroup ng-p5-ng update: releaseVersion" in out
    # docs/operations.md shows this very output
    assert f"```text\n{out}```" in (ROOT / "docs" / "operations.md").read_text()


def test_a_launch_template_edit_rolls_the_nodes_it_launches(tmp_path: Path) -> None:
    """A bigger root volume is a new launch template version (EC2's CreateLaunchTemplateVersion,
    tools/offline/versions.py), which the node group takes: UpdateNodegroupVersion, every node."""

    def bigger_root(c: dict[str, Any]) -> None:
        group = c["llm-training-eks:nodeGroups"][0]
        group["rootVolumeSizeGiB"] = group.get("rootVolumeSizeGiB", 200) + 100

    code, out = run_pair(tmp_path, "trn1-llama2", bigger_root)
    assert code == 3
    assert "! node group trn1: its 4 node(s) roll (launchTemplate.version); on them: llama2 (training)" in out
    assert "! run llama2: its nodes roll (trn1); it restarts from its latest checkpoint (every 500 steps)" in out


def test_a_new_run_id_stops_the_running_run_and_starts_the_next(tmp_path: Path) -> None:
    code, out = run_pair(tmp_path, "p5-train-serve", lambda c: workloads(c)["llama"].update(runId="run-002"))
    assert code == 3
    assert "! run llama: llama-run-001-train is deleted: the run stops (its checkpoints stay on /shared)" in out
    assert "- run llama: llama-run-002-train starts" in out


def test_a_server_with_two_replicas_keeps_serving_through_its_roll(tmp_path: Path) -> None:
    code, out = run_pair(tmp_path, "p5-train-serve", lambda c: workloads(c)["chat"].update(maxModelLen=2048))
    assert code == 0, out
    assert "- server chat: rolls its replicas; keeps serving (one replica at a time)" in out


def test_a_server_with_one_replica_stops_serving_through_its_roll(tmp_path: Path) -> None:
    code, out = run_pair(
        tmp_path,
        "p5-train-serve",
        lambda c: workloads(c)["chat"].update(maxModelLen=2048),
        before=lambda c: workloads(c)["chat"].update(replicas=1),
    )
    assert code == 3
    assert "! server chat: rolls its replicas; stops serving until a replica is back" in out


def test_a_job_on_a_group_at_zero_waits_in_kueue_not_in_pulumi_up(tmp_path: Path) -> None:
    """The next run's data steps on a group scaled to 0: Kueue holds them; `pulumi up` does not
    wait for them (workloads/manifests/admission.py), and the diff says they wait for nodes."""

    def next_run_on_zero(c: dict[str, Any]) -> None:
        workloads(c)["llama2"]["runId"] = "run-002"
        c["llm-training-eks:nodeGroups"][0].update(desiredSize=0, minSize=0, maxSize=4)

    code, out = run_pair(tmp_path, "trn1-llama2", next_run_on_zero)
    assert code == 3  # the running run-001 stops
    waits = [line for line in out.splitlines() if "waits in Kueue until node group trn1 has nodes" in line]
    assert waits, out
    assert "cannot admit" not in out


def test_replacing_a_protected_file_system_is_refused(tmp_path: Path) -> None:
    code, out = run_pair(
        tmp_path, "p5-train-serve", lambda c: c["llm-training-eks:storage"].update(deploymentType="SCRATCH_2")
    )
    assert code == 3
    assert "! refused: replace of protected aws:fsx/lustreFileSystem:LustreFileSystem storage-lustre" in out


def test_no_change_touches_nothing(tmp_path: Path) -> None:
    code, out = run_pair(tmp_path, "p5-train-serve", lambda c: None)
    assert code == 0
    assert "no changes" in out and "What it does to running work: nothing" in out


def test_json_lists_each_effect(tmp_path: Path) -> None:
    deployed, edited = pair(tmp_path, "p5-train-serve", lambda c: workloads(c)["llama"].update(runId="run-002"))
    code, out, _ = run("--config-file", str(deployed), "--file", str(edited), "--format", "json")
    data = json.loads(out)
    assert code == 3 and data["disrupts"] is True
    # the server follows its training workload through a link the conversion moves: not touched
    assert {e["kind"] for e in data["effects"]} == {"restart"}
    assert data["steps"] == {"create": 3, "delete": 3, "update": 1}


def test_an_invalid_edit_exits_2_with_its_problems(tmp_path: Path) -> None:
    deployed, edited = pair(tmp_path, "p5-train-serve", lambda c: workloads(c)["chat"].update(maxModelLen=8192))
    code, out, err = run("--config-file", str(deployed), "--file", str(edited), "--format", "json")
    assert code == 2
    assert "workloads.chat.maxModelLen" in err
    assert json.loads(out)["problems"][0]["path"] == "workloads.chat.maxModelLen"


def test_base_reads_the_file_at_a_git_ref() -> None:
    code, out, err = run("--stack", "p5-train-serve", "--base", "HEAD")
    assert code == 0, err
    assert "no changes" in out
    code, _, err = run("--stack", "p5-train-serve", "--base", "no-such-ref-0123")
    assert code == 2 and "--base no-such-ref-0123" in err


def test_a_template_edit_of_a_block_group_with_nodes_names_the_way_through(tmp_path: Path) -> None:
    """EKS user guide capacity-blocks-mng (awsdocs/amazon-eks-user-guide at 0a7189e9, see
    tests/upstream/aws-eks-capacity-blocks-2026-11.yaml): a Capacity Block group is updated only at
    desired size 0. Any launch template edit (here the root volume) is a new version and a roll; the
    line says how to make it: after the block, or at desired size 0 first. At 0 nothing is said."""

    def bigger_root(c: dict[str, Any]) -> None:
        group = c["llm-training-eks:nodeGroups"][0]
        group["rootVolumeSizeGiB"] = group.get("rootVolumeSizeGiB", 200) + 100

    code, out = run_pair(tmp_path, "trn2-torchtitan", bigger_root)
    assert code == 3
    (line,) = [line for line in out.splitlines() if "! node group trn2:" in line]
    assert "roll (launchTemplate.version)" in line
    assert "make this edit after the block ends, or deploy desiredSize: 0 and minSize: 0 first" in line

    def paused(c: dict[str, Any]) -> None:
        c["llm-training-eks:nodeGroups"][0].update(desiredSize=0, maxSize=2)

    (tmp_path / "paused").mkdir()
    code, out = run_pair(tmp_path / "paused", "trn2-torchtitan", bigger_root, before=paused)
    assert "after the block ends" not in out
