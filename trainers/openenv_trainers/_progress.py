"""A progress bar for steps that take minutes on a first run (building the tiny model, an SFT
warm-up), so that a run is never silent: rich, on stderr, kept on screen when done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["step_progress"]


@contextmanager
def step_progress(description: str, total: int, *, console: Any = None) -> Iterator[Callable[[int, float], None]]:
    """Show `description` with a bar of `total` steps; yields the `on_step(step, loss)` callback
    that `sft_warmup` takes. On a terminal the bar redraws; elsewhere (a log, a notebook's
    captured output) rich prints it once when it ends."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(description), BarColumn(), TextColumn("{task.completed}/{task.total} loss {task.fields[loss]}"),
        TimeElapsedColumn(), console=console or Console(stderr=True), transient=False,
    ) as progress:  # fmt: skip
        task = progress.add_task(description, total=total, loss="-")

        def on_step(step: int, loss: float) -> None:
            progress.update(task, completed=step, loss=f"{loss:.3f}")

        yield on_step
