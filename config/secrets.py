"""Secrets written in plain text where they would be rendered in the clear.

A workload's `env` is rendered into the Kubernetes object (and the stack file is committed):
a token, key or password there is readable by anyone who can read either. Such a value goes
in the run's `secretEnv`, stored encrypted (`pulumi config set --secret --path ...`, a `secure:`
value), which the pods read from a Kubernetes Secret. A value is taken for a secret by its
variable's name (a word such as TOKEN, SECRET, PASSWORD, or API_KEY) or by its shape (the
published prefixes of common credentials). An empty value is fine; an encrypted one in `env`
is refused by config.run_env (the objects would hold it decrypted). The rule refuses rather
than warns: a warning scrolls past, a leaked token does not come back. And every `secretEnv`
value must be stored encrypted (plain_secret_env).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.problems import problem
from config.stackfile import SECRET

_SECRET_WORDS = frozenset(
    {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "APIKEY"}
)
_KEY_QUALIFIERS = frozenset({"API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "AUTH"})
# Shapes of credentials by their documented prefixes: Hugging Face user access tokens (hf_), AWS
# access key ids (AKIA long-term, ASIA temporary), GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
# github_pat_), Slack (xox?-), OpenAI-style secret keys (sk-), GitLab (glpat-), Google API keys
# (AIza), PEM private keys.
_SECRET_VALUE_RE = re.compile(
    r"hf_[A-Za-z0-9]{30,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|glpat-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----",
    re.ASCII,
)


def secret_name(name: str) -> bool:
    """`HF_TOKEN`, `WANDB_API_KEY`, `DB_PASSWORD`: a variable whose name says it holds a secret
    (`TOKENIZERS_PARALLELISM`, `MAX_TOKENS` do not)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name.upper()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(w == "KEY" and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words))


def secret_value(value: str) -> bool:
    """A value shaped like a credential (a Hugging Face token, an AWS access key id, ...)."""
    return _SECRET_VALUE_RE.search(value) is not None


def plain_secret(name: str, value: str, placeholder: str) -> str | None:
    """Why `name=value` must not be plain text, or None; `placeholder` is what an encrypted
    value reads as here."""
    if value in ("", placeholder):
        return None
    if secret_value(value):
        return "holds what looks like a credential"
    if secret_name(name):
        return "is named like a secret"
    return None


def plain_secret_env(raw_workloads: Any, stored_secret: set[str]) -> list[str]:
    """`secretEnv` values that were not stored encrypted. A stack file shows an encrypted value
    as the SECRET placeholder; under the engine, a value set with `--path --secret` makes the
    whole `workloads` key secret (Pulumi's config marks a top-level key secure when any leaf is;
    tests/upstream/pulumi-config-secrets-3.259.yaml), the only sign the program gets."""
    if "workloads" in stored_secret or not isinstance(raw_workloads, Mapping):
        return []
    problems: list[str] = []
    for name, run in raw_workloads.items():
        values = run.get("secretEnv") if isinstance(run, Mapping) else None
        for key, value in values.items() if isinstance(values, Mapping) else ():
            if value != SECRET:
                command = f"pulumi config set --path --secret 'workloads.{name}.secretEnv.{key}' <value>"
                problems.append(
                    problem(
                        f"workloads.{name}.secretEnv.{key}",
                        "forbidden",
                        f"must be stored encrypted, not in plain text: {command}",
                        allowed="an encrypted value",
                        hint=command,
                    )
                )
    return problems
