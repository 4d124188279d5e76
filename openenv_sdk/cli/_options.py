"""Options shared by the CLI's commands."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

__all__ = ["FormatOpt", "JsonOpt", "OutputFormat", "resolve_format"]


class OutputFormat(str, Enum):
    """How a command reports: `human` (rich text), `json` (one JSON document on stdout), `quiet`."""

    human = "human"
    json = "json"
    quiet = "quiet"


# Shared options (every command that reports results takes them).
FormatOpt = Annotated[OutputFormat, typer.Option("--format", help="Output: human, json or quiet.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]


def resolve_format(output_format: OutputFormat, json_flag: bool) -> OutputFormat:
    return OutputFormat.json if json_flag else output_format
