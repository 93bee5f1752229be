"""Compose Hydra overrides against an upstream config rebuilt from its recorded key set.

The fact files keep every leaf key of an upstream config (and which are `???` or null),
never its values. Rebuilt from them, the config behaves like the real one for the questions
Hydra asks when it composes: does a plain `key=value` name an existing key, does `+key=value`
name an absent one, is any mandatory value left unset. Composition is done by hydra-core
itself (the version NeMo and neuronx-nemo-megatron pin), not by our own reading of the rules.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from tests import upstream

SCRIPT = "megatron_gpt_pretraining.py"


def config_tree(keys: Iterable[str], mandatory: Iterable[str], null: Iterable[str]) -> dict[str, Any]:
    """A nested config with every key: `???` and null where upstream has them, a placeholder
    value elsewhere (Hydra adds `+key` to a null leaf but refuses it on one with a value)."""
    required, empty = set(mandatory), set(null)
    tree: dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.split(".")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = "???" if key in required else None if key in empty else "upstream-value"
    return tree


def compose_upstream(facts_name: str, config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Compose `overrides` onto upstream config `config_name` of fact file `facts_name`.

    Raises hydra's ConfigCompositionException (or an OmegaConf error) exactly where the real
    script would stop.
    """
    spec = upstream.facts(facts_name)["configs"][config_name]
    with tempfile.TemporaryDirectory() as conf:
        tree = config_tree(spec["keys"], spec["mandatory"], spec["null"])
        (Path(conf) / f"{config_name}.yaml").write_text(yaml.safe_dump(tree))
        with initialize_config_dir(config_dir=conf, version_base="1.1"):
            return compose(config_name=config_name, overrides=list(overrides))


def schema_problems(facts_name: str, cfg: DictConfig) -> list[str]:
    """exp_manager keys the upstream ExpManagerConfig / CallbackParams schema would refuse
    (exp_manager merges its config into that structured schema), and mandatory values left unset."""
    schema = upstream.facts(facts_name)["exp_manager_schema"]
    problems = [f"exp_manager.{k}" for k in cfg.exp_manager if k not in schema["ExpManagerConfig"]]
    params = cfg.exp_manager.get("checkpoint_callback_params") or {}
    problems += [f"exp_manager.checkpoint_callback_params.{k}" for k in params if k not in schema["CallbackParams"]]
    problems += [f"{k} is ??? (mandatory)" for k in OmegaConf.missing_keys(cfg)]
    return problems


@dataclass(frozen=True)
class Launch:
    """One `megatron_gpt_pretraining.py` invocation found in a rendered script."""

    config_name: str
    overrides: tuple[str, ...]
    prefix: tuple[str, ...]
    """The words before the script (torchrun, neuron_parallel_compile, ...)."""


def launches(script: str) -> list[Launch]:
    """Every pretraining invocation in a launcher script, however deep in `bash -c '...'`."""
    found: list[Launch] = []
    for line in script.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        found.extend(_launches_in(words))
    return found


def _launches_in(words: list[str]) -> list[Launch]:
    if any(w.endswith(SCRIPT) for w in words):
        i = next(i for i, w in enumerate(words) if w.endswith(SCRIPT))
        rest: list[str] = []
        for w in words[i + 1 :]:
            if w in ("&&", "||", "|", ";", "2>&1"):
                break
            rest.append(w)
        name = next(w.split("=", 1)[1] for w in rest if w.startswith("--config-name="))
        return [Launch(name, tuple(w for w in rest if not w.startswith("--")), tuple(words[:i]))]
    out: list[Launch] = []
    for w in words:
        if SCRIPT in w and w != SCRIPT:
            for line in w.splitlines():
                try:
                    out.extend(_launches_in(shlex.split(line)))
                except ValueError:
                    continue
    return out
