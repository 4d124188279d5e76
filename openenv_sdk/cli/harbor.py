"""`openenv harbor import TASK_DIR... --into TASKS_DIR`: Harbor task folders into the terminal environment.

The conversion is `openenv_sdk.harbor.import_harbor_task`; this module only reads the options,
imports each folder and reports (a task that cannot be mapped is one error with every reason).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ._options import FormatOpt, JsonOpt, OutputFormat, resolve_format
from ._output import console, err_console, fail, print_json

__all__ = ["harbor"]

harbor = typer.Typer(
    name="harbor",
    help="Harbor (Terminal-Bench 2) tasks: import them into the terminal environment.",
    no_args_is_help=True,
    add_completion=False,
)


@harbor.callback()
def _group() -> None:
    """Harbor (Terminal-Bench 2) tasks: import them into the terminal environment."""
    # a callback keeps `harbor` a group (Typer turns a one-command group into that command)


@harbor.command(name="import")
def import_tasks(
    task_dirs: Annotated[
        list[Path], typer.Argument(help="Harbor task folders (task.toml, instruction.md, environment/, tests/, solution/).")
    ],
    into: Annotated[
        Path, typer.Option("--into", help="The environment's tasks/ folder; checks go to hidden/ beside it.")
    ] = Path("environments/terminal/tasks"),
    prefix: Annotated[str, typer.Option("--prefix", help="Put before each task id (the folder's name).")] = "",
    category: Annotated[
        str | None, typer.Option("--category", help="The terminal category for every task; default from task.toml.")
    ] = None,
    ignore_package: Annotated[
        list[str] | None,
        typer.Option("--ignore-package", help="A package the Dockerfile installs that the task does not need (repeat)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace tasks of the same id.")] = False,
    own_image: Annotated[
        bool,
        typer.Option(
            "--own-image",
            help="Keep each task's Dockerfile (and docker-compose file) as its own image, built on the "
            "environment's server image (openenv harbor build), instead of mapping it onto the shared system.",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Then serve the environment and play each task: solution 1.0, nothing 0.0."),
    ] = False,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Import Harbor task folders into the terminal environment's task format.

    Each task becomes tasks/<id>/ (prompt, workdir, starting files, setup.sh from the
    Dockerfile's RUN lines) and hidden/<id>/ (a check that runs its tests/test.sh host-side in
    a fresh sandbox, and its solution). A task whose environment cannot be a sandbox workspace
    (docker-compose, a prebuilt image, packages the environment lacks, files outside WORKDIR)
    is refused with every reason; nothing of it is written. With --verify, each imported task
    is then played through the environment's server and graded: its reference solution must
    score 1.0 and doing nothing 0.0. Exit code 1 if any was refused or failed to verify.

    With --own-image, a task keeps its Dockerfile and compose file (tasks/<id>/environment/):
    `openenv harbor build` builds its image, in which the environment's server plays it.

    Examples:
        openenv harbor import examples/harbor/* --into environments/terminal/tasks --ignore-package curl --verify
        openenv harbor import ~/terminal-bench-2/tasks/hello-world --prefix tb2_ --json
        openenv harbor import ~/terminal-bench-2/tasks/some-task --own-image --verify
    """
    from openenv_sdk.harbor import HarborImportError, import_harbor_task, verify_imported

    fmt = resolve_format(output_format, json_flag)
    reports, refused = [], []
    for task_dir in task_dirs:
        try:
            report = import_harbor_task(
                task_dir, tasks_dir=into, prefix=prefix, category=category,
                ignore_packages=ignore_package or [], overwrite=force, own_image=own_image,
            )  # fmt: skip
        except HarborImportError as e:
            refused.append({"source": str(task_dir), "problems": e.problems})
            if fmt is OutputFormat.human:
                err_console.print(f"[bold red]✗[/] {escape(str(task_dir))}")
                for problem in e.problems:
                    err_console.print(f"    {escape(problem)}")
            continue
        except FileNotFoundError as e:
            fail(str(e), hint="Example: openenv harbor import path/to/task --into environments/terminal/tasks", code=2)
            return
        reports.append(report)
        if fmt is OutputFormat.human:
            console.print(f"[green]✓[/] {escape(str(task_dir))} -> {escape(report.task_folder)} (workdir {report.workdir})")
            for note in report.notes:
                console.print(f"    [dim]{escape(note)}[/]")
    verified = []
    if verify and reports:
        verified = verify_imported(into.parent, [r.task_id for r in reports])
        if fmt is OutputFormat.human:
            for v in verified:
                mark = "[green]✓[/]" if v.ok else "[bold red]✗[/]"
                console.print(f"{mark} {v.task_id}: solution {v.solution:g}, nothing {v.null:g}")
                if not v.ok:
                    console.print(f"    [dim]{escape(v.evidence.strip())}[/]")
    if fmt is OutputFormat.json:
        print_json({
            "imported": [r.model_dump() for r in reports], "refused": refused,
            "verified": [{**v.model_dump(), "ok": v.ok} for v in verified],
        })  # fmt: skip
    if refused or any(not v.ok for v in verified):
        raise typer.Exit(1)


@harbor.command(name="build")
def build_task(
    env_dir: Annotated[Path, typer.Argument(help="The environment folder (openenv.yaml, tasks/, hidden/).")],
    task_id: Annotated[str, typer.Argument(help="A task imported with --own-image.")],
    tag: Annotated[str | None, typer.Option("--tag", help="The task image's tag; default <server image>-<task id>.")] = None,
    base_image: Annotated[
        str | None, typer.Option("--base-image", help="The server image's base (else $OPENENV_BASE_IMAGE).")
    ] = None,
    output_format: FormatOpt = OutputFormat.human,
    json_flag: JsonOpt = False,
) -> None:
    """Build the image of a task imported with --own-image: the environment's server image, then the
    task's Dockerfile on it (its FROM replaced, nothing pulled). Serve it with
    `GenericEnvClient(image=TAG)` and reset to the task; its checks stay on the host (hidden/).

    Examples:
        openenv harbor build environments/terminal stock_report
        openenv harbor build environments/terminal stock_report --tag my-task:1 --json
    """
    from openenv_sdk.errors import ContainerError
    from openenv_sdk.harbor import HarborImportError, build_task_image

    fmt = resolve_format(output_format, json_flag)
    try:
        image = build_task_image(env_dir, task_id, tag=tag, base_image=base_image)
    except HarborImportError as e:
        fail(str(e), hint="Import the task with: openenv harbor import TASK_DIR --own-image", code=1)
        return
    except ContainerError as e:
        fail(str(e), code=1)
        return
    if fmt is OutputFormat.json:
        print_json({"task_id": task_id, "image": image})
    else:
        console.print(f"[green]✓[/] {escape(task_id)}: {escape(image)}")
