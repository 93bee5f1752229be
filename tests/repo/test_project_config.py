"""The config keys declared in Pulumi.yaml agree with the config models.

Pulumi checks a declared key's type on `pulumi config set`/`preview`, makes a declared key
without a default required on every stack, and refuses a plaintext value for a `secret: true`
key. These tests keep those declarations consistent with `infra.config.StackConfig`.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
import yaml

import config
from tests.conftest import API_PATH, ROOT

PULUMI_TYPES = {bool: "boolean", int: "integer", str: "string", list: "array"}


def _declared() -> dict[str, dict[str, Any]]:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    return {k: v for k, v in (project.get("config") or {}).items() if ":" not in k}


def _fields() -> dict[str, Any]:
    return {info.alias or name: info for name, info in config.StackConfig.model_fields.items()}


def _pulumi_type(annotation: Any) -> str | None:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return _pulumi_type(args[0]) if len(args) == 1 else None
    return PULUMI_TYPES.get(typing.get_origin(annotation) or annotation)


@pytest.mark.parametrize("key", sorted(_declared()))
def test_declared_key_is_a_model_key_of_the_same_type(key: str) -> None:
    decl = _declared()[key]
    fields = _fields()
    assert key in fields, f"Pulumi.yaml declares {key!r}, which StackConfig does not accept"
    assert decl.get("type") == _pulumi_type(fields[key].annotation), f"{key}: Pulumi.yaml type disagrees with the model"
    assert decl.get("description"), f"{key}: give it a description"


@pytest.mark.parametrize("key", sorted(_declared()))
def test_defaults_agree_and_secrets_have_none(key: str) -> None:
    decl = _declared()[key]
    if decl.get("secret"):
        # A default would put a plaintext value in the project file and skip the encryption check.
        assert "default" not in decl, f"{key}: a secret key must not have a default"
        return
    # Without a default Pulumi makes the key required on every stack, which the model does not.
    field = _fields()[key]
    if field.is_required():
        return
    assert "default" in decl, f"{key}: optional in the model, so Pulumi.yaml needs its default"
    assert decl["default"] == field.get_default(call_default_factory=True), f"{key}: defaults differ"


def test_hugging_face_token_is_refused_in_plain_text() -> None:
    """Not declared in Pulumi.yaml (that would make it required on every stack); the loader
    refuses a plaintext token instead, in `pulumi up` and in the offline plan alike."""
    assert "huggingFaceToken" not in _declared()
    raw = {"region": "us-west-2", "cluster": API_PATH, "huggingFaceToken": "hf_plain"}
    with pytest.raises(config.ConfigError, match="must be stored encrypted"):
        config.parse(raw, secret_keys=[])
    assert config.parse(raw, secret_keys=["huggingFaceToken"]).hugging_face_token is not None
