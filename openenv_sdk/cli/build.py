"""`openenv build PATH | --all`: build environment folders into container images (`openenv_sdk.build`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import ManifestError, OpenEnvError
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, debug_enabled, err_console, escape, fail, print_json, say

__all__ = ["build"]


class BuildLog(str, Enum):
    """How much of the engine's build log to show."""

    progress = "progress"
    full = "full"
    quiet = "quiet"


def build(
    path: Annotated[
        Path | None,
        typer.Argument(help="Environment folder; with --all, the catalog (or its folder). Default: `.` with --all.",
                       show_default=False),
    ] = None,
    build_all: Annotated[bool, typer.Option("--all", help="Build every environment of the catalog (openenv.yaml).")] = False,
    tag: Annotated[str | None, typer.Option(help="Image tag; default openenv-<name>:latest.")] = None,
    base_image: Annotated[
        str | None, typer.Option(help="Base image of a generated Dockerfile (else $OPENENV_BASE_IMAGE, the manifest's, python:3.11-slim).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    log: Annotated[BuildLog, typer.Option("--log", help="Build log: progress, full or quiet.")] = BuildLog.progress,
    docker_host: Annotated[str | None, typer.Option(help="Engine address, e.g. unix:///run/podman/podman.sock.")] = None,
    timeout_s: Annotated[float, typer.Option(min=1.0, help="Longest one build may take, in seconds.")] = 1800.0,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Build an environment folder (or, with --all, every environment of the catalog) into an image.

    A Dockerfile in the folder is used as it is; otherwise one is generated that installs the
    SDK and the environment's dependencies from wheels prepared on this host.

    Examples:
        openenv build environments/echo
        openenv build environments/echo --tag my-echo:dev --base-image python:3.11-slim
        openenv build --all
    """
    fmt = resolve_format(output_format, json_flag)
    if path is None and not build_all:
        fail("give an environment folder, or --all for the whole catalog",
             hint="Examples: openenv build environments/echo | openenv build --all", code=2)
    if build_all and tag is not None:
        fail("--tag names one image; with --all each image is tagged openenv-<name>:latest",
             hint="Build one folder to choose its tag: openenv build environments/echo --tag my-echo:dev", code=2)
    try:
        from .. import build as build_module
    except ImportError as e:  # the build module is missing from this install
        fail(f"image builds are not available in this install ({e})", hint="pip install 'openenv-sdk[docker]'")
        return

    targets = _catalog_targets(path or Path(".")) if build_all else [(None, path)]
    quiet = fmt is not OutputFormat.human or log is BuildLog.quiet
    if not build_all:  # a bad manifest is reported even where no engine runs
        _check_manifest(targets[0][1], fmt)
    engine = _connect(docker_host, fmt, None if build_all else targets[0][1])  # one for all builds, closed at the end
    built: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    try:
        for name, folder in targets:
            assert folder is not None
            try:
                image = build_module.build_image(
                    folder, tag=tag, base_image=base_image, engine=engine, output="quiet" if quiet else log.value,
                    no_cache=no_cache, timeout_s=timeout_s, console=err_console,
                )
            except OpenEnvError as e:
                if debug_enabled():
                    raise
                failed.append({"name": name, "path": str(folder), "error": str(e)})
                if not build_all:
                    _fail_build(e, folder, fmt)
                if fmt is OutputFormat.human:
                    err_console.print(f"[bold red]✗[/] {escape(str(folder))}: {escape(_first_line(e))}")
                continue
            built.append({"name": name, "path": str(folder), "tag": image})
            if fmt is OutputFormat.human:
                console.print(f"[green]✓[/] {escape(str(folder))} -> [bold]{escape(image)}[/]")
    finally:
        engine.close()
    if fmt is OutputFormat.json:
        print_json({"built": built, "failed": failed})
    if failed:
        if fmt is OutputFormat.human:
            err_console.print(f"[bold red]Error:[/] {len(failed)} of {len(targets)} build(s) failed")
            say(f"Build one to see its log: openenv build {failed[0]['path']} --log full", style="dim", err=True)
        raise typer.Exit(1)


def _catalog_targets(path: Path) -> list[tuple[str | None, Path]]:
    from ..manifest import MANIFEST_FILENAME, load_catalog

    file = path / MANIFEST_FILENAME if path.is_dir() else path
    try:
        catalog = load_catalog(file)
    except ManifestError as e:
        if debug_enabled():
            raise
        fail(f"cannot read the catalog: {_first_line(e)}",
             hint="The catalog is the repository's openenv.yaml with `environments: [{name, path}]`")
    return [(entry.name, file.parent / entry.path) for entry in catalog.environments]


def _check_manifest(folder: Path | None, fmt: OutputFormat) -> None:
    from ..manifest import load_manifest

    assert folder is not None
    try:
        load_manifest(folder)
    except ManifestError as e:
        if debug_enabled():
            raise
        _fail_build(e, folder, fmt)


def _connect(docker_host: str | None, fmt: OutputFormat, folder: Path | None) -> Any:
    from ..containers.engine import connect_engine

    try:
        return connect_engine(docker_host=docker_host)
    except OpenEnvError as e:
        if debug_enabled():
            raise
        if fmt is OutputFormat.json:
            print_json({"built": [], "failed": [{"name": None, "path": str(folder) if folder else None, "error": str(e)}]})
            raise typer.Exit(1) from None
        message, _, hint = str(e).partition(". ")
        fail(message, hint=hint or "Start a container engine (Docker Engine or Podman) and try again")


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _fail_build(error: OpenEnvError, folder: Path, fmt: OutputFormat) -> None:
    from ..containers.errors import BuildError, EngineUnavailableError

    lines = str(error).strip().splitlines()
    hints = [line.removeprefix("hint: ") for line in lines if line.startswith("hint: ")]
    if isinstance(error, EngineUnavailableError):
        message, _, hint = str(error).partition(". ")
        if fmt is not OutputFormat.json:
            fail(message, hint=hint or "Start a container engine (Docker Engine or Podman) and try again")
        hint = ""
    elif isinstance(error, ManifestError):
        hint = f"Check the folder with: openenv validate {folder} --static-only"
    elif isinstance(error, BuildError):
        if fmt is OutputFormat.human and error.log_tail:
            for line in error.log_tail[-8:]:
                err_console.print(f"[dim]  | {line}[/]", highlight=False, markup=False)
        hint = hints[0] if hints else f"See the whole log with: openenv build {folder} --log full"
    else:
        hint = hints[0] if hints else "Run again with OPENENV_DEBUG=1 for the traceback"
    if fmt is OutputFormat.json:
        print_json({"built": [], "failed": [{"name": None, "path": str(folder), "error": str(error)}]})
        raise typer.Exit(1)
    fail(_first_line(error), hint=hint)
