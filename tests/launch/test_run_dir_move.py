"""The second start of a run deployed before run outputs moved under /shared/runs/.

A stack from before kept llama2's run-001 in /shared/llama2/run-001. The harness plays its
first launch, puts the run directory back where the old layout had it (its checkpoints after
the first one gone and no `.trained` marker: a run stopped mid-way), then plays the launch this
code plans: the launcher moves the old directory first (a rename, a symlink left behind) and
resumes from the checkpoint it finds in the new place. Only under LAUNCH_HARNESS=1.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.launch import plans
from tests.launch.harness import RESUME_LOG, Faults, WorkloadRun, checkpoint_step
from tests.launch.images import describe

if os.environ.get("LAUNCH_HARNESS") != "1":
    pytest.skip("launch-chain harness skipped: LAUNCH_HARNESS=1", allow_module_level=True)

STACK, WORKLOAD = "trn1-llama2", "llama2"


def test_a_run_from_before_the_move_resumes_from_its_moved_checkpoints(tmp_path: Path) -> None:
    nodes = plans.launch_nodes(STACK, WORKLOAD)[0]
    run = WorkloadRun(tmp_path / "run", STACK, WORKLOAD, nodes, False)
    try:
        first = run.pipeline(Faults())
        assert all(r.succeeded for r in first), run.log()[-3000:]
        env = {e["name"]: e.get("value") for e in plans.containers(run.training)["env"]}
        new = run.shared / str(env["RUN_DIR"]).removeprefix("/shared/")
        assert new.parts[-3:] == ("runs", WORKLOAD, "run-001"), new
        steps = sorted(run.checkpoints(), key=lambda p: checkpoint_step(p.name))
        assert len(steps) >= 2, steps
        kept = checkpoint_step(steps[0].name)
        for later in steps[1:]:
            shutil.rmtree(later) if later.is_dir() else later.unlink()
        (new / ".trained").unlink()
        old = run.shared / WORKLOAD / "run-001"
        new.rename(old)  # the layout a stack from before has
        run.results.clear()
        second = run.pipeline(Faults())
        assert all(r.succeeded for r in second), run.log()[-3000:]
        log = run.log()
        assert f"moved /shared/{WORKLOAD}/run-001 to /shared/runs/{WORKLOAD}/run-001" in log, log[-3000:]
        assert old.is_symlink() and old.resolve() == new.resolve()
        assert (new / ".trained").exists(), "the resumed run did not finish"
        framework = describe(plans.containers(run.training)["image"]).framework
        template = RESUME_LOG[framework]
        resumed = [
            line
            for line in log.splitlines()
            if re.match("^" + re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(template)) + "$", line)
        ]
        # e.g. "Resuming from /shared/runs/llama2/run-001/checkpoints/...step=4-...ckpt"
        here = [line for line in resumed if f"/shared/runs/{WORKLOAD}/run-001/" in line]
        assert here and {checkpoint_step(line) for line in here} == {kept}, (kept, resumed)
    finally:
        run.close()
