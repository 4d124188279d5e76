"""The `openenv` command: wiring only; each command lives in its own module."""

from __future__ import annotations

import typer

from .build import build
from .init import init
from .push import push
from .serve import serve
from .validate import validate

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
app.command(name="validate")(validate)
app.command(name="init")(init)
app.command(name="build")(build)
app.command(name="push")(push)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
