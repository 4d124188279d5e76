"""Regrade a run's kept episodes: the grader, as at each episode's end, with no model call.

For each episode that was graded and kept, the grader gets a `KeptSession` in place of the
episode's client: `state()`, `trajectory` and the `transcript` call answer what was kept; any
other call (`run_checks`, `run_tests`, ...) goes to a fresh session of the environment, reset
with the episode's task and its workspace restored from the archive (`restore_workspace`). The
environment's server is started only when a grader makes such a call (wordle's never does).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..client import Trajectory
from ..evaluation import EPISODES_FILE, EnvTarget, EpisodeLog
from ..loader import load_grader
from ..rubric import agrade
from ._store import KeptEpisode, NotKept, StateStore

__all__ = ["EpisodeRegrade", "KeptSession", "RegradeResult", "TaskDiff", "aregrade"]

REGRADE_FILE = "regrade.json"


class EpisodeRegrade(BaseModel):
    """One episode: its reward then and now."""

    key: str
    task_id: str
    original: float | None
    reward: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    status: str = Field(description="regraded, not_kept (no state kept), or failed (see `error`).")
    error: str | None = None
    timings_s: dict[str, float] = Field(
        default_factory=dict,
        description="Where its time went: `open` (a client; the first waits for the server's start), `reset`, "
        "`restore_workspace`, each call of the grader's, and `grade` (all of it).",
    )

    @property
    def changed(self) -> bool:
        return self.status == "regraded" and self.reward != self.original


class TaskDiff(BaseModel):
    """One task: mean reward then and now, over its regraded episodes."""

    task_id: str
    episodes: int
    regraded: int
    changed: int
    original_mean: float | None
    regraded_mean: float | None

    @property
    def delta(self) -> float | None:
        if self.original_mean is None or self.regraded_mean is None:
            return None
        return self.regraded_mean - self.original_mean


class RegradeResult(BaseModel):
    run_dir: str
    grader: str
    episodes: list[EpisodeRegrade]
    tasks: list[TaskDiff]
    regraded: int
    changed: int
    not_kept: int
    failed: int
    sessions: int = Field(description="Fresh environment sessions opened (a workspace restored in each).")
    server_start_s: float = Field(default=0.0, description="Starting the environment's server (0: none was needed).")
    duration_s: float

    def phases_s(self) -> dict[str, float]:
        """Each phase's time summed over the episodes (they overlap when regraded concurrently)."""
        total: dict[str, float] = {}
        for row in self.episodes:
            for name, seconds in row.timings_s.items():
                total[name] = total.get(name, 0.0) + seconds
        return total


class KeptSession:
    """What a grader sees of a kept episode: its kept state, and calls into a restored session."""

    def __init__(self, kept: KeptEpisode, archive: bytes | None, open_session: Callable[[], Any]) -> None:
        self.kept = kept
        self.trajectory = Trajectory.model_validate(kept.trajectory or {"task": kept.reset_kwargs})
        self._archive = archive
        self._open_session = open_session
        self._client: Any = None
        self.timings_s: dict[str, float] = {}

    async def state(self) -> dict[str, Any]:
        return dict(self.kept.state)

    async def call(self, name: str, /, **arguments: Any) -> Any:
        if name == "transcript" and self.kept.transcript is not None:
            return self.kept.transcript
        session = await self._session()
        with self._timed(name):
            return await session.call(name, **arguments)

    async def _session(self) -> Any:
        if self._client is None:
            with self._timed("open"):  # the first one waits for the server's start
                client = await self._open_session()
            self._client = client
            with self._timed("reset"):
                await client.reset(**self.kept.reset_kwargs)
            if self._archive is not None:
                with self._timed("restore_workspace"):
                    await client.call("restore_workspace", archive=base64.b64encode(self._archive).decode("ascii"))
        return self._client

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings_s[name] = self.timings_s.get(name, 0.0) + time.monotonic() - started

    @property
    def opened(self) -> bool:
        return self._client is not None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


async def aregrade(
    run_dir: str | Path,
    *,
    grader: str | None = None,
    env: str | None = None,
    env_token: str | None = None,
    concurrency: int = 8,
    episode_timeout_s: float = 300.0,
    env_timeout_s: float = 60.0,
    startup_timeout_s: float = 120.0,
) -> RegradeResult:
    """Regrade every kept episode of `run_dir` (an `openenv eval/collect --keep-state` output).

    Args:
        grader: a folder or `module:attribute`; default the run's own grader.
        env: serve this environment for the restored sessions; default the one the run named.
        env_token: the orchestrator token of a server URL (never kept with the run).
        concurrency: episodes regraded at once.
        episode_timeout_s: the most one episode's regrading may take.

    Raises:
        NotKept: the folder holds no kept state, or no episodes.
        openenv_sdk.errors.ManifestError: the grader cannot be loaded.
    """
    started = time.monotonic()
    folder = Path(run_dir)
    store = StateStore(folder)
    run = store.read_run()
    log = EpisodeLog(folder / EPISODES_FILE)
    records = log.load()
    if not records:
        raise NotKept(f"{folder / EPISODES_FILE} holds no episodes")
    grader_spec = grader or run.grader or run.env
    rubric = load_grader(grader_spec)
    env_spec = env or run.env
    target: EnvTarget | None = None
    start_lock = asyncio.Lock()
    sessions = 0
    server_start_s = 0.0

    async def open_session() -> Any:
        nonlocal target, sessions, server_start_s
        async with start_lock:
            if target is None:
                began = time.monotonic()
                target = EnvTarget(env_spec, grader=grader_spec, orchestrator_token=env_token,
                                   startup_timeout_s=startup_timeout_s, timeout_s=env_timeout_s)  # fmt: skip
                await target.start()
                server_start_s = time.monotonic() - began
            sessions += 1
        return target.client()

    gate = asyncio.Semaphore(concurrency)

    async def one(key: str) -> EpisodeRegrade:
        record = records[key]
        row = EpisodeRegrade(key=key, task_id=record.task_id, original=record.reward, status="failed")
        if record.error is not None:
            row.status, row.error = "not_kept", f"the episode was not graded: {record.error}"
            return row
        try:
            kept = store.load(key)
            if kept is None:
                row.status, row.error = "not_kept", "no state kept for this episode"
                return row
            if kept.error is not None:
                row.status, row.error = "not_kept", f"its state could not be kept: {kept.error}"
                return row
            archive = store.archive(kept, max_bytes=run.max_archive_bytes)
        except NotKept as e:
            row.error = str(e)
            return row
        async with gate:
            session = KeptSession(kept, archive, open_session)
            began = time.monotonic()
            try:
                async with asyncio.timeout(episode_timeout_s):
                    score = await agrade(rubric, session)
                row.reward = float(score.value)
                row.components = {k: float(v) for k, v in score.components.items()}
                row.status = "regraded"
            except TimeoutError:
                row.error = f"regrading took longer than {episode_timeout_s:g} s"
            except Exception as e:  # a grader that could not decide says so: never a reward
                row.error = f"{type(e).__name__}: {e}"
            finally:
                row.timings_s = {**session.timings_s, "grade": time.monotonic() - began}
                try:
                    await session.aclose()
                except Exception:
                    pass
        return row

    try:
        rows = list(await asyncio.gather(*(one(key) for key in records)))
    finally:
        if target is not None:
            await target.stop()
    return RegradeResult(
        run_dir=str(folder),
        grader=grader_spec,
        episodes=rows,
        tasks=_task_diffs(rows),
        regraded=sum(r.status == "regraded" for r in rows),
        changed=sum(r.changed for r in rows),
        not_kept=sum(r.status == "not_kept" for r in rows),
        failed=sum(r.status == "failed" for r in rows),
        sessions=sessions,
        server_start_s=server_start_s,
        duration_s=time.monotonic() - started,
    )


def _task_diffs(rows: list[EpisodeRegrade]) -> list[TaskDiff]:
    by_task: dict[str, list[EpisodeRegrade]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    out = []
    for task_id, group in by_task.items():
        done = [r for r in group if r.status == "regraded"]
        out.append(
            TaskDiff(
                task_id=task_id,
                episodes=len(group),
                regraded=len(done),
                changed=sum(r.changed for r in done),
                original_mean=_mean([r.original for r in done]),
                regraded_mean=_mean([r.reward for r in done]),
            )
        )
    return out


def _mean(values: list[float | None]) -> float | None:
    numbers = [v for v in values if v is not None]
    return sum(numbers) / len(numbers) if numbers else None
