"""A whole run, as `openenv eval` and `openenv collect` do it: plan, resume, play, summarise, write.

    output/episodes.jsonl   every episode as it ends (an interrupted run keeps what it finished)
    output/summary.json     the `RunSummary`
    output/report.md        the markdown report

Running again over the same output skips the episodes it already holds (those without an
error), and the summary counts them with the new ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..episode_config import EpisodeConfig
from ..errors import OpenEnvError
from ._episode import openai_tools
from ._metrics import RunSummary, default_ks, summarize
from ._policy import Policy
from ._records import EpisodeLog, EpisodeRecord, PlannedEpisode
from ._report import markdown_report
from ._runner import RunConfig, _now, run_episodes
from ._target import EnvTarget, plan_episodes

__all__ = ["EPISODES_FILE", "REPORT_FILE", "SUMMARY_FILE", "OutputMismatch", "RunResult", "arun"]

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"


class OutputMismatch(OpenEnvError, ValueError):
    """The output folder holds episodes of another model or environment."""


@dataclass
class RunResult:
    summary: RunSummary
    records: list[EpisodeRecord]
    """One per planned episode (a resumed one is the earlier run's record)."""
    output: Path
    resumed: int


async def arun(
    target: EnvTarget,
    policy: Policy,
    *,
    output: str | Path,
    command: str = "eval",
    model: str | None = None,
    split: str | None = None,
    default_split: str = "test",
    task_ids: Sequence[str] = (),
    num_tasks: int | None = None,
    rollouts: int = 1,
    ks: Sequence[int] | None = None,
    episode: EpisodeConfig | None = None,
    run: RunConfig | None = None,
    resume: bool = True,
    config: dict[str, Any] | None = None,
    on_plan: Callable[[int, int, int], None] | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> RunResult:
    """Run the episodes and write the output folder. The caller stops `target` afterwards.

    Args:
        target: where episodes run, and its grader.
        policy: what answers the assistant turns.
        output: the output folder (made if missing).
        command: `eval` or `collect` (named in the summary and report).
        model: the model named in records; default the policy's name.
        split: the Task API split to take tasks from (see `plan_episodes`).
        default_split: the split taken when `split` is None and the server has it.
        task_ids: these tasks instead of a split's.
        num_tasks: the split's first N tasks; None takes them all.
        rollouts: episodes per task.
        ks: the k of pass@k; default 1, powers of two, and `rollouts`.
        episode: how each episode is played.
        run: concurrency and timeouts.
        resume: skip the episodes the output already holds; False starts the file afresh.
        config: recorded in the summary as it is (the command's options).
        on_plan: called with (episodes to play, episodes resumed, damaged lines of the output
            skipped: their episodes are played again) before playing.
        on_record: called with each record as its episode ends.

    Raises:
        OutputMismatch: the output holds episodes of another model or environment.
        openenv_sdk.errors.OpenEnvError: the server could not start, or the Task API refused
            the split or a task id.
    """
    episode = episode or EpisodeConfig()
    run = run or RunConfig()
    model = model or policy.name
    out = Path(output)
    started_at, t0 = _now(), time.monotonic()
    await target.start()
    log = EpisodeLog(out / EPISODES_FILE)
    if not resume and log.path.exists():
        log.path.unlink()
    earlier = log.load()
    for record in earlier.values():
        if record.model != model or record.env != target.name:
            raise OutputMismatch(
                f"{out} holds episodes of model {record.model!r} on {record.env!r}, not {model!r} on "
                f"{target.name!r}: use another output folder, or --overwrite"
            )
    probe = target.client()
    try:
        used_split, planned = await plan_episodes(
            probe, split=split, task_ids=list(task_ids), num_tasks=num_tasks, rollouts=rollouts,
            default_split=default_split,
        )  # fmt: skip
        tools = openai_tools((await probe.schema()).tools)
    finally:
        await probe.aclose()

    done = {k for k, r in earlier.items() if r.error is None}
    todo: list[PlannedEpisode] = [p for p in planned if p.key not in done]
    resumed = len(planned) - len(todo)
    if on_plan is not None:
        on_plan(len(todo), resumed, log.unreadable_lines)

    def record_one(record: EpisodeRecord) -> None:
        log.append(record)
        if on_record is not None:
            on_record(record)

    fresh = await run_episodes(target, policy, todo, tools=tools, episode=episode, run=run, model=model,
                               on_record=record_one)  # fmt: skip
    by_key = {**earlier, **{r.key: r for r in fresh}}
    records = [by_key[p.key] for p in planned]
    summary = summarize(
        records,
        ks=list(ks) if ks else default_ks(rollouts),
        pass_threshold=episode.pass_threshold,
        command=command,
        env=target.name,
        policy=policy.name,
        model=model,
        split=used_split,
        tasks=len({p.task_id for p in planned}),
        rollouts_per_task=rollouts,
        resumed=resumed,
        skipped_lines=log.unreadable_lines,
        duration_s=time.monotonic() - t0,
        started_at=started_at,
        finished_at=_now(),
        config=dict(config or {}),
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / REPORT_FILE).write_text(markdown_report(summary, records), encoding="utf-8")
    return RunResult(summary=summary, records=records, output=out, resumed=resumed)
