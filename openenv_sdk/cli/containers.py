"""`openenv containers list | clean`: the containers openenv started, found by their label.

A provider removes its container when it stops, when its `with` block ends and at interpreter
exit; a process killed outright (a Jupyter kernel killed or restarted, an OOM kill) leaves it
running. `list` shows every container carrying `org.openenv.managed=1`; `clean` removes the
orphaned ones (whose starting process is gone), or all of them with `--all`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..errors import OpenEnvError
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, debug_enabled, escape, fail, print_json, say

if TYPE_CHECKING:
    from ..containers.managed import ManagedContainer

__all__ = ["containers"]

containers = typer.Typer(
    name="containers",
    help="The containers openenv started (label org.openenv.managed=1): list them, remove the orphaned.",
    no_args_is_help=True,
    add_completion=False,
)

LabelOpt = Annotated[
    list[str] | None,
    typer.Option("--label", help="Only containers with this label too, KEY=VALUE (repeat).", show_default=False),
]
DockerHostOpt = Annotated[str | None, typer.Option(help="Engine address, e.g. unix:///run/podman/podman.sock.")]


@containers.callback()
def _group() -> None:
    """The containers openenv started (label org.openenv.managed=1): list them, remove the orphaned."""


def _labels(given: list[str] | None) -> dict[str, str]:
    labels = {}
    for item in given or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--label {item!r} is not KEY=VALUE", hint="Example: --label org.openenv.name=echo_env", code=2)
        labels[key] = value
    return labels


def _engine(docker_host: str | None) -> Any:
    try:
        from ..containers.engine import connect_engine
    except ImportError as e:
        fail(f"container support is not installed ({e})", hint="pip install 'openenv-sdk[docker]'")
    try:
        return connect_engine(docker_host=docker_host)
    except OpenEnvError as e:
        if debug_enabled():
            raise
        message, _, hint = str(e).partition(". ")
        fail(message, hint=hint or "Start a container engine (Docker Engine or Podman) and try again")


def _find(docker_host: str | None, label: list[str] | None) -> tuple[Any, list[ManagedContainer]]:
    from ..containers.managed import list_managed

    labels = _labels(label)
    engine = _engine(docker_host)
    return engine, list_managed(engine, labels=labels)


def _table(found: list[ManagedContainer]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("ID", "NAME", "ENVIRONMENT", "IMAGE", "STATUS", "OWNER PID", "ORPHANED"):
        table.add_column(column)
    for c in found:
        table.add_row(c.id, escape(c.name), escape(c.environment or "-"), escape(c.image), c.status,
                      str(c.owner_pid or "-"), "yes" if c.orphaned else "no")
    return table


@containers.command(name="list")
def list_containers(
    label: LabelOpt = None,
    docker_host: DockerHostOpt = None,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """List the containers openenv started, running or not, and whether each is orphaned
    (the process that started it no longer runs on this machine).

    Examples:
        openenv containers list
        openenv containers list --json
        openenv containers list --label org.openenv.name=echo_env
    """
    fmt = resolve_format(output_format, json_flag)
    engine, found = _find(docker_host, label)
    engine.close()
    if fmt is OutputFormat.json:
        print_json({"containers": [c.model_dump() for c in found]})
    elif fmt is OutputFormat.human:
        if not found:
            say("No containers started by openenv.")
            return
        console.print(_table(found))
        orphans = sum(c.orphaned for c in found)
        if orphans:
            say(f"{orphans} orphaned: remove them with `openenv containers clean`", style="dim")


@containers.command(name="clean")
def clean(
    remove_all: Annotated[
        bool, typer.Option("--all", help="Remove every container openenv started, also those whose process still runs.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    label: LabelOpt = None,
    docker_host: DockerHostOpt = None,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Remove the orphaned containers openenv started (their starting process is gone, e.g. a
    killed Jupyter kernel), or with --all every container it started.

    Examples:
        openenv containers clean
        openenv containers clean --dry-run
        openenv containers clean --all
    """
    from ..containers.managed import remove_managed

    fmt = resolve_format(output_format, json_flag)
    engine, found = _find(docker_host, label)
    chosen = [c for c in found if remove_all or c.orphaned]
    try:
        removed = [] if dry_run else remove_managed(engine, chosen)
    finally:
        engine.close()
    kept = [c for c in found if c not in chosen]
    if fmt is OutputFormat.json:
        print_json({"removed": removed, "would_remove": [c.id for c in chosen] if dry_run else [],
                    "kept": [c.id for c in kept]})
    elif fmt is OutputFormat.human:
        for c in chosen:
            say(f"{'would remove' if dry_run else 'removed'} {c.id} {c.name} ({c.image}, {c.status})")
        verb = "would be removed" if dry_run else "removed"
        say(f"{len(chosen)} container(s) {verb}, {len(kept)} kept (their process still runs; --all removes them too)"
            if kept else f"{len(chosen)} container(s) {verb}")
