"""Pacing end to end: the real worker (tiny model, the echo environment over a real server) feeding
TRL's own consumer (`RolloutQueueDataset`) in a thread that trains slower than the worker samples."""

from __future__ import annotations

import threading
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.generation import TransformersBackend
from openenv_trainers.pacing import PacingConfig
from openenv_trainers.sources import EnvSource
from openenv_trainers.worker import EnvRolloutWorker

from .conftest import echo_rubric
from .test_worker import _config


@dataclass
class Run:
    counters: dict[str, int]
    trainer_dropped: int
    trained: int
    steps: int
    wait_s: float
    pacing: dict[str, float]

    @property
    def stale_fraction(self) -> float:
        dropped = self.counters["dropped_stale"] + self.trainer_dropped
        return dropped / max(self.counters["generated"], 1)


def _train(worker: EnvRolloutWorker, *, steps: int, samples_per_step: int, step_s: float, max_staleness: int) -> Run:
    """TRL's consumer in a thread: `samples_per_step` samples, `step_s` of 'compute', then the next version."""
    from accelerate import PartialState

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.async_grpo_trainer import RolloutQueueDataset

    PartialState()  # TRL's dataset logs long waits and drops through accelerate's logger, as in the trainer

    version = [1]
    metrics: dict[str, list[float]] = defaultdict(list)
    dataset = RolloutQueueDataset(
        worker.rollout_buffer,
        lambda: version[0],
        worker.check_health,
        60.0,
        metrics,
        max_staleness=max_staleness,
        poll_interval_s=0.5,
    )
    done = {"trained": 0, "steps": 0}
    failure: list[BaseException] = []

    def trainer() -> None:
        try:
            rows = iter(dataset)
            for _ in range(steps):
                for _ in range(samples_per_step):
                    next(rows)
                    done["trained"] += 1
                time.sleep(step_s)  # forward, backward, optimizer
                version[0] += 1
                worker.update_model_version(version[0])  # as TRL's weight sync does
                done["steps"] += 1
        except BaseException as e:  # reported by the test's thread
            failure.append(e)

    worker.update_model_version(1)  # TRL syncs once before starting the worker
    worker.start()
    thread = threading.Thread(target=trainer, daemon=True)
    try:
        thread.start()
        thread.join(timeout=300)
        assert not thread.is_alive(), f"the trainer did not finish in 300 s; {done}, counters {worker.counters}"
        assert not failure, failure
    finally:
        worker.stop()
    return Run(
        counters=dict(worker.counters),
        trainer_dropped=len(metrics["sample/dropped_stale_total"]),
        trained=done["trained"],
        steps=done["steps"],
        wait_s=dataset.wait_s + 0.0,
        pacing=worker.pacing.metrics(),
    )


@pytest.mark.parametrize("paced", [True, False], ids=["paced", "unpaced"])
def test_pacing_keeps_stale_drops_low_with_a_real_worker_and_trls_consumer(
    paced: bool, model: Any, tokenizer: Any, echo_url: str
) -> None:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
    config = _config(
        num_generations=4, max_inflight_episodes=8, buffer_size=64, max_staleness=1, pacing=PacingConfig(enabled=paced)
    )
    worker = EnvRolloutWorker(
        sources=EnvSource(echo_url),
        backend=backend,
        tokenizer=tokenizer,
        tasks=echo_rows(64),
        rubric=echo_rubric(),
        config=config,
    )
    run = _train(worker, steps=8, samples_per_step=8, step_s=2.0, max_staleness=1)
    assert run.steps == 8 and run.trained == 64
    assert run.counters["generated"] >= run.trained
    if paced:
        assert run.stale_fraction <= 0.15, run
        assert run.pacing["worker/paused_s"] > 0  # it did hold back
        assert run.pacing["worker/pacing/samples_per_version"] == pytest.approx(8, abs=1)
    else:
        assert run.stale_fraction > 0.3, run  # what the paced run is measured against
        assert run.pacing["worker/paused_s"] == 0
    assert run.counters["admitted"] >= run.counters["groups"] > 0
