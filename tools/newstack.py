"""A stack of your own, started from an example: writes `Pulumi.NAME.yaml` at the root.

    python -m tools.newstack NAME --from EXAMPLE [--lower-stack STACK]
    make new-stack STACK=NAME FROM=EXAMPLE [LOWER=STACK]

EXAMPLE is any of the project's stacks: an example in examples/ or the project's own dev at the
root (tools.cli.project_stacks). The new file is its text, comments and all, with two changes: its
schema line points at schema/ from the root (an example's points from examples/), and a layered
example's `lowerStack` names your stack of the layer below (`--lower-stack`, required for a
cluster or runs example; the example's organization and project are kept). An existing file is never overwritten. Your
stack is yours: the test suite does not plan it unless you keep snapshots of it (tools.snapshot).
Exit 0; 2 for bad input, one line.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from config.stackfile import UsageError
from tools import cli

_EXAMPLE_SCHEMA = re.compile(r"^(# yaml-language-server: \$schema=)\.\./schema/", re.M)
_LOWER_STACK = re.compile(r"^(?P<key>\s*llm-training-eks:lowerStack:\s*)(?P<value>\S+)(?P<rest>.*)$", re.M)


def from_example(text: str, lower_stack: str | None, example: str = "the example") -> str:
    """The text of a team's stack file made from an example's text (see the module docstring)."""
    text = _EXAMPLE_SCHEMA.sub(r"\1./schema/", text, count=1)
    found = _LOWER_STACK.search(text)
    if found is None:
        if lower_stack:
            raise UsageError(f"--lower-stack {lower_stack}: {example} is not a layered stack; it reads no stack below")
        return text
    if not lower_stack:
        raise UsageError(
            f"{example} is a layered stack reading {found['value']}: name your stack of the layer below with"
            " --lower-stack NAME (make new-stack ... LOWER=NAME)"
        )
    cli.check_stack_name(lower_stack, "--lower-stack")
    owner = found["value"].strip("'\"").rpartition("/")[0]
    value = f"{owner}/{lower_stack}" if owner else lower_stack
    return text[: found.start()] + f"{found['key']}{value}{found['rest']}" + text[found.end() :]


def new_stack(name: str, example: str, lower_stack: str | None) -> str:
    """Write `Pulumi.<name>.yaml` in the team's folder from the project's stack `example`; says what it did."""
    cli.check_stack_name(name, "stack name")
    examples = cli.project_stacks()
    source = examples.get(example)
    if source is None:
        raise UsageError(f"--from {example}: no such example; examples: {', '.join(examples)}")
    target = cli.TEAM_DIR / f"Pulumi.{name}.yaml"
    if target == cli.PROJECT_DEV:
        raise UsageError(
            f"{cli.shown(target)} is the project's own dev stack, there already: use it as it is (`pulumi stack init"
            f" {name}` reads it), or start a stack under another name"
        )
    if target.exists():
        raise UsageError(f"{cli.shown(target)} exists already; not overwritten")
    target.write_text(from_example(source.read_text(), lower_stack, cli.shown(source)))
    return (
        f"wrote {cli.shown(target)} from {cli.shown(source)}; edit what differs for you (names, AZs, API access,"
        f" ids), check it with `make plan STACK={name}`, then `pulumi stack init {name}`"
    )


def main(argv: Sequence[str] | None = None, stderr: Any = None) -> int:
    stderr = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m tools.newstack", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("name", help="your stack's name: writes Pulumi.NAME.yaml at the root")
    parser.add_argument(
        "--from", dest="example", required=True, help="the example: examples/Pulumi.EXAMPLE.yaml, or dev"
    )
    parser.add_argument("--lower-stack", help="a cluster or runs example: your stack of the layer below")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        print(new_stack(args.name, args.example, args.lower_stack), file=stderr)
    except (UsageError, OSError) as e:
        print(f"error: {e}", file=stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
