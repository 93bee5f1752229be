"""What a stack file may say, validated before any resource is declared.

The only reader of `pulumi.Config`. Every problem is collected and reported together, one
line each, naming the key path the way the stack file spells it
(`nodeGroups[0].capacity.reservationId: ...`) and saying what would be valid. One module
per concern, mirroring `infra/`; `checks` holds the rules that span sections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
import pulumi.runtime.config as runtime_config
from pydantic import ValidationError

from config import checks
from config.messages import messages
from config.stack import StackConfig
from config.stackfile import from_stack_values, secret_keys
from config.workloads import RECIPES, plain_secret_env

__all__ = ["SECRET_KEYS", "ConfigError", "StackConfig", "from_stack_values", "load", "parse", "parse_stack_values"]

SECRET_KEYS = ("huggingFaceToken",)
"""Keys that may only be stored encrypted (`pulumi config set --secret`)."""


class ConfigError(Exception):
    """Invalid stack config: `problems` holds one `key.path: message` line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(problems))


def parse(raw: Mapping[str, Any], secret_keys: Iterable[str] | None = None) -> StackConfig:
    """Validate a config dict (camelCase keys, `region` for aws:region) into a StackConfig.

    `secret_keys` are the keys stored encrypted in the stack; when given, a key of
    SECRET_KEYS stored in plain text is a problem. Raises ConfigError with every problem found.
    """
    problems: list[str] = []
    if secret_keys is not None:
        stored_secret = set(secret_keys)
        problems.extend(
            f"{key}: must be stored encrypted, not in plain text: pulumi config set --secret {key} <value>"
            for key in SECRET_KEYS
            if raw.get(key) not in (None, "") and key not in stored_secret
        )
        problems.extend(plain_secret_env(raw.get("workloads"), stored_secret))
    cfg: StackConfig | None = None
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as e:
        problems.extend(messages(e, StackConfig, RECIPES))
    for rule in checks.RAW_RULES:
        problems.extend(p for p in rule(raw) if p not in problems)
    if cfg is not None:
        problems.extend(checks.config_problems(cfg))
    if problems or cfg is None:
        raise ConfigError(problems)
    return cfg


def parse_stack_values(values: Mapping[str, Any]) -> StackConfig:
    """Validate flat stack-file values (`llm-training-eks:key`, `aws:region`; secrets as
    placeholders). Raises ConfigError."""
    return parse(from_stack_values(values), secret_keys=[k.rpartition(":")[2] for k in secret_keys(values)])


def load() -> StackConfig:
    """Read and validate the current stack's config from the Pulumi engine.

    On invalid config, logs each problem as a Pulumi error and raises `pulumi.RunError`
    (reported without a traceback) before any resource is declared.
    """
    values = dict(runtime_config.CONFIG.get())
    secret = [k.rpartition(":")[2] for k in values if runtime_config.is_config_secret(k)]
    try:
        return parse(from_stack_values(values), secret_keys=secret)
    except ConfigError as e:
        for line in e.problems:
            pulumi.log.error(line)
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)); nothing was created") from None
