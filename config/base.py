"""What every config section shares: the model base, key-naming errors, name patterns."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# AZ names (us-west-2d, us-gov-west-1a) and the names Kubernetes gives objects.
AZ_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
RUN_ID_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$")
_IMAGE_RE = re.compile(r"^[a-z0-9][\w.\-/:]*(:[\w][\w.\-]{0,127}|@sha256:[0-9a-f]{64})$")


class Model(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, validate_default=True
    )


class KeyProblem(ValueError):
    """A model-level check that blames one field of the model (reported as `path.field`)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


def check_sizes(desired: int, min_size: int | None, max_size: int | None) -> None:
    """EKS scaling rules: min <= desired <= max, max >= 1."""
    hi = max_size if max_size is not None else max(desired, min_size or 0, 1)
    if min_size is not None and min_size > hi:
        raise KeyProblem("minSize", f"{min_size} is greater than maxSize {hi}")
    lo = min_size if min_size is not None else min(desired, hi)
    if not lo <= desired <= hi:
        raise KeyProblem("desiredSize", f"{desired} must lie between minSize {lo} and maxSize {hi}")
    if hi < 1:
        raise KeyProblem("maxSize", "must be at least 1 (EKS requires it)")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_image(v: str | None) -> str | None:
    """A container image reference with an explicit tag (not latest) or digest."""
    if v is None:
        return v
    if v.endswith(":latest") or not _IMAGE_RE.match(v):
        raise ValueError(
            f"{v!r} needs an explicit tag or digest other than latest (e.g. repo/name:1.2.3), so a run is repeatable"
        )
    return v
