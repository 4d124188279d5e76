"""`EnvRolloutWorker`: an async GRPO rollout worker over environment sessions (TRL's `RolloutWorkerProtocol`).

    worker = EnvRolloutWorker(
        sources=[EnvSource(image="openenv-wordle:latest") for _ in range(4)],
        backend=CompletionsClient("http://vllm-host:8000"),
        tokenizer=tokenizer,
        tasks=dataset,                       # rows made by `tasks.task_row`
        config=WorkerConfig(num_generations=8),
    )
    trainer = AsyncGRPOTrainer(..., rollout_worker=worker)

It runs groups of episodes (each group: `num_generations` episodes of one task, same seed) on a
thread of its own, and fills `rollout_buffer` with TRL `RolloutSample`s: `input_ids` (prompt and
completion), `completion_mask` (1 exactly on the sampled tokens), `old_log_probs` (the sampling
logprob at every mask-1 position, NaN elsewhere; never filled in), the group-relative
`advantage`, the `model_version` the group started under, and per-sample `metrics`.

- Demand-driven: a group starts only while fewer than `max_inflight_episodes` episodes run and
  the buffer has room for its samples.
- Paced to training (`pacing.AdmissionController`, `WorkerConfig.pacing`): and only if, by the
  samples the trainer takes per policy version and what is buffered or in flight, it will be taken
  before it is stale, or the trainer needs it to keep busy. The trainer's takes and waits are seen
  through `rollout_buffer` (a `PacedQueue`), its versions through `update_model_version`.
- Filters: zero-variance groups and truncated episodes can be dropped (`GroupFilter`).
- Staleness: TRL's rule (`model_version - sample.model_version > max_staleness` is dropped):
  groups already stale when they finish are not enqueued, and `update_model_version` purges the
  buffer; both counted in `worker/dropped_stale`, against `worker/generated` (every sample the
  finished episodes made).
- Failures are never rewards (docs/failures.md): an episode whose reset failed, whose sandbox was
  killed while grading, whose judge answered HTTP 500 is left out of its group, which is trained
  on the episodes that survive alone (a group left with fewer than `GroupFilter.min_group_size` is
  dropped, `worker/groups_dropped_too_small`); each is counted by cause (`worker/failures/<cause>`)
  and kept in `failures` (group id, `Failure`). A judge or grader failure is not the source's:
  it does not count against its circuit breaker.
- Resilience: every episode has a timeout; a failed episode is retried on a fresh session; each
  source has a circuit breaker that restarts its server (container or process) after
  `breaker_failures` failures in a row; `check_health` raises `WorkerStuck` or `WorkerStarved`
  with the cause.
- Mixtures (`sources=EnvMixture(...)`, `openenv_trainers.mixture`): several environments, each
  with its servers, tasks, grader and weight; each group's environment keeps the mix at the
  weights, its task can follow a curriculum by pass rate, and each environment's rewards, pass
  rates and groups are reported as `worker/source/<name>/...`.
- Metrics (`metrics_queue`): reward mean and std, episode length, turns, tool calls and errors,
  environment latency, truncation, drops, failures, restarts; pacing (`worker/admitted`,
  `worker/paused_s`, `worker/pacing/...`); and per source (one server, on one
  node of a fleet): episodes in flight, finished, failed, timed out, restarts
  (`worker/source/<label>/...`, also `source_counters`).
- Reward hacking (`WorkerConfig.monitor`, `openenv_sdk.monitor`, docs/monitor.md): each group's
  episodes are checked host-side; `hacking/flagged` and `hacking/<signal>` (fractions of the
  group's episodes) go to `metrics_queue`, and each sample carries `episode/hacking_flagged`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import itertools
import json
import logging
import math
import queue
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openenv_sdk.episode_config import EPISODE_RETRIES, EPISODE_TIMEOUT_S
from openenv_sdk.failures import Failure, FailureCause, classify
from openenv_sdk.monitor import EpisodeFlags, Monitor, step_metrics

from ._aio import LoopThread
from .advantages import GroupFilter, group_advantages
from .chat import tool_schemas
from .episode import EpisodeConfig, EpisodeResult, Segment, run_episode
from .errors import (
    AccountingError,
    GenerationError,
    WorkerError,
    WorkerStarved,
    WorkerStuck,
)
from .mixture import Draw, EnvMixture
from .pacing import AdmissionController, PacedQueue, PacingConfig
from .source_counters import SourceCounters, source_labels
from .sources import EnvSource
from .tasks import split_task
from .trl_env import TRL_COLUMNS

__all__ = ["CircuitBreaker", "EnvRolloutWorker", "SourceCounters", "WorkerConfig", "rollout_sample_type"]

_NOT_THE_SOURCES = frozenset({FailureCause.JUDGE, FailureCause.GRADER})
"""Failures that do not count against a source's circuit breaker."""

logger = logging.getLogger(__name__)


def rollout_sample_type() -> type:
    """TRL's `RolloutSample` (imported quietly from `trl.experimental`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.async_rollout_worker import RolloutSample
    return RolloutSample


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """What the worker runs and when it gives up. Times are in seconds."""

    num_generations: int = 8
    """Episodes per group: one task, one seed, compared with each other for the advantage."""
    max_inflight_episodes: int = 32
    """The most episodes running at once (a multiple of `num_generations` uses it fully)."""
    buffer_size: int = 256
    """`rollout_buffer`'s capacity in samples; no group starts unless its samples fit."""
    max_staleness: int = 4
    """The trainer's rule: a sample whose `model_version` is more than this behind is dropped."""
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    """Turn and token limits and sampling of each episode."""
    episode_timeout_s: float = EPISODE_TIMEOUT_S
    """The longest one episode may run."""
    episode_retries: int = EPISODE_RETRIES
    """How many times a failed episode is run again (same task and seed, fresh session)."""
    group_filter: GroupFilter = field(default_factory=GroupFilter)
    """Which groups and episodes are trained on."""
    scale_advantages: bool = True
    """Divide by the group's reward std (GRPO); False keeps only the mean baseline."""
    breaker_failures: int = 3
    """Failures in a row that open a source's circuit breaker (and restart its server)."""
    breaker_cooldown_s: float = 30.0
    """How long an open breaker of a source that cannot restart (a URL) stays open."""
    starve_after_failures: int = 64
    """Episode failures in a row after which `check_health` reports the worker starved."""
    starve_after_dropped_groups: int = 200
    """Groups dropped in a row (zero variance, too small) after which the worker is starved."""
    check_server: bool = True
    """Check the backend once at `start()` (`CompletionsClient.check_server`: token ids, processed logprobs)."""
    seed: int = 0
    """Mixed into each group's reset seed (when the task gives none)."""
    poll_interval_s: float = 0.02
    """How often the scheduler looks for room to start a group."""
    pacing: PacingConfig = field(default_factory=PacingConfig)
    """Generation paced to the trainer's consumption (`PacingConfig(enabled=False)`: the static limits only)."""
    monitor: Monitor | None = field(default_factory=Monitor)
    """The reward-hacking monitor over each episode (`hacking/...` metrics); None: off. Give it the
    environment's evidence hook: `Monitor(evidence=evidence_for("terminal"))`."""

    def __post_init__(self) -> None:
        if self.num_generations < 1:
            raise ValueError("num_generations must be at least 1")
        if self.max_inflight_episodes < self.num_generations:
            raise ValueError(
                f"max_inflight_episodes ({self.max_inflight_episodes}) must be at least num_generations "
                f"({self.num_generations}): a group's episodes run together"
            )
        if self.buffer_size < self.num_generations:
            raise ValueError(f"buffer_size ({self.buffer_size}) must hold at least one group ({self.num_generations})")
        if self.episode_timeout_s <= 0 or self.breaker_failures < 1 or self.max_staleness < 0:
            raise ValueError("episode_timeout_s must be positive, breaker_failures >= 1, max_staleness >= 0")


class CircuitBreaker:
    """Counts one source's failures in a row; open after `threshold` of them, until reset."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.failures = 0
        self.opened_at: float | None = None
        self.last_error: BaseException | None = None

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def success(self) -> None:
        self.failures = 0

    def failure(self, error: BaseException) -> bool:
        """Record a failure; True when this one opened the breaker."""
        self.failures += 1
        self.last_error = error
        if self.opened_at is None and self.failures >= self.threshold:
            self.opened_at = time.monotonic()
            return True
        return False

    def reset(self) -> None:
        self.failures = 0
        self.opened_at = None


class _SourceState:
    """One source's sessions and breaker (used on the worker's loop only)."""

    def __init__(self, source: EnvSource, breaker: CircuitBreaker, counters: SourceCounters) -> None:
        self.source = source
        self.breaker = breaker
        self.counters = counters
        self.free: list[tuple[int, Any]] = []  # (source generation, session)
        self.restarting = False

    async def acquire(self) -> tuple[int, Any]:
        generation = self.source.generation
        while self.free:
            made_at, session = self.free.pop()
            if made_at == generation and not session.is_closed:
                return made_at, session
            await _close(session)
        session = await asyncio.to_thread(self.source.async_client)
        return generation, session

    async def release(self, made_at: int, session: Any, *, healthy: bool) -> None:
        if healthy and made_at == self.source.generation and not session.is_closed:
            self.free.append((made_at, session))
        else:
            await _close(session)

    async def close(self) -> None:
        free, self.free = self.free, []
        for _, session in free:
            await _close(session)


async def _close(session: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.aclose(), 10)


class EnvRolloutWorker:
    """Fills TRL's rollout buffer with scored samples from environment episodes (see the module docstring)."""

    def __init__(
        self,
        *,
        sources: EnvSource | list[EnvSource] | EnvMixture,
        backend: Any,
        tokenizer: Any,
        tasks: Iterable[Mapping[str, Any]] | None = None,
        rubric: Any | None = None,
        config: WorkerConfig | None = None,
        episode_runner: Any | None = None,
    ) -> None:
        """Describe the worker; nothing runs until `start()`.

        Args:
            sources: the environment servers episodes run on (each with its own circuit breaker); or
                an `EnvMixture` of several environments, each with its servers, tasks, grader and
                weight (`tasks` and `rubric` are then its own; see `openenv_trainers.mixture`).
            backend: a generation backend (`CompletionsClient` for vLLM, `TransformersBackend`).
            tokenizer: the policy's tokenizer, with a tool-calling chat template.
            tasks: dataset rows (`prompt` plus task fields, as `tasks.task_row` makes them),
                cycled through; a `datasets.Dataset` works.
            rubric: the host-side grader; default the one the first source's `openenv.yaml` names.
            config: limits, filters and resilience settings.
            episode_runner: runs one episode instead of the tool-calling loop (`run_episode`),
                with the same arguments plus `host_address`; e.g. `intercept.AgentEpisodeRunner`
                for a black-box agent whose model calls are intercepted.
        """
        self.mixture: EnvMixture | None = None
        if isinstance(sources, EnvMixture):
            if tasks is not None or rubric is not None:
                raise ValueError("a mixture's sources carry their own tasks and rubric: leave tasks= and rubric= out")
            self.mixture, sources = sources, sources.env_sources
        elif tasks is None:
            raise ValueError("the worker needs tasks= (dataset rows), or an EnvMixture as sources=")
        self.sources = [sources] if isinstance(sources, EnvSource) else list(sources)
        if not self.sources:
            raise ValueError("the worker needs at least one EnvSource")
        self.backend = backend
        self.tokenizer = tokenizer
        self.tasks = tasks if tasks is not None else []
        self.rubric = rubric if rubric is not None or self.mixture is not None else self.sources[0].grader()
        self.config = config or WorkerConfig()
        self.episode_runner = episode_runner
        self.pacing = AdmissionController(
            max_staleness=self.config.max_staleness,
            group_size=self.config.num_generations,
            prior_samples_per_version=self.config.max_inflight_episodes,
            config=self.config.pacing,
        )
        """Decides when a group starts; its counters (`admitted`, `paused_s`, the trainer's waits) are readable."""
        self.rollout_buffer: PacedQueue = PacedQueue(self.config.buffer_size, self.pacing)
        self.metrics_queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=4096)
        self._sample_type = rollout_sample_type()
        self._model_version = 0
        self._states = [
            _SourceState(source, CircuitBreaker(self.config.breaker_failures), SourceCounters(label=label))
            for source, label in zip(self.sources, source_labels(s.name for s in self.sources), strict=True)
        ]
        self._round_robin = itertools.cycle(range(len(self._states)))
        self._loop: LoopThread | None = None
        self._main: Any = None
        self._stopping = threading.Event()
        self._fatal: BaseException | None = None
        self._inflight = 0
        self._inflight_by_version: collections.Counter[int] = collections.Counter()  # episodes, by group version
        self._episode_started: dict[int, float] = {}
        self._episode_ids = itertools.count()
        self._heartbeat = 0.0
        self._last_progress = 0.0
        self._consecutive_failures = 0
        self._consecutive_dropped_groups = 0
        self._last_failure: BaseException | None = None
        self._all_open_since: float | None = None
        self._tools: list[dict[str, Any]] | None = None
        self._buffer_lock = threading.Lock()
        self.counters: dict[str, int] = dict.fromkeys(
            (
                "episodes",
                "episode_failures",
                "episode_timeouts",
                "groups",
                "groups_dropped_zero_variance",
                "groups_dropped_too_small",
                "episodes_dropped_truncated",
                "dropped_stale",
                "generated",
                "admitted",
                "env_restarts",
                "samples",
            ),
            0,
        )
        """Totals since `start()`, also pushed to `metrics_queue` as they change."""
        self.failures: collections.deque[tuple[int, Failure]] = collections.deque(maxlen=100_000)
        """The latest failed episodes (after their retries too): (group id, failure), oldest first."""

    @property
    def source_counters(self) -> dict[str, SourceCounters]:
        """Each source's episodes in flight, finished, failed, and its restarts, by label.

        A label is the source's name, shortened (a fleet member's is `<env>[<index>]`); each entry also holds
        the server's URL and node as last seen. Read it from any thread: the values are the loop's
        own, not a snapshot.
        """
        return {state.counters.label: state.counters for state in self._states}

    # --- RolloutWorkerProtocol -----------------------------------------------------------------

    def start(self) -> None:
        """Check the backend and the environments, then start producing on the worker's thread.

        Raises:
            ServerCompatibilityError: the completions server lacks token ids or processed logprobs.
            openenv_sdk.errors.OpenEnvError: an environment server could not start.
        """
        if self._loop is not None:
            logger.warning("EnvRolloutWorker.start() called twice; ignoring")
            return
        if self.config.check_server and hasattr(self.backend, "check_server"):
            self.backend.check_server()
        if self.mixture is not None:
            self.mixture.load_tools()
        else:
            self._tools = tool_schemas(self.sources[0].tools())
        now = time.time()
        self._heartbeat = self._last_progress = now
        self._stopping.clear()
        self._loop = LoopThread(name="openenv-rollout-worker")
        self._main = asyncio.run_coroutine_threadsafe(self._run(), self._loop.loop)

    def stop(self) -> None:
        """Stop producing, cancel running episodes, close every session and the sources' servers."""
        if self._loop is None:
            return
        self._stopping.set()
        loop, self._loop = self._loop, None
        with contextlib.suppress(Exception):
            self._main.result(timeout=30)
        with contextlib.suppress(Exception):
            loop.run(self._close_sessions(), timeout_s=30)
        loop.close()
        for source in self.sources:
            with contextlib.suppress(Exception):
                source.close()

    def update_model_version(self, model_version: int) -> None:
        """Record the live policy version, and drop buffered samples that are now too stale."""
        self._model_version = int(model_version)
        self.pacing.version(self._model_version)
        with self._buffer_lock:
            dropped = self.rollout_buffer.purge(lambda sample: self._is_stale(sample.model_version))
        if dropped:
            self._count("dropped_stale", dropped)

    def check_health(self, stale_after_s: float) -> None:
        """Raise if the worker failed, is stuck, or is starved; return quietly otherwise.

        Raises:
            WorkerError: the worker failed (chained to the cause), or was never started.
            WorkerStuck: its loop stopped ticking, or no episode finished for `stale_after_s`
                seconds while episodes were running.
            WorkerStarved: episodes keep failing (environments down), every source's breaker is
                open, or every recent group was dropped (e.g. all rewards equal).
        """
        if self._fatal is not None:
            raise WorkerError(f"the rollout worker failed: {type(self._fatal).__name__}: {self._fatal}") from self._fatal
        if self._loop is None:
            raise WorkerError("the rollout worker is not running (start() was not called, or stop() was)")
        if self._main is not None and self._main.done():
            error = self._main.exception()
            raise WorkerError(f"the rollout worker's loop ended: {error!r}") from error
        now = time.time()
        if now - self._heartbeat > stale_after_s:
            raise WorkerStuck(f"the rollout worker's loop has not ticked for {now - self._heartbeat:.0f} s")
        cfg = self.config
        if self._consecutive_failures >= cfg.starve_after_failures:
            raise WorkerStarved(
                f"{self._consecutive_failures} episodes failed in a row; the last: {self._last_failure!r}"
            ) from self._last_failure
        if self._all_open_since is not None and now - self._all_open_since > stale_after_s:
            raise WorkerStarved(
                f"every environment source's circuit breaker has been open for {now - self._all_open_since:.0f} s; "
                f"the last failure: {self._last_failure!r}"
            ) from self._last_failure
        if self._consecutive_dropped_groups >= cfg.starve_after_dropped_groups:
            raise WorkerStarved(
                f"the last {self._consecutive_dropped_groups} groups were all dropped (zero reward variance or too "
                f"few episodes): the task is too hard or too easy for the policy, or the reward is constant"
            )
        if self._inflight and now - self._last_progress > stale_after_s:
            oldest = now - min(self._episode_started.values(), default=now)
            raise WorkerStuck(
                f"no episode finished for {now - self._last_progress:.0f} s with {self._inflight} in flight "
                f"(the oldest started {oldest:.0f} s ago)"
            )

    # --- the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        groups: set[asyncio.Task[None]] = set()
        rows = self._rows()
        group_ids = itertools.count()
        try:
            while not self._stopping.is_set():
                self._heartbeat = time.time()
                if self._fatal is not None:
                    break
                while self._has_demand():
                    version = self._model_version
                    task = asyncio.create_task(self._run_group(next(group_ids), next(rows), version))
                    self._inflight += self.config.num_generations
                    self._inflight_by_version[version] += self.config.num_generations
                    self.counters["admitted"] += 1
                    groups.add(task)
                    task.add_done_callback(self._group_done(groups))
                self._update_breakers()
                await asyncio.sleep(self.config.poll_interval_s)
        except BaseException as e:
            self._fatal = e
            raise
        finally:
            for task in list(groups):
                task.cancel()
            await asyncio.gather(*groups, return_exceptions=True)

    def _group_done(self, groups: set[asyncio.Task[None]]) -> Any:
        def done(task: asyncio.Task[None]) -> None:
            groups.discard(task)
            if not task.cancelled() and task.exception() is not None and self._fatal is None:
                self._fatal = task.exception()

        return done

    def _rows(self) -> Iterator[Mapping[str, Any] | Draw]:
        while self.mixture is not None:  # each group's task from the mixture (its weights, its curriculum)
            yield self.mixture.draw()
        while True:
            empty = True
            for row in self.tasks:
                empty = False
                yield row
            if empty:
                raise WorkerError("the task dataset is empty")

    def _has_demand(self) -> bool:
        g = self.config.num_generations
        buffered = self.rollout_buffer.qsize()
        room = (
            self._inflight + g <= self.config.max_inflight_episodes
            and not all(s.breaker.is_open for s in self._states)
            and buffered + self._inflight + g <= self.config.buffer_size
        )
        # Episodes of a group that is already stale give nothing to the trainer: not ahead of a new one.
        fresh = sum(n for version, n in self._inflight_by_version.items() if not self._is_stale(version))
        return self.pacing.admit(buffered=buffered, inflight_episodes=fresh, room=room)

    def _update_breakers(self) -> None:
        now = time.monotonic()
        for state in self._states:
            breaker = state.breaker
            if breaker.is_open and not state.restarting:
                if state.source.can_restart:
                    state.restarting = True
                    asyncio.get_running_loop().create_task(self._restart(state))
                elif now - (breaker.opened_at or now) >= self.config.breaker_cooldown_s:
                    breaker.reset()  # half-open: the next episode tries again
        if all(s.breaker.is_open for s in self._states):
            self._all_open_since = self._all_open_since or time.time()
        else:
            self._all_open_since = None

    async def _restart(self, state: _SourceState) -> None:
        try:
            logger.warning("restarting %s after %d failures in a row", state.source, state.breaker.failures)
            await state.close()
            await asyncio.to_thread(state.source.restart)
            self._count("env_restarts")
            state.counters.restarts += 1
            state.breaker.reset()
        except Exception as e:
            self._last_failure = e
            logger.warning("restarting %s failed: %s", state.source, e)
            await asyncio.sleep(self.config.breaker_cooldown_s)
        finally:
            state.restarting = False

    async def _run_group(self, group_id: int, row: Mapping[str, Any] | Draw, version: int) -> None:
        cfg = self.config
        started = time.monotonic()
        draw = row if isinstance(row, Draw) else None
        try:
            messages, task, seed = self._task_of(row.row if isinstance(row, Draw) else row, group_id)
            results = await asyncio.gather(
                *(self._episode(messages, task, seed, group_id, draw) for _ in range(cfg.num_generations))
            )
        finally:
            self._inflight -= cfg.num_generations
            self._inflight_by_version[version] -= cfg.num_generations
            if self._inflight_by_version[version] <= 0:
                del self._inflight_by_version[version]
        self._count("groups")
        self._push({k: v for state in self._states for k, v in state.counters.metrics().items()})
        episodes = [r for r in results if r is not None]
        self._count("generated", sum(len(e.rows()) for e in episodes))
        kept = [e for e in episodes if cfg.group_filter.keep_episode(e.truncated)]
        if len(kept) < len(episodes):
            self._count("episodes_dropped_truncated", len(episodes) - len(kept))
        self._push_episode_metrics(episodes)
        hacking = self._check_hacking(episodes)
        reason = cfg.group_filter.keep_group([e.reward for e in kept])
        if draw is not None and self.mixture is not None:  # per-source metrics; the task's pass rate
            self._push(self.mixture.record(draw, [e.reward for e in kept], trained=reason is None,
                                           zero_variance=reason == "zero_variance"))  # fmt: skip
        trainable = 0 if reason is not None else sum(len(e.rows()) for e in kept)
        self.pacing.group_done(time.monotonic() - started, episodes=cfg.num_generations, samples=trainable)
        self._push_pacing_metrics()
        if reason is not None:
            self._count(f"groups_dropped_{reason}")
            self._consecutive_dropped_groups += 1
            return
        self._consecutive_dropped_groups = 0
        if draw is not None and self.mixture is not None:  # the trainer's batches keep the mixture's weights
            await self.mixture.turn(draw, poll_interval_s=cfg.poll_interval_s, stopping=self._stopping)
        if self._is_stale(version):
            self._count("dropped_stale", len(kept))
            return
        rewards = [e.reward for e in kept]
        advantages = group_advantages(rewards, scale=cfg.scale_advantages)
        reward_std = float(np.std(rewards))
        samples = 0
        for episode, advantage in zip(kept, advantages, strict=True):
            # One row per segment: a black-box agent's episode may hold several conversations.
            for segment in episode.rows():
                flags = hacking.get(id(episode))
                samples += await self._put(self._sample(episode, segment, advantage, version, group_id, reward_std, flags))
        self._count("samples", samples)

    def _task_of(self, row: Mapping[str, Any], group_id: int) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
        prompt = row.get("prompt")
        if not isinstance(prompt, list):
            raise WorkerError(f"a task row needs a conversational `prompt` (a list of messages); got {prompt!r}")
        messages, embedded = split_task(prompt)
        task = {k: v for k, v in row.items() if k not in TRL_COLUMNS}
        if not task and embedded:
            task = embedded
        seed = task.pop("seed", None)
        if seed is None:
            key = json.dumps(task, sort_keys=True, default=str)
            digest = hashlib.sha256(f"{self.config.seed}:{group_id}:{key}".encode()).digest()
            seed = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
        return messages, task, int(seed)

    async def _episode(
        self, messages: list[dict[str, Any]], task: dict[str, Any], seed: int, group_id: int = -1, draw: Draw | None = None
    ) -> EpisodeResult | None:
        episode_id = next(self._episode_ids)
        self._episode_started[episode_id] = time.time()
        try:
            for _attempt in range(self.config.episode_retries + 1):
                state = await self._pick_source(draw.env_sources if draw is not None else None)
                if state is None:
                    return None
                made_at, session = await state.acquire()
                counters = state.counters
                counters.url, counters.node = state.source.url, state.source.node
                counters.inflight += 1
                healthy = False
                try:
                    runner: Any = run_episode
                    extra: dict[str, Any] = {}
                    if self.episode_runner is not None:
                        runner = self.episode_runner
                        extra["host_address"] = state.source.host_address
                    result = await asyncio.wait_for(
                        runner(
                            session,
                            self.backend,
                            self.tokenizer,
                            prompt=messages,
                            task=task,
                            tools=draw.tools if draw is not None else self._tools or [],
                            rubric=draw.rubric if draw is not None else self.rubric,
                            config=self.config.episode,
                            seed=seed,
                            **extra,
                        ),
                        self.config.episode_timeout_s,
                    )
                    healthy = True
                except (GenerationError, AccountingError) as e:
                    # Not the environment's failure: logprobs or token accounting are wrong, and
                    # training on them would be wrong. Stop the worker; check_health reports it.
                    self._fatal = e
                    return None
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    timed_out = isinstance(e, TimeoutError)
                    self._count("episode_timeouts" if timed_out else "episode_failures")
                    if timed_out:
                        counters.timeouts += 1
                    else:
                        counters.failures += 1
                    failure = classify(e, stage="episode")
                    self._count(f"failures/{failure.cause.value}")
                    self.failures.append((group_id, failure))
                    self._consecutive_failures += 1
                    self._last_failure = e
                    self._last_progress = time.time()
                    # A session of a server that was restarted since fails by design: not news; a
                    # judge or a grader that failed says nothing of the source's health.
                    if failure.cause in _NOT_THE_SOURCES:
                        continue
                    if made_at == state.source.generation and state.breaker.failure(e):
                        logger.warning("circuit breaker of %s opened: %r", state.source, e)
                    continue
                finally:
                    counters.inflight -= 1
                    await state.release(made_at, session, healthy=healthy)
                state.breaker.success()
                counters.episodes += 1
                self._consecutive_failures = 0
                self._last_progress = time.time()
                self._count("episodes")
                return result
            return None
        finally:
            self._episode_started.pop(episode_id, None)

    async def _pick_source(self, among: list[EnvSource] | None = None) -> _SourceState | None:
        while not self._stopping.is_set():
            for _ in range(len(self._states)):
                state = self._states[next(self._round_robin)]
                if not state.breaker.is_open and (among is None or state.source in among):
                    return state
            await asyncio.sleep(self.config.poll_interval_s * 5)
        return None

    def _sample(
        self,
        episode: EpisodeResult,
        row: Segment,
        advantage: float,
        version: int,
        group_id: int,
        reward_std: float,
        flags: EpisodeFlags | None = None,
    ) -> Any:
        prompt_len = len(row.prompt_ids)
        return self._sample_type(
            prompt=row.messages[: row.prompt_message_count],
            completion=row.messages[row.prompt_message_count :],
            input_ids=np.asarray(row.input_ids, dtype=np.int64),
            completion_mask=np.asarray([0] * prompt_len + row.completion_mask, dtype=np.int64),
            old_log_probs=np.asarray([math.nan] * prompt_len + row.completion_logprobs, dtype=np.float32),
            advantage=float(advantage),
            model_version=version,
            group_id=group_id,
            metrics={
                "reward": episode.reward,
                "reward_std": reward_std,
                **{f"rewards/{k}": v for k, v in episode.reward_components.items()},
                "episode/completion_tokens": float(len(row.completion_ids)),
                "episode/sampled_tokens": float(sum(row.completion_mask)),
                "episode/turns": float(episode.turns),
                "tools/call_frequency": float(episode.tool_calls),
                "tools/failure_frequency": episode.tool_errors / episode.tool_calls if episode.tool_calls else 0.0,
                "env/latency_s": episode.env_latency_s,
                "episode/truncated": float(episode.truncated),
                **({"episode/hacking_flagged": float(flags.flagged)} if flags is not None else {}),
            },
            enqueued_at=time.time(),
        )

    async def _put(self, sample: Any) -> bool:
        """Enqueue a sample when there is room; False if it went stale first (counted) or the worker stopped."""
        while not self._stopping.is_set():
            if self._is_stale(sample.model_version):  # the version moved while the buffer was full
                self._count("dropped_stale")
                return False
            with self._buffer_lock:
                try:
                    self.rollout_buffer.put_nowait(sample)
                    return True
                except queue.Full:
                    pass
            await asyncio.sleep(self.config.poll_interval_s)
        return False

    def _is_stale(self, version: int) -> bool:
        return self._model_version - version > self.config.max_staleness

    async def _close_sessions(self) -> None:
        for state in self._states:
            await state.close()
        aclose = getattr(self.backend, "aclose", None)
        if aclose is not None:  # the backend's connections made on this loop
            with contextlib.suppress(Exception):
                await aclose()

    # --- metrics --------------------------------------------------------------------------------

    def _count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n
        self._push({f"worker/{name}": float(self.counters[name])})

    def _push_episode_metrics(self, episodes: list[EpisodeResult]) -> None:
        if not episodes:
            return
        rewards = [e.reward for e in episodes]
        calls = sum(e.tool_calls for e in episodes)
        self._push(
            {
                "worker/reward_mean": float(np.mean(rewards)),
                "worker/reward_std": float(np.std(rewards)),
                "worker/episode_length": float(np.mean([len(e.completion_ids) for e in episodes])),
                "worker/episode_turns": float(np.mean([e.turns for e in episodes])),
                "worker/tool_calls": float(calls),
                "worker/tool_errors": (float(sum(e.tool_errors for e in episodes)), float(max(calls, 1))),
                "worker/env_latency_s": float(np.mean([e.env_latency_s for e in episodes])),
                "worker/generation_s": float(np.mean([e.generation_s for e in episodes])),
                "worker/truncated": (float(sum(e.truncated for e in episodes)), float(len(episodes))),
                "worker/inflight_episodes": float(self._inflight),
                "worker/buffer_size": float(self.rollout_buffer.qsize()),
            }
        )

    def _check_hacking(self, episodes: list[EpisodeResult]) -> dict[int, EpisodeFlags]:
        """Each episode's reward-hacking flags (by `id`), and the group's `hacking/...` metrics pushed."""
        monitor = self.config.monitor
        if monitor is None or not episodes:
            return {}
        flags = {
            id(e): monitor.check_messages(e.completion_messages, reward=e.reward, env=str(e.task.get("env", "")), task=e.task)
            for e in episodes
        }
        self._push(step_metrics(list(flags.values()), signal_names=monitor.signal_names()))
        return flags

    def _push_pacing_metrics(self) -> None:
        pacing = self.pacing.metrics()
        generated = self.counters["generated"]
        pacing["worker/stale_fraction"] = self.counters["dropped_stale"] / generated if generated else 0.0
        self._push(pacing)

    def _push(self, values: dict[str, Any]) -> None:
        with contextlib.suppress(queue.Full):
            self.metrics_queue.put_nowait(values)
