"""A run's small markdown report: what ran, the numbers, the per-task table, the errors and
failed tool calls by cause."""

from __future__ import annotations

from collections.abc import Iterable

from ._metrics import RunSummary
from ._records import EpisodeRecord

__all__ = ["markdown_report"]

_MAX_ERRORS = 20


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _causes(counts: dict[str, int]) -> str:
    return ", ".join(f"{cause} {n}" for cause, n in counts.items()) or "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_report(summary: RunSummary, records: Iterable[EpisodeRecord] = ()) -> str:
    """The report as markdown (GitHub tables), from the summary and, for the errors, the records."""
    ks = list(summary.pass_at_k)
    lines = [
        f"# openenv {summary.command}: {summary.env}",
        "",
        "| | |",
        "|---|---|",
        f"| policy | `{_cell(summary.policy)}` |",
        f"| environment | `{_cell(summary.env)}` |",
        f"| split | {summary.split or 'n/a'} |",
        f"| tasks × rollouts | {summary.tasks} × {summary.rollouts_per_task} = {summary.episodes} episodes |",
        f"| graded / failed episodes | {summary.graded} / {summary.errors} |",
        f"| failed episodes by cause | {_causes(summary.failures_by_cause)} |",
        f"| policy timeouts (graded) | {summary.policy_timeouts} |",
        f"| tool calls / failed tool calls | {summary.tool_calls} / {summary.tool_errors} |",
        f"| mean reward | {_num(summary.mean_reward)} (std {_num(summary.std_reward)}) |",
        *(f"| pass@{k} | {_num(v)} |" for k, v in summary.pass_at_k.items()),
        f"| passed means | reward ≥ {summary.pass_threshold:g} |",
        f"| mean turns / tool calls | {_num(summary.mean_turns, 1)} / {_num(summary.mean_tool_calls, 1)} |",
        f"| started / took | {summary.started_at} / {summary.duration_s:.1f} s |",
        "",
        "## Per task",
        "",
        "| task | split | graded | passed | errors | tool errors | mean reward | "
        + " | ".join(f"pass@{k}" for k in ks)
        + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(ks),
    ]
    for task in summary.per_task:
        lines.append(
            f"| {_cell(task.task_id)} | {task.split or ''} | {task.graded} | {task.passed} | {task.errors} | "
            f"{task.tool_errors} | "
            f"{_num(task.mean_reward)} | " + " | ".join(_num(task.pass_at_k[k]) for k in ks) + " |"
        )
    for title, causes in (("Failed episodes by cause", summary.errors_by_cause),
                          ("Failed tool calls by cause", summary.tool_errors_by_cause)):  # fmt: skip
        if causes:
            lines += ["", f"## {title}", "", "| count | cause |", "|---:|---|"]
            lines += [f"| {n} | {_cell(cause)} |" for cause, n in causes.items()]
    failed = [r for r in records if r.error is not None]
    if failed:
        lines += ["", "## Errors", ""]
        lines += [f"- `{_cell(r.key)}`: {_cell(r.error or '')}" for r in failed[:_MAX_ERRORS]]
        if len(failed) > _MAX_ERRORS:
            lines.append(f"- ... and {len(failed) - _MAX_ERRORS} more (see episodes.jsonl)")
    return "\n".join(lines) + "\n"
