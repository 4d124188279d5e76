"""The worker's reward-hacking hook: `hacking/...` metrics per group and a flag on each sample."""

from __future__ import annotations

import queue
import time
from typing import Any

from openenv_trainers.advantages import GroupFilter
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.episode import EpisodeConfig
from openenv_trainers.generation import SamplingParams, TransformersBackend
from openenv_trainers.sources import EnvSource
from openenv_trainers.worker import EnvRolloutWorker, WorkerConfig

from openenv_sdk.monitor import SIGNALS, Episode, Monitor

from .conftest import echo_rubric


def _run(model: Any, tokenizer: Any, echo_url: str, monitor: Monitor | None, n: int = 4) -> tuple[list[Any], dict[str, Any]]:
    episode = EpisodeConfig(sampling=SamplingParams(max_tokens=32, temperature=0.8), max_turns=2, max_completion_tokens=96)
    config = WorkerConfig(
        num_generations=2,
        max_inflight_episodes=2,
        buffer_size=8,
        episode=episode,
        episode_timeout_s=60.0,
        group_filter=GroupFilter(drop_zero_variance=False),
        poll_interval_s=0.01,
        monitor=monitor,
    )
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
    worker = EnvRolloutWorker(
        sources=EnvSource(echo_url), backend=backend, tokenizer=tokenizer, tasks=echo_rows(4), rubric=echo_rubric(), config=config
    )
    samples: list[Any] = []
    worker.start()
    try:
        deadline = time.monotonic() + 120
        while len(samples) < n:
            assert time.monotonic() < deadline, f"only {len(samples)} samples; counters {worker.counters}"
            try:
                samples.append(worker.rollout_buffer.get(timeout=0.5))
            except queue.Empty:
                worker.check_health(60)
    finally:
        worker.stop()
    metrics: dict[str, Any] = {}
    while not worker.metrics_queue.empty():
        metrics.update(worker.metrics_queue.get_nowait())
    return samples, metrics


def test_the_default_monitor_reports_every_signal(model: Any, tokenizer: Any, echo_url: str) -> None:
    samples, metrics = _run(model, tokenizer, echo_url, Monitor())
    for name in [*SIGNALS, "reward_without_evidence", "flagged", "flagged_reward_mean"]:
        assert 0.0 <= metrics[f"hacking/{name}"] <= 1.0 or name == "flagged_reward_mean", name
    assert all(s.metrics["episode/hacking_flagged"] in (0.0, 1.0) for s in samples)


def test_a_firing_signal_flags_the_step_and_each_sample(model: Any, tokenizer: Any, echo_url: str) -> None:
    seen: list[Episode] = []

    def every_episode(episode: Episode) -> list[str]:
        seen.append(episode)
        return ["seen"]

    samples, metrics = _run(model, tokenizer, echo_url, Monitor(signals={"every_episode": every_episode}))
    assert metrics["hacking/flagged"] == 1.0 and metrics["hacking/every_episode"] == 1.0
    assert all(s.metrics["episode/hacking_flagged"] == 1.0 for s in samples)
    assert seen and all(e.reward is not None for e in seen)


def test_the_monitor_off(model: Any, tokenizer: Any, echo_url: str) -> None:
    samples, metrics = _run(model, tokenizer, echo_url, None)
    assert not any(k.startswith("hacking/") for k in metrics)
    assert all("episode/hacking_flagged" not in s.metrics for s in samples)
