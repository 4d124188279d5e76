"""The CLI's one output sink: rich for people, JSON for machines, tracebacks behind OPENENV_DEBUG=1."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)

__all__ = ["console", "debug_enabled", "err_console", "fail", "print_json"]


def debug_enabled() -> bool:
    return os.environ.get("OPENENV_DEBUG", "") not in ("", "0")


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def fail(message: str, *, hint: str | None = None, code: int = 1) -> None:
    """Print one line (and the next thing to try), then exit with `code`."""
    import typer

    err_console.print(f"[bold red]Error:[/] {message}")
    if hint:
        err_console.print(f"[dim]{hint}[/]")
    raise typer.Exit(code)
