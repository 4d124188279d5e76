"""The async GRPO rollout worker: exact samples over the vLLM client path, demand, staleness, resilience."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import queue
import signal
import time
from collections import defaultdict
from typing import Any

import pytest
import torch
from openenv_trainers.advantages import GroupFilter
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.episode import EpisodeConfig
from openenv_trainers.errors import (
    LogprobError,
    ServerCompatibilityError,
    WorkerError,
    WorkerStarved,
    WorkerStuck,
)
from openenv_trainers.generation import Completion, SamplingParams, TransformersBackend
from openenv_trainers.generation.client import CompletionsClient
from openenv_trainers.generation.server import create_completions_app
from openenv_trainers.sources import EnvSource
from openenv_trainers.worker import EnvRolloutWorker, WorkerConfig, rollout_sample_type

from .conftest import ECHO_DIR, echo_rubric, serve
from .tokens import mask_runs

TEMPERATURE = 0.8


def _config(**overrides: Any) -> WorkerConfig:
    episode = EpisodeConfig(
        sampling=SamplingParams(max_tokens=48, temperature=TEMPERATURE), max_turns=3, max_completion_tokens=160
    )
    values: dict[str, Any] = {
        "num_generations": 4,
        "max_inflight_episodes": 8,
        "buffer_size": 16,
        "episode": episode,
        "episode_timeout_s": 60.0,
        "group_filter": GroupFilter(drop_zero_variance=False),
        "poll_interval_s": 0.01,
        **overrides,
    }
    return WorkerConfig(**values)


def _take(worker: EnvRolloutWorker, n: int, *, timeout_s: float = 120.0) -> list[Any]:
    samples: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(samples) < n:
        assert time.monotonic() < deadline, f"only {len(samples)} samples in {timeout_s} s; counters {worker.counters}"
        try:
            samples.append(worker.rollout_buffer.get(timeout=0.5))
        except queue.Empty:
            worker.check_health(60)
    return samples



def test_worker_satisfies_trls_rollout_worker_protocol(tokenizer: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.async_grpo_trainer import RolloutWorkerProtocol

    worker = EnvRolloutWorker(sources=EnvSource("http://127.0.0.1:9"), backend=object(), tokenizer=tokenizer, tasks=[], rubric=echo_rubric())
    for name in ("start", "stop", "update_model_version", "check_health"):
        assert callable(getattr(worker, name))
        assert list(inspect_params(getattr(worker, name))) == list(inspect_params(getattr(RolloutWorkerProtocol, name)))[1:]
    assert isinstance(worker.rollout_buffer, queue.Queue) and isinstance(worker.metrics_queue, queue.Queue)
    with pytest.raises(WorkerError, match="not running"):
        worker.check_health(10)


def inspect_params(fn: Any) -> Any:
    import inspect

    return inspect.signature(fn).parameters


def test_samples_over_http_have_exact_logprobs_masks_and_zero_sum_advantages(
    model: Any, tokenizer: Any, completions_server: str, echo_url: str
) -> None:
    worker = EnvRolloutWorker(
        sources=EnvSource(echo_url),
        backend=CompletionsClient(completions_server),  # the vLLM client path, over real HTTP
        tokenizer=tokenizer,
        tasks=echo_rows(20),
        rubric=echo_rubric(),
        config=_config(),
    )
    worker.start()
    try:
        samples = _take(worker, 12)
    finally:
        worker.stop()
    while not worker.rollout_buffer.empty():
        samples.append(worker.rollout_buffer.get_nowait())
    assert isinstance(samples[0], rollout_sample_type())

    eos = tokenizer.eos_token_id
    checked_multi_turn = 0
    for sample in samples:
        ids = torch.tensor(sample.input_ids)
        mask = sample.completion_mask.tolist()
        with torch.no_grad():
            logits = model(ids[None]).logits[0, :-1].float() / TEMPERATURE
        recomputed = logits.log_softmax(-1)[torch.arange(len(ids) - 1), ids[1:]]
        positions = [p for p, m in enumerate(mask) if m]
        assert positions and positions[0] > 0
        old = torch.tensor(sample.old_log_probs[positions])
        assert torch.allclose(old, recomputed[torch.tensor(positions) - 1], atol=1e-4)
        assert all(math.isnan(x) for p, x in enumerate(sample.old_log_probs) if not mask[p])
        # mask 1 exactly on sampled tokens: every sampled run but a truncated last one ends the turn,
        # and everything between runs is the template's tool-result scaffolding
        runs = mask_runs(mask)
        assert len(runs) == sample.metrics["episode/turns"]
        for _, end in runs[:-1]:
            assert sample.input_ids[end - 1] == eos
        for (_, end), (start, _) in itertools.pairwise(runs):
            text = tokenizer.decode(sample.input_ids[end:start])
            assert text.startswith("\n<|im_start|>user\n<tool_response>\n") and text.endswith("<|im_start|>assistant\n")
        checked_multi_turn += len(runs) > 1
        assert sum(mask) == sample.metrics["episode/sampled_tokens"]
    assert checked_multi_turn > 0

    groups: dict[int, list[Any]] = defaultdict(list)
    for sample in samples:
        groups[sample.group_id].append(sample)
    complete = [g for g in groups.values() if len(g) == 4]
    assert complete
    for group in complete:
        assert math.isclose(sum(s.advantage for s in group), 0.0, abs_tol=1e-6)
        assert len({s.model_version for s in group}) == 1

    metrics: dict[str, Any] = {}
    while not worker.metrics_queue.empty():
        metrics.update(worker.metrics_queue.get_nowait())
    for key in ("reward_mean", "reward_std", "episode_length", "tool_calls", "tool_errors", "env_latency_s", "samples"):
        assert f"worker/{key}" in metrics


@pytest.fixture
def backend(model: Any, tokenizer: Any) -> TransformersBackend:
    return TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)


def test_staleness_follows_trls_rule_and_trls_consumer_accepts_the_samples(backend: Any, tokenizer: Any, echo_url: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.async_grpo_trainer import RolloutQueueDataset

    worker = EnvRolloutWorker(
        sources=EnvSource(echo_url), backend=backend, tokenizer=tokenizer, tasks=echo_rows(8), rubric=echo_rubric(), config=_config(max_staleness=1)
    )
    worker.start()
    try:
        _take(worker, 4)  # the buffer refills behind these
        deadline = time.monotonic() + 60
        while worker.rollout_buffer.qsize() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        buffered = worker.rollout_buffer.qsize()
        assert buffered > 0
        worker.update_model_version(2)  # everything made at version 0 is now 2 behind: dropped
        assert worker.counters["dropped_stale"] >= buffered
        fresh = _take(worker, 4)
    finally:
        worker.stop()
    assert all(s.model_version >= 1 for s in fresh)

    # TRL's own consumer (the trainer side of async GRPO) takes the samples as they are.
    trl_queue: queue.Queue[Any] = queue.Queue()
    for sample in fresh:
        trl_queue.put(sample)
    metrics: dict[str, list[float]] = defaultdict(list)
    dataset = RolloutQueueDataset(trl_queue, lambda: 2, worker.check_health, 60.0, metrics, max_staleness=1)
    rows = [row for _, row in zip(range(len(fresh)), iter(dataset), strict=False)]
    assert [r["group_id"] for r in rows] == [s.group_id for s in fresh]
    assert set(rows[0]) >= {"input_ids", "completion_mask", "old_log_probs", "advantage"}


class CountingBackend:
    """Wraps a backend; records how many requests run at once."""

    def __init__(self, inner: Any, delay_s: float = 0.0) -> None:
        self.inner, self.delay_s = inner, delay_s
        self.logprobs_mode = inner.logprobs_mode
        self.running = self.peak = 0

    def generate(self, prompts: Any, params: Any) -> Any:
        return self.inner.generate(prompts, params)

    async def agenerate(self, prompt: Any, params: Any) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.delay_s)
            return await self.inner.agenerate(prompt, params)
        finally:
            self.running -= 1


def test_demand_bounds_episodes_in_flight_and_the_buffer(backend: Any, tokenizer: Any, echo_url: str) -> None:
    counting = CountingBackend(backend, delay_s=0.02)
    config = _config(max_inflight_episodes=8, buffer_size=8)
    worker = EnvRolloutWorker(sources=EnvSource(echo_url), backend=counting, tokenizer=tokenizer, tasks=echo_rows(8), rubric=echo_rubric(), config=config)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while worker.rollout_buffer.qsize() < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a full buffer: no demand, nothing more starts
        assert worker.rollout_buffer.qsize() == 8
        assert worker._inflight == 0
        assert worker.counters["groups"] == 2
        worker.check_health(60)  # a full buffer with nothing running is healthy
    finally:
        worker.stop()
    assert 0 < counting.peak <= 8


def test_a_killed_environment_server_is_restarted_by_the_circuit_breaker(backend: Any, tokenizer: Any) -> None:
    source = EnvSource(env_dir=ECHO_DIR)
    config = _config(breaker_failures=2, episode_retries=3, buffer_size=64, max_inflight_episodes=4)
    worker = EnvRolloutWorker(sources=source, backend=backend, tokenizer=tokenizer, tasks=echo_rows(8), rubric=echo_rubric(), config=config)
    worker.start()
    try:
        _take(worker, 4)
        provider = source.provider
        assert provider is not None and provider.pid is not None
        os.killpg(provider.pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while worker.counters["env_restarts"] == 0:
            assert time.monotonic() < deadline, f"no restart; counters {worker.counters}"
            time.sleep(0.1)
        assert source.generation == 1 and provider.is_alive()
        before = worker.counters["samples"]
        deadline = time.monotonic() + 90
        while worker.counters["samples"] == before:  # episodes go on against the new server
            assert time.monotonic() < deadline, f"no samples after the restart; counters {worker.counters}"
            time.sleep(0.1)
        assert worker.counters["episode_failures"] >= 2
    finally:
        worker.stop()
    assert not source.provider.is_alive()


def test_check_health_reports_starvation_with_its_cause(backend: Any, tokenizer: Any) -> None:
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    app = create_app(load_environment(ECHO_DIR).env_cls, config=ServerConfig())
    config = _config(breaker_failures=1, breaker_cooldown_s=0.05, episode_retries=0, starve_after_failures=4)
    with serve(app) as url:
        worker = EnvRolloutWorker(sources=EnvSource(url), backend=backend, tokenizer=tokenizer, tasks=echo_rows(8), rubric=echo_rubric(), config=config)
        worker.start()
    try:  # the server is gone: a URL cannot be restarted, so every episode fails
        deadline = time.monotonic() + 60
        while True:
            try:
                worker.check_health(60)
            except WorkerStarved as e:
                assert "episodes failed in a row" in str(e)
                assert e.__cause__ is not None
                break
            assert time.monotonic() < deadline, f"never starved; counters {worker.counters}"
            time.sleep(0.05)
    finally:
        worker.stop()


class HangingBackend:
    logprobs_mode = "processed_logprobs"

    def generate(self, prompts: Any, params: Any) -> Any:
        raise AssertionError("unused")

    async def agenerate(self, prompt: Any, params: Any) -> Any:
        await asyncio.Event().wait()


def test_check_health_reports_a_stuck_worker(tokenizer: Any, echo_url: str) -> None:
    worker = EnvRolloutWorker(sources=EnvSource(echo_url), backend=HangingBackend(), tokenizer=tokenizer, tasks=echo_rows(4), rubric=echo_rubric(), config=_config())
    worker.start()
    try:
        time.sleep(3.0)
        with pytest.raises(WorkerStuck, match=r"no episode finished for \d+ s with 8 in flight"):
            worker.check_health(2.0)
    finally:
        worker.stop()


class NanBackend(HangingBackend):
    async def agenerate(self, prompt: Any, params: Any) -> Any:
        return Completion([5, 2], [-0.5, float("nan")], "stop")


def test_unusable_logprobs_stop_the_worker_and_check_health_says_why(tokenizer: Any, echo_url: str) -> None:
    worker = EnvRolloutWorker(sources=EnvSource(echo_url), backend=NanBackend(), tokenizer=tokenizer, tasks=echo_rows(4), rubric=echo_rubric(), config=_config())
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                worker.check_health(60)
            except WorkerError as e:
                assert isinstance(e.__cause__, LogprobError)
                assert "is nan" in str(e)
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        worker.stop()
    assert worker.rollout_buffer.empty()


def test_a_server_with_raw_logprobs_is_refused_at_start(model: Any, tokenizer: Any, echo_url: str) -> None:
    raw = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id, logprobs_mode="raw_logprobs")
    with serve(create_completions_app(raw, tokenizer, model_name="tiny")) as url:
        client = CompletionsClient(url)
        worker = EnvRolloutWorker(sources=EnvSource(echo_url), backend=client, tokenizer=tokenizer, tasks=echo_rows(4), rubric=echo_rubric(), config=_config())
        with pytest.raises(ServerCompatibilityError, match="processed_logprobs"):
            worker.start()
        client.close()


def test_truncated_episodes_and_small_groups_are_filtered(backend: Any, tokenizer: Any, echo_url: str) -> None:
    episode = EpisodeConfig(sampling=SamplingParams(max_tokens=2, temperature=TEMPERATURE), max_turns=3, max_completion_tokens=160)
    config = _config(episode=episode, group_filter=GroupFilter(drop_truncated=True))
    worker = EnvRolloutWorker(sources=EnvSource(echo_url), backend=backend, tokenizer=tokenizer, tasks=echo_rows(4), rubric=echo_rubric(), config=config)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while worker.counters["groups_dropped_too_small"] < 2:
            assert time.monotonic() < deadline, worker.counters
            time.sleep(0.05)
    finally:
        worker.stop()
    assert worker.counters["episodes_dropped_truncated"] >= 8
    assert worker.rollout_buffer.empty()
