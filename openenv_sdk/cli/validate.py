"""`openenv validate PATH | --url URL | --image IMAGE`: check an environment against the contract.

Exit codes: 0 every required check passed, 1 a check failed, 2 bad usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ..checks import (
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_STARTUP_TIMEOUT_S,
    CheckResult,
    ValidationReport,
    validate_image,
    validate_path,
    validate_url,
)
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, debug_enabled, fail, print_json

__all__ = ["validate"]


_MARKS = {
    "pass": "[green]✓[/]",
    "fail": "[bold red]✗[/]",
    "warn": "[yellow]![/]",
    "skip": "[dim]-[/]",
    "unsupported": "[cyan]○[/]",
}
_USAGE = ("Examples: openenv validate environments/echo | openenv validate --url http://127.0.0.1:8000 | "
          "openenv validate --image openenv-echo:latest")


def validate(
    path: Annotated[Path | None, typer.Argument(help="Environment folder (holds openenv.yaml).", show_default=False)] = None,
    url: Annotated[str | None, typer.Option("--url", help="Check a running server at this base URL.")] = None,
    image: Annotated[str | None, typer.Option("--image", help="Start this image in the container engine and check it.")] = None,
    static_only: Annotated[bool, typer.Option("--static-only", help="PATH only: skip serving it (no runtime checks).")] = False,
    startup_timeout_s: Annotated[
        float, typer.Option(min=0.1, help="Longest wait for the server's /health, in seconds.")
    ] = DEFAULT_STARTUP_TIMEOUT_S,
    timeout_s: Annotated[
        float, typer.Option(min=0.1, help="Longest wait for any one request, in seconds.")
    ] = DEFAULT_REQUEST_TIMEOUT_S,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Check an environment folder, a running server or an image against the OpenEnv contract.

    A folder gets static checks (manifest, layout, class, tools, grader), then is served on a
    free local port for the protocol checks (health, metadata, schema, reset/step/state over
    /ws, typed errors, close, MCP). Extensions of openenv-sdk that an OpenEnv server lacks are
    listed as "unsupported", never as failures. Exit code: 0 pass, 1 fail, 2 bad usage.

    Examples:
        openenv validate environments/echo
        openenv validate environments/echo --static-only --json
        openenv validate --url http://127.0.0.1:8000
        openenv validate --image openenv-echo:latest
    """
    fmt = resolve_format(output_format, json_flag)
    targets = [t for t in (path, url, image) if t is not None]
    if len(targets) != 1:
        fail("give exactly one of PATH, --url or --image" + (f" (got {len(targets)})" if targets else ""),
             hint=_USAGE, code=2)
    if static_only and path is None:
        fail("--static-only applies to PATH only", hint=_USAGE, code=2)
    if url is not None and not url.strip().startswith(("http://", "https://")):
        fail(f"--url must be an http(s) URL, got {url!r}", hint="e.g. openenv validate --url http://127.0.0.1:8000",
             code=2)

    with console.status("validating", spinner="dots") if fmt is OutputFormat.human else _nothing():
        try:
            if path is not None:
                report = validate_path(path, runtime=not static_only, startup_timeout_s=startup_timeout_s,
                                       timeout_s=timeout_s)
            elif url is not None:
                report = validate_url(url, timeout_s=timeout_s)
            else:
                assert image is not None
                report = validate_image(image, startup_timeout_s=startup_timeout_s, timeout_s=timeout_s)
        except Exception as e:  # an internal error: one line, the traceback with OPENENV_DEBUG=1
            if debug_enabled():
                raise
            fail(f"validation could not run: {type(e).__name__}: {e}", hint="Run again with OPENENV_DEBUG=1 for the traceback")
            return

    if fmt is OutputFormat.json:
        print_json(report.model_dump(mode="json"))
    elif fmt is OutputFormat.human:
        render_report(report)
    raise typer.Exit(0 if report.passed else 1)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


def render_report(report: ValidationReport) -> None:
    """Print a report as a table: a mark per check, and the fix under each failure."""
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    for check in report.checks:
        table.add_row(_MARKS[check.status], check.name, _describe(check))
    console.print(f"[bold]openenv validate[/] {escape(report.target)}")
    console.print(table)
    counts = report.summary
    parts = [f"{counts['pass']} passed"]
    for status, word in (("fail", "failed"), ("warn", "warning(s)"), ("unsupported", "extension(s) not offered"),
                         ("skip", "skipped")):
        if counts[status]:
            parts.append(f"{counts[status]} {word}")
    verdict = "[bold green]PASS[/]" if report.passed else "[bold red]FAIL[/]"
    console.print(f"{verdict}  {', '.join(parts)}")


def _describe(check: CheckResult) -> str:
    text = escape(check.message)
    if check.status == "unsupported":
        text += " [dim](extension: not required)[/]"
    if check.fix and check.status in ("fail", "warn", "unsupported"):
        text += f"\n[dim]fix: {escape(check.fix)}[/]"
    return text
