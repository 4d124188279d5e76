"""`openenv regrade RUN_DIR [--grader X]`: rescore a run's kept episodes with no model call.

The work is `openenv_sdk.regrade.aregrade`'s; this module is the command's options and output.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import OpenEnvError
from ..regrade._regrade import RegradeResult
from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, debug_enabled, escape, fail, print_json
from ._rollouts import EnvTokenOpt

__all__ = ["regrade"]


def regrade(
    run_dir: Annotated[Path, typer.Argument(help="An `openenv eval`/`collect` output folder run with --keep-state.", show_default=False)],
    grader: Annotated[
        str | None, typer.Option("--grader", help="Regrade with this grader (a folder or module:attribute); default the run's.")
    ] = None,
    env: Annotated[
        str | None, typer.Option("--env", help="Serve this environment for the restored sessions; default the run's.")
    ] = None,
    env_token: EnvTokenOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Episodes regraded at once.")] = 8,
    episode_timeout_s: Annotated[
        float, typer.Option("--episode-timeout-s", min=0.001, help="The most one episode's regrading may take, in seconds.")
    ] = 300.0,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the JSON result here (default RUN_DIR/regrade.json).")
    ] = None,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Regrade a run's kept episodes: each workspace restored in a fresh sandbox, no model call.

    Needs a run made with --keep-state (RUN_DIR/state/). Each episode's grader runs exactly as
    at its end: over the kept state, its checks on the kept workspace restored into a fresh
    session of the environment. Same grader: the same scores; another (--grader): a per-task
    table of what changed, and every episode's old and new reward in RUN_DIR/regrade.json.
    Exit code: 0 every kept episode regraded, 1 an episode could not be regraded or was not
    kept, 2 bad usage.

    Examples:
        openenv regrade evals/terminal/gpt-4.1-mini-20260101-120000
        openenv regrade evals/coding/run1 --grader my_graders:StricterCodingGrader --json
    """
    from ..regrade import aregrade

    fmt = resolve_format(output_format, json_flag)
    try:
        result = asyncio.run(
            aregrade(run_dir, grader=grader, env=env, env_token=env_token, concurrency=concurrency, episode_timeout_s=episode_timeout_s)
        )
    except OpenEnvError as e:
        if debug_enabled():
            raise
        fail(str(e), code=1)
        raise
    path = output or run_dir / "regrade.json"
    path.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if fmt is OutputFormat.json:
        print_json(result.model_dump(mode="json") | {"file": str(path)})
    elif fmt is OutputFormat.human:
        _render(result, path)
    raise typer.Exit(0 if result.failed == 0 and result.not_kept == 0 else 1)


def _render(result: RegradeResult, path: Path) -> None:
    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    console.print(
        f"[bold]regraded[/] {result.regraded} episode(s) with {escape(result.grader)} in {result.duration_s:.2f} s"
        f" ({result.sessions} restored session(s)); "
        + (f"[bold yellow]{result.changed} changed[/]" if result.changed else "no score changed")
        + (f", [bold red]{result.failed} failed[/]" if result.failed else "")
        + (f", {result.not_kept} not kept" if result.not_kept else "")
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("task", "episodes", "regraded", "changed", "mean then", "mean now", "delta"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for t in sorted(result.tasks, key=lambda t: (-t.changed, t.task_id)):
        delta = t.delta
        shown = "-" if delta is None else (f"[green]{delta:+.3f}[/]" if delta > 0 else f"[red]{delta:+.3f}[/]" if delta < 0 else "0")
        table.add_row(escape(t.task_id), str(t.episodes), str(t.regraded), str(t.changed), num(t.original_mean),
                      num(t.regraded_mean), shown)  # fmt: skip
    console.print(table)
    for row in [r for r in result.episodes if r.error is not None][:10]:
        console.print(f"  [red]{escape(row.key)}[/] {row.status}: {escape(row.error or '')}")
    phases = {k: v for k, v in result.phases_s().items() if k not in ("grade", "open")}
    if phases:  # where the time went: the check, which any grading pays, is most of it
        spent = ", ".join(f"{escape(name)} {seconds:.2f} s" for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]))
        console.print(f"[dim]server start {result.server_start_s:.2f} s; summed over the episodes: {spent}[/]")
    console.print(f"[dim]every episode's old and new reward: {escape(str(path))}[/]")
