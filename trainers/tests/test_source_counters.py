"""Per-source metric labels and values (`EnvRolloutWorker.source_counters`)."""

from __future__ import annotations

from openenv_trainers.source_counters import SourceCounters, source_labels


def test_labels_are_short_unique_and_one_level_of_a_metric_key() -> None:
    names = [
        "http://10.0.0.5:8000",
        "/repo/environments/echo",
        "environments/echo",
        "registry.example/openenv-wordle:latest",
        "echo[0]",
        "https://env.example/",
    ]
    assert source_labels(names) == [
        "10.0.0.5:8000", "echo#1", "echo#2", "openenv-wordle:latest", "echo[0]", "env.example",
    ]  # fmt: skip


def test_counters_become_metric_values() -> None:
    counters = SourceCounters(label="echo[1]", url="http://10.0.0.5:8000", node="abc", inflight=2, episodes=7, failures=3)
    assert counters.metrics() == {
        "worker/source/echo[1]/inflight": 2.0,
        "worker/source/echo[1]/episodes": 7.0,
        "worker/source/echo[1]/failures": 3.0,
        "worker/source/echo[1]/timeouts": 0.0,
        "worker/source/echo[1]/restarts": 0.0,
    }
