"""The `openenv` command: wiring only; each command lives in its own module.

`openenv serve` is what every environment container runs, so `main()` builds it alone when
it is the command asked for: the other commands' imports (the checks, httpx, rich tables,
yaml) would add 0.05 to 0.1 s to every container's cold start. `app`, with every command, is
built on first use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

__all__ = ["app", "main"]

app: typer.Typer
"""The `openenv` Typer app with every command (built on first use)."""

# Every command, in `openenv --help` order: the function of that name in `openenv_sdk.cli.<name>`.
_COMMANDS = ("serve", "validate", "init", "build", "push", "deploy", "eval", "collect", "regrade", "containers", "harbor")


def _build_app(commands: Sequence[str]) -> typer.Typer:
    app = typer.Typer(
        name="openenv",
        help="Build, validate and serve RL environments for language-model agents.",
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    for name in commands:
        module = importlib.import_module(f"{__package__}.{name}")
        command = getattr(module, name)
        if isinstance(command, typer.Typer):  # a group of subcommands (`openenv harbor import`)
            app.add_typer(command, name=name)
        else:
            app.command(name=name)(command)
    return app


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"openenv-sdk {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Build, validate and serve RL environments for language-model agents."""


_app: typer.Typer | None = None


def _full_app() -> typer.Typer:
    global _app
    if _app is None:
        _app = _build_app(_COMMANDS)
    return _app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    app = _build_app(["serve"]) if sys.argv[1:2] == ["serve"] else _full_app()
    app()


if __name__ == "__main__":
    main()
