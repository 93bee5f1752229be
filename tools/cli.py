"""The command line every tool shares: `--stack NAME | --config-file PATH`, and exit 2 for bad input."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from config import ConfigError, StackConfig, parse_stack_values
from config.stackfile import UsageError, read_stack_file

ROOT = Path(__file__).resolve().parent.parent
"""The project directory, where the stack files are."""


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """`--stack NAME | --config-file PATH`, the same for every command of the project."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads Pulumi.NAME.yaml")
    source.add_argument("--config-file", type=Path, help="any file in the stack-file format")


def stack_file(args: argparse.Namespace) -> Path:
    return Path(args.config_file) if args.config_file else ROOT / f"Pulumi.{args.stack}.yaml"


def stack_name(args: argparse.Namespace) -> str:
    """`--stack`, or the stack part of the config file's name."""
    return args.stack or stack_file(args).name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")


def bad_input(e: Exception, stderr: Any) -> int:
    """Report an unusable stack file or invalid config, one line per problem; exit code 2."""
    lines = e.problems if isinstance(e, ConfigError) else [f"error: {e}"]
    for line in lines:
        print(line, file=stderr)
    return 2


def load_stack_config(args: argparse.Namespace, stderr: Any) -> StackConfig | None:
    """The validated config of the stack the arguments name, or None after reporting why not."""
    try:
        return parse_stack_values(read_stack_file(stack_file(args)))
    except (UsageError, ConfigError) as e:
        bad_input(e, stderr)
        return None
