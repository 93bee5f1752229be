"""The launch-chain harness (see test_launch_chain.py); its stand-ins are programs, not tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launch.serving import ServingRun

collect_ignore_glob = ["standins/*"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """`serve(stack, workload)`: a ServingRun on its own local cluster, closed after the test."""
    runs: list[ServingRun] = []

    def make(stack: str, workload: str) -> ServingRun:
        run = ServingRun(tmp_path / workload, stack, workload)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.close()
