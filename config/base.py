"""What every config section shares: the model base, key-naming errors, name patterns.

Patterns are matched with `matches` (`re.fullmatch`, ASCII classes only): `re.match(...$)`
accepts a trailing newline and `\\d`/`\\w` accept non-ASCII digits and letters, which AWS and
Kubernetes refuse.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from config.problems import Kind

# AZ names (us-west-2d) and the names Kubernetes gives objects (DNS-1035 labels: Service names
# and MPI worker host names start with a letter).
AZ_RE = re.compile(r"[a-z]{2}-[a-z]+-[0-9][a-z]", re.ASCII)
DNS_LABEL_RE = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)
RUN_ID_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,18}[a-z0-9])?", re.ASCII)
WORKLOAD_NAME_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,18}[a-z0-9])?", re.ASCII)
# A reference: registry host and path components (lowercase), then a tag (distribution's
# reference grammar: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}) or a sha256 digest.
_IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9._\-/:]*(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}|@sha256:[0-9a-f]{64})", re.ASCII)
IMAGE_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}", re.ASCII)

INT32_MAX = 2**31 - 1
"""Kubernetes and most AWS APIs carry counts as 32-bit integers."""


def matches(pattern: re.Pattern[str] | str, value: object) -> bool:
    """The whole of `value` (a string) matches `pattern`, whose classes are ASCII-only."""
    compiled = re.compile(pattern, re.ASCII) if isinstance(pattern, str) else pattern
    if not compiled.flags & re.ASCII:
        raise ValueError(f"pattern {compiled.pattern!r} must be compiled with re.ASCII")
    return isinstance(value, str) and compiled.fullmatch(value) is not None


class Model(BaseModel):
    """Base of every config section: camelCase keys only (no snake_case synonyms), unknown keys
    rejected, strict types (`true` is not a count, `"3"` is not a number), finite numbers,
    integers within int32, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=False,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
        strict=True,
        allow_inf_nan=False,
    )

    @field_validator("*", mode="after")
    @classmethod
    def _int32(cls, v: Any) -> Any:
        for n in _numbers(v):
            if isinstance(n, int) and not -INT32_MAX - 1 <= n <= INT32_MAX:
                raise Refusal(f"{n} is outside the 32-bit integer range AWS and Kubernetes take", "invalid")
            if isinstance(n, float) and not math.isfinite(n):
                raise Refusal(f"{n} is not a finite number", "invalid")
        return v


def _numbers(v: Any) -> Iterable[int | float]:
    if isinstance(v, bool):
        return
    if isinstance(v, (int, float)):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _numbers(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _numbers(x)


class Refusal(ValueError):
    """A validator's refusal with the parts of a typed problem (config.problems.Problem): its
    kind, what is allowed, a hint. config.messages reads them; the line is the message alone."""

    def __init__(self, message: str, kind: Kind = "invalid", allowed: str | None = None, hint: str | None = None):
        self.kind: Kind = kind
        self.allowed = allowed
        self.hint = hint
        super().__init__(message)


class KeyProblem(Refusal):
    """A model-level check that blames one field of the model (reported as `path.field`)."""

    def __init__(
        self, key: str, message: str, kind: Kind = "invalid", allowed: str | None = None, hint: str | None = None
    ):
        self.key = key
        super().__init__(f"{key}: {message}", kind, allowed, hint)


def check_sizes(desired: int, min_size: int | None, max_size: int | None) -> None:
    """EKS scaling rules: min <= desired <= max, max >= 1."""
    hi = max_size if max_size is not None else max(desired, min_size or 0, 1)
    if min_size is not None and min_size > hi:
        raise KeyProblem("minSize", f"{min_size} is greater than maxSize {hi}", "conflict", allowed=f"at most {hi}")
    lo = min_size if min_size is not None else min(desired, hi)
    if not lo <= desired <= hi:
        raise KeyProblem(
            "desiredSize",
            f"{desired} must lie between minSize {lo} and maxSize {hi}",
            "conflict",
            allowed=f"{lo} to {hi}",
        )
    if hi < 1:
        raise KeyProblem("maxSize", "must be at least 1 (EKS requires it)", "invalid", allowed="1 or more")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_image(v: str | None) -> str | None:
    """A container image reference with an explicit tag (not latest) or digest."""
    if v is None:
        return v
    if v.endswith(":latest") or not matches(_IMAGE_RE, v):
        raise Refusal(
            f"{v!r} needs an explicit tag or digest other than latest (e.g. repo/name:1.2.3), so a run is repeatable",
            "invalid",
        )
    return v


def ipv4_cidr(cidr: str) -> ipaddress.IPv4Network:
    """A CIDR as AWS writes it (`203.0.113.0/24`: no host bits, no leading zeros, no spaces)."""
    try:
        net = ipaddress.IPv4Network(cidr)
    except ValueError:
        raise Refusal(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24", "invalid") from None
    if str(net) != cidr:
        raise Refusal(f"{cidr!r} is not written as AWS writes CIDRs; use {str(net)!r}", "invalid")
    return net
