"""Every example stack that runs something: each command its objects run uses only what its image
has (tests/unit/test_images.py: the image's build checks, ENV and programs). Here, not in unit/,
because it plans every example stack."""

from __future__ import annotations

import pytest

from config.stackfile import read_stack_file
from tests.conftest import EXAMPLE_FILES, stack_plan
from tests.unit.test_images import image_problems

STACKS_WITH_RUNS = sorted(
    name for name, path in EXAMPLE_FILES.items() if read_stack_file(path).get("llm-training-eks:workloads")
)
"""Every example stack that runs something (each image its runs use is checked where it runs)."""


@pytest.mark.parametrize("stack", STACKS_WITH_RUNS)
def test_example_stack_commands_use_only_what_their_image_has(stack: str) -> None:
    objs = [r["inputs"] for r in stack_plan(stack)["resources"] if r["type"].startswith("kubernetes:")]
    assert image_problems(objs) == []
