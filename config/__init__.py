"""What a stack file may say, validated before any resource is declared.

The only reader of `pulumi.Config`. Every problem is collected and reported together, one
line each, naming the key path the way the stack file spells it
(`nodeGroups[0].capacity.reservationId: ...`) and saying what would be valid. Each problem is a
typed value (`config.problems.Problem`: path, kind, value, allowed, hint) that is its line. One module
per concern, mirroring `infra/`; `checks` holds the rules that span sections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
from pydantic import ValidationError

from config import checks
from config.messages import error_lines
from config.problems import Problem, as_problem, problem
from config.secrets import plain_secret_env
from config.stack import StackConfig
from config.stackfile import from_stack_values, namespace_problems, secret_keys

__all__ = [
    "SECRET_KEYS",
    "ConfigError",
    "Problem",
    "StackConfig",
    "from_stack_values",
    "load",
    "offline_warnings",
    "parse",
    "parse_stack_values",
]

SECRET_KEYS = ("huggingFaceToken",)
"""Keys that may only be stored encrypted (`pulumi config set --secret`)."""
MAX_PROBLEMS = 40
"""Problems reported at most (then one line says how many more): a small file cannot flood a terminal."""
MAX_LINE = 400
"""Characters of one problem line at most."""


def bounded(problems: Iterable[str | Problem]) -> list[Problem]:
    """One short printable line per problem, each once, at most MAX_PROBLEMS of them (+ a count).

    A plain line is read as a problem of kind `invalid` (`config.problems.as_problem`)."""
    out: list[Problem] = []
    extra = 0
    for given in problems:
        one = as_problem(given)
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in one[: MAX_LINE * 2])
        line = line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."
        if line in out:
            continue
        if len(out) < MAX_PROBLEMS:
            out.append(one if line == one else one.with_line(line))
        else:
            extra += 1
    if extra:
        out.append(problem("", "too-many", f"... and {extra} more problem(s); fix these first"))
    return out


class ConfigError(Exception):
    """Invalid stack config: `problems` holds one typed problem per refusal (bounded), each of
    which is its `key.path: message` line."""

    def __init__(self, problems: Iterable[str | Problem]):
        self.problems = bounded(problems)
        super().__init__("invalid stack config:\n" + "\n".join(self.problems))


def parse(
    raw: Mapping[str, Any], secret_keys: Iterable[str] | None = None, found: Iterable[str] = (), offline: bool = False
) -> StackConfig:
    """Validate a config dict (camelCase keys, `region` for aws:region) into a StackConfig.

    `secret_keys` are the keys stored encrypted in the stack; when given, a key of
    SECRET_KEYS stored in plain text is a problem. `found`: problems already found in the
    stack values (keys the program would ignore). `offline`: for a command that deploys nothing,
    which leaves out what only deploying needs (checks.hub_tokens; offline_warnings says it).
    Raises ConfigError with every problem found.
    """
    problems: list[str] = list(found)
    if secret_keys is not None:
        stored_secret = set(secret_keys)
        problems.extend(
            problem(
                key,
                "forbidden",
                f"must be stored encrypted, not in plain text: pulumi config set --secret {key} <value>",
                allowed="an encrypted value",
                hint=f"pulumi config set --secret {key} <value>",
            )
            for key in SECRET_KEYS
            if raw.get(key) not in (None, "") and key not in stored_secret
        )
        problems.extend(plain_secret_env(raw.get("workloads"), stored_secret))
    cfg: StackConfig | None = None
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as e:
        problems.extend(error_lines(e, StackConfig))
    for rule in checks.RAW_RULES:
        problems.extend(p for p in rule(raw) if p not in problems)
    if cfg is not None:
        problems.extend(checks.config_problems(cfg))
        problems.extend([] if offline else checks.hub_tokens(cfg))
    if problems or cfg is None:
        raise ConfigError(problems)
    return cfg


def parse_stack_values(values: Mapping[str, Any]) -> StackConfig:
    """Validate flat stack-file values (`llm-training-eks:key`, `aws:region`; secrets as
    placeholders) for the offline commands, which read stack files and deploy nothing (see
    `parse`'s `offline`). Raises ConfigError."""
    secret = [k.rpartition(":")[2] for k in secret_keys(values)]
    return parse(from_stack_values(values), secret_keys=secret, found=namespace_problems(values), offline=True)


def offline_warnings(cfg: StackConfig) -> list[str]:
    """What `pulumi preview`/`up` would refuse that an offline command goes on without, one line
    each for stderr, naming the command that sets it."""
    return [
        f"before pulumi up: {problem} (offline commands go on without it; `pulumi preview` and `up` refuse to start)"
        for problem in checks.hub_tokens(cfg)
    ]


def load(offline: bool = False) -> StackConfig:
    """Read and validate the current stack's config from the Pulumi engine (`offline`: from the
    offline plan's mocks, see `parse`).

    On invalid config, logs each problem as a Pulumi error and raises `pulumi.RunError`
    (reported without a traceback) before any resource is declared.
    """
    values = dict(runtime_config.CONFIG.get())
    secret = [k.rpartition(":")[2] for k in values if runtime_config.is_config_secret(k)]
    try:
        return parse(from_stack_values(values), secret_keys=secret, found=namespace_problems(values), offline=offline)
    except ConfigError as e:
        for line in e.problems:
            pulumi.log.error(line)
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)); nothing was created") from None
