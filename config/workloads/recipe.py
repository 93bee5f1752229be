"""What a recipe states about itself, besides its config keys: the shapes of its facts.

Each recipe model (one module of this package) sets every one of these as a class attribute
of its own; tests/unit/test_recipe_registry.py reads the registry and names the recipe and the
fact it lacks. The shapes of what a recipe says for the estimates (its checkpoint model, step-time
source and compile) live with them: estimates/checkpoints.py, step_time.py, startup.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Status = Literal["current", "beta", "maintenance", "end of support", "seed"]


@dataclass(frozen=True)
class Support:
    """The recipe's row of the support table: the hardware it runs on, its software versions,
    and its support status upstream (current, beta, maintenance, end of support)."""

    hardware: str
    software: str
    status: Status
    why: str
    """What the status rests on (the upstream announcement or release note)."""


@dataclass(frozen=True)
class RecipeDocs:
    """The recipe's row of the recipe table (tools/recipe_table.py renders the table from these)."""

    follows: str
    """What it follows upstream, with the version."""
    image: str
    """The image: for a built one, what its Dockerfile starts from (the folder is derived from
    the recipe's repository); otherwise where it comes from."""
    steps: Mapping[str, str]
    """Step (one of the recipe's STEPS, in their order) -> what runs in it."""
    beside: tuple[str, ...] = ()
    """Steps that run beside the others (TensorBoard, a shell pod): nothing waits for them and
    they wait for nothing; the table lists them after the chain."""
    support: Support | None = None
    """Its row of the support table (every recipe states one: tests/unit/test_recipe_registry.py)."""


@dataclass(frozen=True)
class HeldAgainst:
    """The upstream facts (tests/upstream/<name>.yaml) the recipe's rendered commands and script
    arguments are held against; tests/plan/test_recipe_arguments.py has one check per file."""

    facts: tuple[str, ...]
    what: str
    """What of the rendered commands the facts hold (for the docs and a reader)."""


@dataclass(frozen=True)
class NotHeld:
    """A recipe whose script arguments are not checked against any upstream, and why."""

    why: str


Arguments = HeldAgainst | NotHeld


@dataclass(frozen=True)
class NoExampleStack:
    """A recipe that no example stack runs, and why (what exercises it instead)."""

    why: str


ExampleStacks = tuple[str, ...] | NoExampleStack
"""The example stacks (examples/Pulumi.<name>.yaml) that run the recipe."""


@dataclass(frozen=True)
class Conversion:
    """How a finished run of the recipe becomes a Hugging Face model a server loads: the
    converter the recipe's builder runs in the run's own image (its `convert` function in
    workloads/manifests/), and the upstream facts its arguments are held against."""

    follows: str
    """The upstream converter, with its version."""
    facts: str
    """tests/upstream/<facts>.yaml: the converter's options."""


@dataclass(frozen=True)
class RunExport:
    """A recipe whose runs write a Hugging Face folder themselves, as a step of the run (its
    exporter's options held with the run's arguments, `facts`); the conversion Job of a serving run
    copies the newest complete export. `key`: the run's key that turns the export on."""

    follows: str
    facts: str
    key: str


@dataclass(frozen=True)
class NoConversion:
    """A recipe whose runs cannot be served (no converter to a Hugging Face model), and why."""

    why: str


Converter = Conversion | RunExport | NoConversion
