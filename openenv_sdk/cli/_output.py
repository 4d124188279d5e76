"""The CLI's one output sink: rich for people, JSON for machines, tracebacks behind OPENENV_DEBUG=1.

Text that comes from outside the CLI's own format strings (error messages, paths, log lines,
install hints such as `pip install 'openenv-sdk[docker]'`) goes through `escape` (or `say`/`fail`,
which escape it): rich reads `[docker]` as a markup tag and would drop it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)
# Not a terminal (a CI log, a pipe, a file): lines are kept whole, never wrapped at rich's
# default 80 columns, so that a path or a log line can be searched for as it was printed.
for _sink in (console, err_console):
    _sink.soft_wrap = not _sink.is_terminal

__all__ = ["console", "debug_enabled", "err_console", "escape", "fail", "print_json", "say"]


def debug_enabled() -> bool:
    return os.environ.get("OPENENV_DEBUG", "") not in ("", "0")


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def say(text: str, *, style: str | None = None, err: bool = False) -> None:
    """Print `text` as it is (no markup read from it), in `style` when given."""
    (err_console if err else console).print(escape(text), style=style)


def fail(message: str, *, hint: str | None = None, code: int = 1) -> None:
    """Print one line (and the next thing to try), then exit with `code`.

    `message` and `hint` are printed verbatim: square brackets in them are kept.
    """
    import typer

    err_console.print(f"[bold red]Error:[/] {escape(message)}")
    if hint:
        err_console.print(escape(hint), style="dim")
    raise typer.Exit(code)
