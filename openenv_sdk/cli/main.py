"""The `openenv` command: wiring only; each command lives in its own module."""

from __future__ import annotations

import typer

from .serve import serve

app = typer.Typer(
    name="openenv",
    help="Build, validate and serve RL environments for language-model agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Build, validate and serve RL environments for language-model agents."""


app.command(name="serve")(serve)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
