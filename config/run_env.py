"""The environment a training run's processes get, and what may reach them (`workloads.<name>`:
`env`, `secretEnv`, `internetEgress`; the rest of a run is config.workloads)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from config.base import KeyProblem, Model, Refusal, matches
from config.stackfile import SECRET


class ProcessEnv(Model):
    """Plain environment (written into the objects), secret environment (through a Kubernetes
    Secret) and whether the run's pods may reach the internet."""

    env: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Extra environment of every process: plain values, written into the objects; a value named or shaped "
            "like a secret, or stored encrypted, is refused (use `secretEnv`)."
        ),
    )
    secret_env: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Environment of every process from secrets, each stored encrypted with"
        " `pulumi config set --path --secret 'workloads.<name>.secretEnv.<NAME>' <value>`; the pods get them"
        " from the Kubernetes Secret `<name>-env` (secretKeyRef), never in the object.",
    )
    internet_egress: bool = Field(
        False,
        description="The run's MPI pods may open HTTPS connections outside the VPC (an experiment tracker, a"
        " model hub); default: they reach only each other and the cluster DNS (the download steps may"
        " reach the internet regardless).",
    )

    @field_validator("env", "secret_env")
    @classmethod
    def _env(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not matches(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise Refusal(f"{k!r} is not an environment variable name", "invalid")
        return v

    @model_validator(mode="after")
    def _secrets_stay_out_of_env(self) -> ProcessEnv:
        for k, value in sorted(self.env.items()):
            if value == SECRET:
                raise KeyProblem(
                    f"env.{k}",
                    "is stored encrypted, but env values are written into the objects; store it as"
                    f" secretEnv.{k} instead: pulumi config set --path --secret"
                    f" 'workloads.<name>.secretEnv.{k}' <value>",
                    "forbidden",
                )
        both = sorted(set(self.env) & set(self.secret_env))
        if both:
            raise KeyProblem(f"secretEnv.{both[0]}", "is also in env; give each variable once", "duplicate")
        return self
