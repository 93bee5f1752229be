"""A refusal of the stack config as a value: path, kind, value, what is allowed, a hint.

Modelled on Kubernetes' `field.ErrorList` (Kueue validates its config with it): each problem
names the key path as the stack file spells it (`nodeGroups[0].capacity.reservationId`), one
kind of a small closed set, the value given (shortened), what would be allowed and a hint. It
renders to the one line the project has always printed (`key.path: message`), and to a JSON
object for CI annotations (`make plan FORMAT=json` on an invalid stack).

A `Problem` is a `str` whose text is that line. Why a string and not a plain record: the rules
in `config/` are many, written by several people, and compare, collect and de-duplicate their
problems as lines (`p not in problems`, tests asserting `== ["key: ..."]`); a value that is its
line keeps all of them right. Every rule states its kind; a plain line (or a bare ValueError in a
validator) is still read back by `as_problem` as kind `invalid` with the path from its prefix, but
marked `parsed`, and tests/plan/test_config_problems_typed.py fails on any such problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, get_args

Kind = Literal["invalid", "required", "not-supported", "conflict", "duplicate", "forbidden", "too-many"]
"""The kinds of problem, a closed set (docs/guardrails.md lists them for CI annotations)."""

KINDS: dict[str, str] = {
    "invalid": "the value is of the wrong type, form or range (a malformed name, a count below its minimum)",
    "required": "a key that must be set is missing (alone, or because another key needs it)",
    "not-supported": "the value or key is not one the program knows (an unknown key, a value outside a list)",
    "conflict": "the value is fine alone but contradicts another key (a run larger than its node group)",
    "duplicate": "a name or entry that must be unique appears twice",
    "forbidden": "the value is not allowed here at all (a secret stored in plain text, a reserved name)",
    "too-many": "the count of problems passed the limit: this line says how many more there are",
}
"""What each kind means."""

if set(KINDS) != set(get_args(Kind)):  # pragma: no cover - a kind added to one place only
    raise AssertionError("config.problems: Kind and KINDS disagree")

# A key path as the lines spell it: `aws:region`, `nodeGroups[0].capacity`, `workloads.x.nodes`;
# no spaces, so prose before a colon (`... and 3 more problem(s)`) is never taken for a path.
_PATH_LINE = re.compile(
    r"([A-Za-z][A-Za-z0-9_\-]*(?::[A-Za-z][A-Za-z0-9_\-]*)?(?:\.[^\s:.\[]+|\[[^\]\s]*\])*): (.*)", re.ASCII | re.DOTALL
)


class Problem(str):
    """One refusal: its text is the line `path: detail`; the typed parts ride along.

    `value` is the given value as a message quotes it (already shortened), `allowed` what
    would be valid, `hint` what to do; each None when the rule has nothing to say there.
    """

    path: str
    kind: Kind
    value: str | None
    allowed: str | None
    hint: str | None
    parsed: bool
    """True when read back from a plain line by `as_problem`: its kind was not stated by its producer."""

    def __new__(
        cls,
        path: str,
        kind: Kind,
        detail: str,
        *,
        value: str | None = None,
        allowed: str | None = None,
        hint: str | None = None,
        parsed: bool = False,
    ) -> Problem:
        if kind not in KINDS:
            raise ValueError(f"problem kind {kind!r} is not one of {', '.join(KINDS)}")
        self = super().__new__(cls, f"{path}: {detail}" if path else detail)
        for name, part in (
            ("path", path),
            ("kind", kind),
            ("value", value),
            ("allowed", allowed),
            ("hint", hint),
            ("parsed", parsed),
        ):
            object.__setattr__(self, name, part)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Problem is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        # str's own reduce would call Problem(line) and lose the parts (copy, pickle).
        return (_rebuilt, (self.path, self.kind, self.detail, self.value, self.allowed, self.hint, self.parsed))

    @property
    def detail(self) -> str:
        """The line after its `path: ` prefix."""
        return str(self)[len(self.path) + 2 :] if self.path else str(self)

    def with_line(self, line: str) -> Problem:
        """The same problem rendered as `line` (a shortened or cleaned form of its own)."""
        path = self.path if line.startswith(f"{self.path}: ") else ""
        detail = line[len(path) + 2 :] if path else line
        parts = {"value": self.value, "allowed": self.allowed, "hint": self.hint}
        return Problem(path, self.kind, detail, **parts, parsed=self.parsed)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: path, kind, value, allowed, hint and the line as `message`."""
        return {
            "path": self.path,
            "kind": self.kind,
            "value": self.value,
            "allowed": self.allowed,
            "hint": self.hint,
            "message": str(self),
        }


def _rebuilt(*args: Any) -> Problem:
    path, kind, detail, value, allowed, hint, parsed = args
    return Problem(path, kind, detail, value=value, allowed=allowed, hint=hint, parsed=parsed)


def problem(
    path: str, kind: Kind, detail: str, *, value: str | None = None, allowed: str | None = None, hint: str | None = None
) -> Problem:
    """A problem at `path` (`key.path`), rendered `path: detail`, with its value, allowed and hint."""
    return Problem(path, kind, detail, value=value, allowed=allowed, hint=hint)


def as_problem(line: str | Problem) -> Problem:
    """A problem as it is, or a plain line read as one: kind `invalid`, path from its `key.path: ` prefix."""
    if isinstance(line, Problem):
        return line
    found = _PATH_LINE.fullmatch(line)
    if found is None:
        return Problem("", "invalid", line, parsed=True)
    return Problem(found.group(1), "invalid", found.group(2), parsed=True)


def as_problems(lines: Iterable[str | Problem]) -> list[Problem]:
    """`as_problem` of each."""
    return [as_problem(line) for line in lines]
