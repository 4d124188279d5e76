"""Run many episodes at once, each in its own session, each bounded by a timeout.

`run_episodes` is what `openenv eval` and `openenv collect` share: at most `concurrency`
episodes run at a time; each gets its own session on the target's one server, and the whole
episode (reset, every policy turn and tool call, grading) must end within `episode_timeout_s`.
An episode that fails or runs out of time becomes a record with an `error`; the others go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..episode_config import EpisodeConfig
from ..failures import Failure, FailureCause, classify
from ..monitor import Monitor
from ._episode import play_episode
from ._policy import Policy
from ._records import EpisodeRecord, PlannedEpisode
from ._target import EnvTarget

__all__ = ["DEFAULT_EPISODE_TIMEOUT_S", "RunConfig", "run_episodes"]

DEFAULT_EPISODE_TIMEOUT_S = 900.0


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How many episodes run at once, and how long each may take."""

    concurrency: int = 8
    """The most episodes (sessions) at a time."""
    episode_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S
    """The most one episode may take, grading included, in seconds."""
    close_timeout_s: float = 10.0
    """The most closing one episode's session may take, in seconds."""
    keep: Any = None
    """A `openenv_sdk.regrade.StateKeeper`: each graded episode's final state and workspace are
    kept for `openenv regrade` (None: nothing kept)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.episode_timeout_s <= 0 or self.close_timeout_s <= 0:
            raise ValueError("episode_timeout_s and close_timeout_s must be > 0")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if text.startswith("[") or type(error).__name__ in text else f"{type(error).__name__}: {text}"


async def run_one(
    target: EnvTarget,
    policy: Policy,
    planned: PlannedEpisode,
    *,
    tools: list[dict[str, Any]],
    episode: EpisodeConfig,
    run: RunConfig,
    model: str,
) -> EpisodeRecord:
    """Play one episode in a new session; never raises (a failure is the record's `error`)."""
    record = EpisodeRecord.start(planned, env=target.name, policy=policy.name, model=model)
    started = time.monotonic()
    client = target.client()
    try:
        async with asyncio.timeout(run.episode_timeout_s):
            await play_episode(record, client, policy, planned, tools=tools, rubric=target.rubric, config=episode)
            if run.keep is not None:  # after grading: the workspace as the grader's copy saw it
                await run.keep.capture(key=record.key, task_id=record.task_id, reset_kwargs=record.reset_kwargs,
                                       client=client)  # fmt: skip
    except TimeoutError:
        record.error = f"the episode did not end within {run.episode_timeout_s:g} s (episode_timeout_s)"
        record.failure = Failure(cause=FailureCause.TIMEOUT, stage="episode", message=record.error, error_type="TimeoutError")
    except Exception as e:  # a bad episode is data, not a crash of the run
        record.error = _describe(e)
        record.failure = classify(e, stage="episode")
    finally:
        try:
            async with asyncio.timeout(run.close_timeout_s):
                await client.aclose()
        except Exception:
            pass
    if record.error is not None:
        record.reward, record.passed, record.stop_reason = None, None, "error"
    record.duration_s = time.monotonic() - started
    record.finished_at = _now()
    task = {"task_id": record.task_id, **record.reset_kwargs}  # the signals read the transcript only: cheap
    record.hacking = Monitor().check_messages(record.messages, reward=record.reward, env=record.env, task=task).signals
    return record


async def run_episodes(
    target: EnvTarget,
    policy: Policy,
    episodes: Sequence[PlannedEpisode],
    *,
    tools: list[dict[str, Any]],
    episode: EpisodeConfig,
    run: RunConfig,
    model: str,
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play `episodes` with at most `run.concurrency` at a time; `on_record` sees each record as
    its episode ends (in the event loop's thread). Returns the records in the order of `episodes`."""
    gate = asyncio.Semaphore(run.concurrency)

    async def one(planned: PlannedEpisode) -> EpisodeRecord:
        async with gate:
            record = await run_one(target, policy, planned, tools=tools, episode=episode, run=run, model=model)
        if on_record is not None:
            on_record(record)
        return record

    return list(await asyncio.gather(*(one(p) for p in episodes)))
