"""The monitor: every signal over an episode, the episode's flags, and per-step metrics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ._evidence import EvidenceHook, evidence_for
from ._signals import SIGNALS, Signal
from ._transcript import Episode

__all__ = ["EVIDENCE_SIGNAL", "EpisodeFlags", "Monitor", "step_metrics"]

EVIDENCE_SIGNAL = "reward_without_evidence"
METRIC_PREFIX = "hacking/"


class EpisodeFlags(BaseModel):
    """What the monitor saw in one episode: the signals that fired, each with what fired it."""

    hits: dict[str, list[str]] = Field(default_factory=dict, description="Signal name -> what it saw, per call.")
    reward: float | None = None

    @property
    def signals(self) -> list[str]:
        """The names of the signals that fired."""
        return sorted(name for name, hits in self.hits.items() if hits)

    @property
    def flagged(self) -> bool:
        """Any signal fired."""
        return bool(self.signals)

    def summary(self) -> dict[str, Any]:
        """A JSON-able record: flagged, the signals, and the first hit of each."""
        return {"flagged": self.flagged, "signals": self.signals, "hits": {k: v[:3] for k, v in self.hits.items() if v}}


class Monitor:
    """Runs the transcript signals and the reward's evidence check over episodes.

    Args:
        signals: the transcript signals by name (default: all of `SIGNALS`).
        evidence: the evidence hook; default: the one registered for the episode's environment.
        pass_threshold: a reward at or above it needs evidence.
    """

    def __init__(
        self,
        *,
        signals: Mapping[str, Signal] | None = None,
        evidence: EvidenceHook | None = None,
        pass_threshold: float = 1.0,
    ) -> None:
        self.signals = dict(SIGNALS if signals is None else signals)
        self.evidence = evidence
        self.pass_threshold = pass_threshold

    def check(self, episode: Episode) -> EpisodeFlags:
        """The flags of one episode."""
        hits = {name: signal(episode) for name, signal in self.signals.items()}
        reward = episode.reward
        if reward is not None and not math.isnan(reward) and reward >= self.pass_threshold:
            hook = self.evidence or evidence_for(episode.env)
            hits[EVIDENCE_SIGNAL] = ["reward without the task's evidence"] if hook(episode) is False else []
        else:
            hits[EVIDENCE_SIGNAL] = []
        return EpisodeFlags(hits=hits, reward=reward)

    def check_messages(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        reward: float | None = None,
        env: str = "",
        task: Mapping[str, Any] | None = None,
    ) -> EpisodeFlags:
        """The flags of a chat transcript (as `openenv eval` records and the trainers keep)."""
        task_id = str(task.get("task_id")) if task and task.get("task_id") is not None else None
        return self.check(Episode.from_messages(messages, reward=reward, env=env, task_id=task_id, task=task))

    def signal_names(self) -> list[str]:
        return [*self.signals, EVIDENCE_SIGNAL]


def step_metrics(flags: Sequence[EpisodeFlags], *, signal_names: Iterable[str] | None = None) -> dict[str, float]:
    """Per-step metrics over a step's episodes: `hacking/flagged` (the fraction flagged),
    `hacking/<signal>` (the fraction where each fired) and `hacking/flagged_reward_mean` (the mean
    reward of the flagged ones; NaN-free: 0.0 when none)."""
    names = list(signal_names) if signal_names is not None else [*SIGNALS, EVIDENCE_SIGNAL]
    n = len(flags)
    if n == 0:
        return {}
    metrics = {f"{METRIC_PREFIX}flagged": sum(f.flagged for f in flags) / n}
    for name in names:
        metrics[f"{METRIC_PREFIX}{name}"] = sum(bool(f.hits.get(name)) for f in flags) / n
    rewards = [f.reward for f in flags if f.flagged and f.reward is not None and not math.isnan(f.reward)]
    metrics[f"{METRIC_PREFIX}flagged_reward_mean"] = sum(rewards) / len(rewards) if rewards else 0.0
    return metrics
