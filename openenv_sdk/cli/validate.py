"""`openenv validate PATH | --url URL | --image IMAGE [--deep]`: check an environment against the contract.

`--deep` also plays it and prints a scorecard (`openenv_sdk.checks._deep`): the oracle and a
do-nothing policy on sampled tasks, determinism, 32 sessions at once, latency and memory, and
the forgery battery. Exit codes: 0 every required check passed, 1 a check failed, 2 bad usage.
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
from ..checks._deep import DEFAULT_DEEP_TASKS, DeepOptions, DeepReport, Scorecard, run_deep_checks
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
          "openenv validate --image openenv-echo:latest | openenv validate environments/wordle --deep")


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
    deep: Annotated[bool, typer.Option("--deep", help="Also play it and print a scorecard: oracle, do-nothing, "
                                       "determinism, concurrency, latency, memory, forgery attacks.")] = False,
    tasks: Annotated[int, typer.Option("--tasks", min=0, help="--deep: tasks sampled evenly across the split "
                                       "(0: every task).")] = DEFAULT_DEEP_TASKS,
    sessions: Annotated[int, typer.Option("--sessions", min=1, help="--deep: sessions at once in the load check "
                                          "(at most the manifest's server.max_sessions).")] = 32,
    learn: Annotated[bool, typer.Option("--learn", help="--deep: also run a few GRPO steps of a tiny model on CPU "
                                        "(needs the trainers package): does the reward move?")] = False,
    learn_steps: Annotated[int, typer.Option("--learn-steps", min=1, help="--learn: GRPO steps.")] = 3,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Check an environment folder, a running server or an image against the OpenEnv contract.

    A folder gets static checks (manifest, layout, class, tools, grader), then is served on a
    free local port for the protocol checks (health, metadata, schema, reset/step/state over
    /ws, typed errors, close, MCP). Extensions of openenv-sdk that an OpenEnv server lacks are
    listed as "unsupported", never as failures. Exit code: 0 pass, 1 fail, 2 bad usage.

    With --deep it then plays the environment (a folder served locally, or with --image the
    image, PATH naming the folder whose grader and oracle run here): the manifest's `oracle`
    scores the top reward and a do-nothing policy 0.0 on sampled tasks, grading repeats exactly,
    32 sessions at once play without a tool error (p50/p95 latency, memory per session), and
    every applicable forgery attack scores 0.

    Examples:
        openenv validate environments/echo
        openenv validate environments/echo --static-only --json
        openenv validate --url http://127.0.0.1:8000
        openenv validate --image openenv-echo:latest
        openenv validate environments/wordle --deep --tasks 5
        openenv validate environments/wordle --image openenv-wordle:latest --deep
    """
    fmt = resolve_format(output_format, json_flag)
    if (learn or tasks != DEFAULT_DEEP_TASKS or sessions != 32 or learn_steps != 3) and not deep:
        fail("--tasks, --sessions, --learn and --learn-steps apply to --deep only", hint=_USAGE, code=2)
    if deep and url is not None:
        fail("--deep plays a folder or an image, not a URL (the grader and oracle come from the folder)", hint=_USAGE, code=2)
    if deep and static_only:
        fail("--deep plays the environment: drop --static-only", hint=_USAGE, code=2)
    deep_folder = path if deep and image is not None else None  # PATH beside --image: the grader's folder
    targets = [t for t in (path if deep_folder is None else None, url, image) if t is not None]
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
            if path is not None and deep_folder is None:
                report = validate_path(path, runtime=not static_only, startup_timeout_s=startup_timeout_s,
                                       timeout_s=timeout_s)
            elif url is not None:
                report = validate_url(url, timeout_s=timeout_s)
            else:
                assert image is not None
                report = validate_image(image, startup_timeout_s=startup_timeout_s, timeout_s=timeout_s)
            if deep:
                report = _deepen(report, path, image, DeepOptions(
                    tasks=tasks or None, sessions=sessions, learn=learn, learn_steps=learn_steps,
                    startup_timeout_s=max(startup_timeout_s, 60.0)))  # fmt: skip
        except Exception as e:  # an internal error: one line, the traceback with OPENENV_DEBUG=1
            if debug_enabled():
                raise
            fail(f"validation could not run: {type(e).__name__}: {e}", hint="Run again with OPENENV_DEBUG=1 for the traceback")
            return

    if fmt is OutputFormat.json:
        print_json(report.model_dump(mode="json"))
    elif fmt is OutputFormat.human:
        render_report(report)
        if isinstance(report, DeepReport) and report.scorecard is not None:
            render_scorecard(report.scorecard)
    raise typer.Exit(0 if report.passed else 1)


def _deepen(report: ValidationReport, folder: Path | None, image: str | None, options: DeepOptions) -> DeepReport:
    """The report with the deep checks added (skipped when the protocol checks already failed)."""
    deep = DeepReport(target=report.target, kind=report.kind, checks=list(report.checks))
    if not report.passed:
        deep.checks.append(CheckResult(name="deep", passed=False, skipped=True,
                                       message="skipped: fix the failures above first (the deep checks play the environment)"))
        return deep
    checks, deep.scorecard = run_deep_checks(folder, image=image, options=options)
    deep.checks += checks
    return deep


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


def render_scorecard(card: Scorecard) -> None:
    """Print the deep checks' figures: rewards per policy, load, latency, memory, attacks."""
    table = Table(show_header=False, box=None, pad_edge=False, expand=False)
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("")

    def rewards(values: dict[str, float | None]) -> str:
        return escape("  ".join(f"{task}: {'error' if v is None else f'{v:g}'}" for task, v in values.items()) or "-")

    table.add_row("tasks", escape(f"{len(card.tasks)} sampled ({', '.join(card.tasks[:8])}{' ...' if len(card.tasks) > 8 else ''})"))
    table.add_row("oracle", f"{rewards(card.oracle)}  [dim](top reward {card.top_reward:g})[/]")
    table.add_row("do-nothing", f"{rewards(card.do_nothing)}  [dim](floor {card.floor:g})[/]")
    for policy, values in card.repeats.items():
        table.add_row("repeats", f"{policy}: {', '.join('error' if v is None else f'{v:g}' for v in values)}")
    if card.load is not None:
        load = card.load
        table.add_row("load", f"{load.sessions} sessions at once: {load.episodes} episodes, {load.tool_calls} tool calls, "
                              f"{load.tool_errors} tool errors, {load.failed_episodes} failed episodes ({load.duration_s:g} s)")
        table.add_row("latency", "   ".join(f"{what} p50 {v['p50']:g} ms, p95 {v['p95']:g} ms"
                                            for what, v in load.latency_ms.items()))
        if load.memory_per_session_mib is not None:
            table.add_row("memory", f"{load.memory_per_session_mib:g} MiB per session ({load.memory_idle_mib:g} MiB idle, "
                                    f"{load.memory_peak_mib:g} MiB peak)")
    if card.attacks:
        parts = []
        for attack in card.attacks:
            outcome = "error" if attack.error or attack.reward is None else f"{attack.reward:g}"
            leaked = f" [bold red](read {escape(', '.join(attack.leaked[:3]))})[/]" if attack.leaked else ""
            parts.append(f"{escape(attack.name)} {outcome}{leaked}")
        table.add_row("attacks", "  ".join(parts))
    if card.learn is not None:
        table.add_row("learn", escape(", ".join(f"{k}: {v}" for k, v in card.learn.items() if k != "records")))
    console.print(f"[bold]scorecard[/] {escape(card.env)}  [dim]({card.duration_s:g} s)[/]")
    console.print(table)
