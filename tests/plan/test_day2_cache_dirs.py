"""Day 2: an edit that changes a Neuron server's compile-cache key (maxModelLen, maxNumSeqs,
tensorParallel) re-runs the dirs Job, which must make the new keyed directory.

The dirs Job runs as root with every capability dropped but CHOWN
(workloads/manifests/security.py DIRS_CAPABILITIES): without CAP_DAC_OVERRIDE (one of the
runtime's defaults it drops, tests/upstream/amazon-eks-ami-base-runtime-spec.yaml) root passes the
ordinary permission checks (Linux capabilities(7), man-pages 6.9: CAP_DAC_OVERRIDE "bypass file
read, write, and execute permission checks"), so it can make a directory only inside one it owns
(mkdir's 0755 under umask 022). Before, the Job handed `<workload>/neuron-cache` to the server's
user on its first run, and the next key could not be made in it: `mkdir: cannot create
directory ... Permission denied`, found by the launch harness's restart scenario
(tests/launch/test_serving_life.py). The script is played here on a model of those ownerships,
from an empty /shared and from one the earlier Job left.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.conftest import run_plan, stack_plan, stack_values
from workloads.manifests.security import NON_ROOT_UID

STACK = "trn2-serve"
NS = "llm-training-eks:"
EDITS = {"maxModelLen": 4096, "maxNumSeqs": 16, "tensorParallel": 2}


def dirs_script(plan: dict[str, Any]) -> str:
    (job,) = [
        r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "Job" and r["name"].endswith("-dirs")
    ]
    return str(job["spec"]["template"]["spec"]["containers"][0]["command"][-1])


def play(script: str, owners: dict[str, int]) -> None:
    """The script's mkdir -p and chown as root without CAP_DAC_OVERRIDE: a new directory only in
    one root owns. `owners`: directory -> owning uid (updated); the mount point is root's."""
    for line in script.splitlines():
        words = shlex.split(line)
        if words[:2] == ["mkdir", "-p"]:
            for path in words[2:]:
                for d in reversed([PurePosixPath(path), *PurePosixPath(path).parents]):
                    if str(d) in owners or str(d) == "/":
                        continue
                    parent = str(d.parent)
                    if owners.get(parent, 0) != 0:
                        raise PermissionError(f"mkdir: cannot create directory '{d}': Permission denied")
                    owners[str(d)] = 0
        elif words[:1] == ["chown"]:
            uid = int(words[1].split(":")[0])
            for path in words[2:]:
                assert path in owners, f"chown: cannot access '{path}'"
                owners[path] = uid


def neuron_cache_dirs(plan: dict[str, Any]) -> list[str]:
    env = plan_env(plan)
    return [env["VLLM_CACHE_ROOT"].rsplit("/", 1)[0]]


def plan_env(plan: dict[str, Any]) -> dict[str, str]:
    (d,) = [r["inputs"] for r in plan["resources"] if r["inputs"].get("kind") == "Deployment"]
    return {e["name"]: e.get("value", "") for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("left_by", ["this Job", "the earlier Job"])
@pytest.mark.parametrize(("key", "value"), EDITS.items())
def test_a_new_cache_key_gets_its_directory(key: str, value: int, left_by: str) -> None:
    before = stack_plan(STACK)
    values = copy.deepcopy(stack_values(STACK))
    values[f"{NS}workloads"]["qwen"][key] = value
    after = run_plan(values, STACK)
    (old,), (new,) = neuron_cache_dirs(before), neuron_cache_dirs(after)
    assert old != new, "the edit must change the cache key"
    owners = {"/shared": 0}
    play(dirs_script(before), owners)
    if left_by == "the earlier Job":  # as the Job before this change left the cache's parent
        owners[str(PurePosixPath(old).parent)] = NON_ROOT_UID
    play(dirs_script(after), owners)  # raises PermissionError where the Job would fail
    assert owners[new] == owners[f"{new}/work"] == NON_ROOT_UID, owners
