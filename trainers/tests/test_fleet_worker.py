"""EnvRolloutWorker over a RayFleet on a 2-raylet local Ray cluster: one source (and breaker) per
server; a lost node's episodes fail, counted on its source only, the survivor's go on, and a new node
brings its server back."""

from __future__ import annotations

import contextlib
import queue
import time
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from openenv_trainers.echo_task import echo_rows  # noqa: E402
from openenv_trainers.generation import TransformersBackend  # noqa: E402
from openenv_trainers.sources import EnvSource  # noqa: E402
from openenv_trainers.worker import EnvRolloutWorker  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from openenv_sdk.fleet import RayFleet  # noqa: E402

from .conftest import ECHO_DIR, echo_rubric  # noqa: E402
from .test_worker import _config, _take  # noqa: E402

SLOT = {"env_slot": 1.0}


def _wait(predicate: Any, what: str, worker: EnvRolloutWorker, timeout_s: float = 90) -> None:
    """Wait for `predicate`, consuming samples as a trainer would (a full buffer stops the worker)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what}; counters {worker.counters}"
        try:
            while True:
                worker.rollout_buffer.get_nowait()
        except queue.Empty:
            time.sleep(0.1)


def _drain_metrics(worker: EnvRolloutWorker) -> dict[str, Any]:
    """The last value of every metric the worker has pushed and the trainer has not taken yet."""
    last: dict[str, Any] = {}
    with contextlib.suppress(queue.Empty):
        while True:
            last.update(worker.metrics_queue.get_nowait())
    return last


def test_worker_over_a_fleet_survives_a_lost_node(model: Any, tokenizer: Any) -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1, "resources": SLOT, "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
        },
    )
    node = cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        with RayFleet(ECHO_DIR, size=2, num_cpus=1, memory_bytes=64 * 2**20, resources=SLOT, startup_timeout_s=5) as fleet:
            sources = [EnvSource(provider=member) for member in fleet.members()]
            config = _config(breaker_failures=2, episode_retries=3, buffer_size=64, max_inflight_episodes=4)
            backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
            worker = EnvRolloutWorker(
                sources=sources, backend=backend, tokenizer=tokenizer, tasks=echo_rows(8), rubric=echo_rubric(), config=config
            )
            worker.start()
            try:
                _take(worker, 4)
                counters = worker.source_counters
                assert set(counters) == {s.name for s in sources} == {"echo[0]", "echo[1]"}
                lost = next(s.name for s in sources if s.node == node.node_id)
                kept = next(s.name for s in sources if s.name != lost)
                old_url = counters[lost].url
                assert counters[lost].node == node.node_id and counters[kept].node == cluster.head_node.node_id
                kept_before = counters[kept].episodes
                cluster.remove_node(node)
                before = worker.counters["samples"]
                _wait(lambda: worker.counters["samples"] > before + 4, "no samples from the surviving node", worker)
                # The lost node's failures are its source's alone; the survivor's episodes go on (the
                # survivor may deliver its samples before the lost node's sessions have failed).
                _wait(lambda: counters[lost].failures >= config.breaker_failures, "the lost node's failures", worker)
                assert counters[kept].failures == counters[kept].timeouts == 0
                assert counters[kept].episodes > kept_before
                _wait(lambda: counters[kept].inflight > 0, "no episode in flight on the survivor", worker)
                _wait(lambda: counters[lost].inflight == 0, "episodes still in flight on the lost node", worker)
                cluster.add_node(num_cpus=1, resources=SLOT)
                # the worker restarts its source while the node is gone; the fleet's own replacement
                # (the actor restarted on the new node) is what brings the second server back
                _wait(lambda: len(fleet.urls) == 2, "the lost server was not replaced", worker)
                assert worker.counters["env_restarts"] >= 1
                before = worker.counters["samples"]
                _wait(lambda: worker.counters["samples"] > before, "no samples after the replacement", worker)
                lost_before = counters[lost].episodes
                _wait(lambda: counters[lost].episodes > lost_before, "no episode finished on the replaced server", worker)
                assert counters[lost].restarts >= 1 and counters[kept].restarts == 0
                assert counters[lost].node not in (None, node.node_id) and counters[lost].url != old_url
                assert counters[kept].failures == 0
                # The same figures reach TRL's log through the metrics queue.
                logged = _drain_metrics(worker)
                assert logged[f"worker/source/{lost}/failures"] >= config.breaker_failures
                assert logged[f"worker/source/{kept}/failures"] == 0.0
                assert logged[f"worker/source/{kept}/episodes"] > kept_before
                assert f"worker/source/{lost}/inflight" in logged
            finally:
                worker.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()
