"""Commit subjects a reader can scan: `git log --oneline` shows what changed in under 72
characters; the why and the figures go in the body. The rule holds from commit a5805db on (the
history before it is left as it was: its median subject ran to 161 characters)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import ROOT

BASE = "a5805db"
"""The last commit before the rule: every commit after it is checked."""
MAX_SUBJECT = 71
"""Under 72 characters: what `git log --oneline`, GitHub's commit list and e-mail show whole."""


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def long_subjects(log: str) -> list[str]:
    """`<hash> <length>: <subject>` of each over-long subject in `git log --format=%h%x00%s` output."""
    out = []
    for line in log.splitlines():
        sha, _, subject = line.partition("\0")
        if len(subject) > MAX_SUBJECT:
            out.append(f"{sha} ({len(subject)} characters): {subject[:MAX_SUBJECT]}...")
    return out


def test_the_check_measures_the_subject_only() -> None:
    assert long_subjects("abc\0" + "x" * MAX_SUBJECT) == []
    assert long_subjects("abc\0" + "x" * (MAX_SUBJECT + 1)) == [f"abc (72 characters): {'x' * MAX_SUBJECT}..."]


def test_commit_subjects_after_the_base_stay_under_72_characters() -> None:
    if shutil.which("git") is None:
        pytest.skip("no git here: the commit subjects cannot be read")
    if git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout (an unpacked archive): no history to check")
    if git("cat-file", "-e", f"{BASE}^{{commit}}").returncode != 0:
        pytest.skip(f"commit {BASE} is not in this clone (shallow?): fetch more history to check the subjects after it")
    log = git("log", "--no-merges", "--format=%h%x00%s", f"{BASE}..HEAD")
    assert log.returncode == 0, log.stderr
    long = long_subjects(log.stdout)
    assert not long, (
        f"commit subjects over {MAX_SUBJECT} characters (say what changed; the why and the figures go in the body, "
        '`git commit -m "subject" -m "body"`; fix with `git commit --amend` or `git rebase -i`):\n' + "\n".join(long)
    )
