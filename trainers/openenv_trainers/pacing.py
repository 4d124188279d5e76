"""Generation paced to training: start an episode group only if the trainer will take it while it is fresh.

The async trainer's policy version moves on once per weight sync, i.e. once it has consumed the
samples of a step; a sample made at version `v` is dropped when it is consumed at a version above
`v + max_staleness` (TRL's rule). Staleness is therefore counted in samples, not seconds: with `S`
samples consumed per version (measured), `c` already consumed at the current version, and `Q`
samples buffered or in flight ahead of it, a new group of `g` samples is consumed fresh iff

    c + Q + g <= (max_staleness + 1) * S            (the staleness horizon, in samples)

`AdmissionController.admit` starts a group while `Q + g` fits in `fill` of that horizon (a margin
for steps that take fewer samples than the average). It is the trainer's own time that decides
the other bound: while a group is being generated (`D` seconds, measured) the trainer eats
`rate * D` samples (`rate`: samples per second of its busy time, i.e. not counting the time it
waited for samples), so while less than that is ahead a group starts, as long as it still fits in
the whole horizon; the trainer is never left waiting to save a sample that would not have gone stale. With
nothing buffered or in flight a group always starts, so pacing can slow the worker but never
stall it.

The trainer side is seen through the rollout buffer (`PacedQueue`: the trainer's `get` counts
consumption and the time it blocked) and through the version updates the trainer sends.
Everything takes its time from an injectable clock, so the logic is tested with a fake one.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["AdmissionController", "PacedQueue", "PacingConfig"]


@dataclass(frozen=True, kw_only=True)
class PacingConfig:
    """How the rollout worker paces generation to the trainer (see the module docstring)."""

    enabled: bool = True
    """Pace; False admits whatever the worker's static limits (episodes in flight, buffer) allow."""
    fill: float = 0.9
    """The share of the staleness horizon (in samples) the worker fills ahead of the trainer."""
    depth_margin: float = 0.25
    """Extra share on `rate * group time`, the depth that keeps the trainer from waiting."""
    samples_per_version_hint: int | None = None
    """Samples the trainer takes per policy version, until measured; default the worker's
    `max_inflight_episodes`."""
    ema_weight: float = 0.3
    """Weight of the newest observation in the moving averages (samples per version, rate, group time)."""

    def __post_init__(self) -> None:
        if not 0 < self.fill <= 1:
            raise ValueError(f"fill must be in (0, 1]; got {self.fill}")
        if self.depth_margin < 0:
            raise ValueError(f"depth_margin must be >= 0; got {self.depth_margin}")
        if not 0 < self.ema_weight <= 1:
            raise ValueError(f"ema_weight must be in (0, 1]; got {self.ema_weight}")
        if self.samples_per_version_hint is not None and self.samples_per_version_hint < 1:
            raise ValueError(f"samples_per_version_hint must be >= 1 or None; got {self.samples_per_version_hint}")


def _ema(old: float | None, new: float, weight: float) -> float:
    return new if old is None else (1 - weight) * old + weight * new


class AdmissionController:
    """Decides whether the worker starts another group now (thread-safe: the trainer reports from its thread).

    Args:
        max_staleness: the trainer's rule, as in `WorkerConfig`.
        group_size: episodes per group (`num_generations`).
        prior_samples_per_version: samples per version assumed until one is measured.
        config: the knobs.
        clock: seconds, monotonic; injectable for tests.
    """

    def __init__(
        self,
        *,
        max_staleness: int,
        group_size: int,
        prior_samples_per_version: float,
        config: PacingConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_staleness < 0 or group_size < 1 or prior_samples_per_version <= 0:
            raise ValueError("max_staleness must be >= 0, group_size >= 1 and prior_samples_per_version > 0")
        self.config = config or PacingConfig()
        self.max_staleness = max_staleness
        self.group_size = group_size
        self.clock = clock
        self._lock = threading.Lock()
        self._prior = float(self.config.samples_per_version_hint or prior_samples_per_version)
        self._version: int | None = None
        self._version_since = clock()
        self._consumed_now = 0  # at the current version
        self._waited_now_s = 0.0
        self._samples_per_version: float | None = None
        self._spread = 0.0  # mean absolute deviation of the samples per version
        self._rate: float | None = None  # samples per second of the trainer's busy time
        self._group_s: float | None = None
        self._yield = 1.0  # samples per episode (several segments, or groups filtered away)
        self._paused_since: float | None = None
        self.consumed = 0
        """Samples the trainer took, in all."""
        self.trainer_wait_s = 0.0
        """Seconds the trainer blocked on an empty buffer, in all."""
        self.admitted = 0
        """Groups started."""
        self.paused_s = 0.0
        """Seconds during which there was room to start a group but pacing held it back (closed intervals)."""

    # --- the trainer's side (its thread) --------------------------------------------------------

    def took(self, n: int = 1, *, waited_s: float = 0.0) -> None:
        """The trainer took `n` samples from the buffer, after blocking `waited_s` seconds."""
        with self._lock:
            self._consumed_now += n
            self.consumed += n
            self._waited_now_s += waited_s
            self.trainer_wait_s += waited_s

    def waited(self, seconds: float) -> None:
        """The trainer blocked `seconds` on an empty buffer and got nothing."""
        with self._lock:
            self._waited_now_s += seconds
            self.trainer_wait_s += seconds

    def version(self, version: int) -> None:
        """The trainer's policy version is now `version`; the interval since the last one is measured."""
        with self._lock:
            now = self.clock()
            previous = self._version
            self._version = version
            if previous is not None and version > previous and self._consumed_now > 0:
                weight = self.config.ema_weight
                per_version = self._consumed_now / (version - previous)
                if self._samples_per_version is not None:
                    self._spread = _ema(self._spread, abs(per_version - self._samples_per_version), weight)
                self._samples_per_version = _ema(self._samples_per_version, per_version, weight)
                busy_s = now - self._version_since - self._waited_now_s
                if busy_s > 0:
                    self._rate = _ema(self._rate, self._consumed_now / busy_s, weight)
            if previous is None or version != previous:
                self._version_since = now
                self._consumed_now = 0
                self._waited_now_s = 0.0

    # --- the worker's side (its loop) -----------------------------------------------------------

    def group_done(self, duration_s: float, *, episodes: int, samples: int) -> None:
        """A group finished after `duration_s`, its `episodes` giving `samples` trainable samples."""
        with self._lock:
            weight = self.config.ema_weight
            self._group_s = _ema(self._group_s, duration_s, weight)
            if episodes > 0:
                self._yield = _ema(self._yield, samples / episodes, weight)

    def admit(self, *, buffered: int, inflight_episodes: int, room: bool) -> bool:
        """Whether to start a group now.

        Args:
            buffered: samples waiting in the buffer.
            inflight_episodes: episodes running whose group is not stale yet (a stale one's samples
                are dropped when it ends, so they are not ahead of a new group).
            room: whether the worker's static limits (episodes in flight, buffer capacity) allow one.
        """
        with self._lock:
            now = self.clock()
            if not room:
                self._close_pause(now)
                return False
            go = not self.config.enabled or self._fits(buffered, inflight_episodes)
            if go:
                self.admitted += 1
                self._close_pause(now)
            elif self._paused_since is None:
                self._paused_since = now
            return go

    def _fits(self, buffered: int, inflight_episodes: int) -> bool:
        if self._version is None:
            return True  # no trainer has reported a version: nothing can go stale
        ahead = buffered + inflight_episodes * self._yield
        if ahead <= 0:
            return True  # nothing on its way to the trainer: never stall it
        after = ahead + self.group_size * self._yield
        paced, fresh = self._bounds()
        # Fill the horizon; beyond that, replenish while less than the trainer's depth is ahead, as
        # long as the group can still be fresh.
        return after <= paced or (ahead < self._depth() and after <= fresh)

    def _bounds(self) -> tuple[float, float]:
        """(paced, fresh): what may be ahead of the trainer in samples, by `fill`, and at most."""
        c = self._consumed_now
        per_version = self._per_version()
        paced = self.config.fill * (self.max_staleness + 1) * per_version - c
        # The most that may still be fresh: steps vary (token-budget batching), and a step that has
        # taken more than the average is not over, so it takes at least one more group.
        most = max(per_version + self._spread, c + self.group_size * self._yield)
        return paced, (self.max_staleness + 1) * most - c

    def _limit(self) -> float:
        paced, fresh = self._bounds()
        return max(paced, min(fresh, self._depth()))

    def _per_version(self) -> float:
        measured = self._samples_per_version if self._samples_per_version is not None else self._prior
        return max(measured, float(self._consumed_now))

    def _depth(self) -> float:
        if self._rate is None or self._group_s is None:
            return 0.0
        return self._rate * self._group_s * (1 + self.config.depth_margin)

    def _close_pause(self, now: float) -> None:
        if self._paused_since is not None:
            self.paused_s += now - self._paused_since
            self._paused_since = None

    # --- reading ---------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The controller's counters and estimates, as `worker/pacing/...` metric values."""
        with self._lock:
            now = self.clock()
            paused = self.paused_s + (now - self._paused_since if self._paused_since is not None else 0.0)
            return {
                "worker/admitted": float(self.admitted),
                "worker/paused_s": paused,
                "worker/pacing/samples_per_version": self._per_version(),
                "worker/pacing/trainer_rate": self._rate if self._rate is not None else math.nan,
                "worker/pacing/group_s": self._group_s if self._group_s is not None else math.nan,
                "worker/pacing/limit": self._limit(),
                "worker/pacing/trainer_wait_s": self.trainer_wait_s,
            }


class PacedQueue(queue.Queue[Any]):
    """The rollout buffer: a `queue.Queue` whose `get` (the trainer's) reports to an `AdmissionController`.

    `get` is what TRL's `RolloutQueueDataset` calls; each sample it returns is counted as taken,
    with the time it blocked for it. The worker's own removals go through `purge`, which is not
    counted as consumption.
    """

    def __init__(self, maxsize: int, controller: AdmissionController) -> None:
        super().__init__(maxsize=maxsize)
        self.controller = controller

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        clock = self.controller.clock
        started = clock()
        try:
            item = super().get(block, timeout)
        except queue.Empty:
            self.controller.waited(clock() - started)
            raise
        self.controller.took(1, waited_s=clock() - started)
        return item

    def purge(self, drop: Callable[[Any], bool]) -> int:
        """Remove every buffered item for which `drop` is true, keeping the others' order; returns how many."""
        with self.mutex:
            kept = [item for item in self.queue if not drop(item)]
            dropped = len(self.queue) - len(kept)
            self.queue.clear()
            self.queue.extend(kept)
            if dropped:
                self.not_full.notify_all()
        return dropped
