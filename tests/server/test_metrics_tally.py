"""`ServerMetrics` tallies calls in plain numbers and adds them to its counters and histograms
when the registry is read: what a scrape shows must be what observing each call one by one
(prometheus-client's `Counter.inc`, `Histogram.observe`) would show."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from openenv_sdk import Environment, create_app, tool
from openenv_sdk.server._metrics import _BUCKETS_S, ServerMetrics

# on a bucket's bound, either side of it, past the last, zero: each lands where `observe` puts it
DURATIONS_S = [0.0, 0.001, 0.0010001, 0.004, 0.005, 0.3, 1.0, 59.9, 300.0, 301.0, 1e6, 0.0007]


class Tools(Environment):
    @tool
    def ping(self) -> str:
        """Answer."""
        return "pong"


def _samples(text: str, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(prefix) and not s.name.endswith("_created")
    }


def _server_metrics() -> ServerMetrics:
    metrics = create_app(Tools).state.openenv_metrics
    assert isinstance(metrics, ServerMetrics)
    return metrics


def test_a_scrape_shows_what_observing_each_call_would() -> None:
    metrics = _server_metrics()
    reference = CollectorRegistry()
    steps = Counter("openenv_steps", "step calls, by outcome.", ["outcome"], registry=reference)
    tools = Counter("openenv_tool_calls", "Tool calls.", ["tool", "outcome"], registry=reference)
    seconds = Histogram("openenv_call_duration_seconds", "d", ["call"], buckets=_BUCKETS_S, registry=reference)
    tool_seconds = Histogram("openenv_tool_call_duration_seconds", "d", ["tool"], buckets=_BUCKETS_S, registry=reference)
    for i, duration in enumerate(DURATIONS_S):
        outcome = "ok" if i % 3 else "validation_error"
        metrics.call_done("step", duration, outcome, None)
        steps.labels(outcome).inc()
        seconds.labels("step").observe(duration)
        metrics.call_done("tool", duration, "ok", "ping")
        tools.labels("ping", "ok").inc()
        seconds.labels("tool").observe(duration)
        tool_seconds.labels("ping").observe(duration)
        if i == 5:  # a scrape in the middle: what was tallied is added once, not again later
            generate_latest(metrics.registry)
    prefixes = ("openenv_steps", "openenv_tool_calls", "openenv_call_duration", "openenv_tool_call_duration")
    ours, want = generate_latest(metrics.registry).decode(), generate_latest(reference).decode()
    for prefix in prefixes:
        got, expected = _samples(ours, prefix), _samples(want, prefix)
        assert got.keys() == expected.keys(), prefix
        for key, value in expected.items():
            assert math.isclose(got[key], value, rel_tol=1e-9), (key, got[key], value)
    assert _samples(ours, "openenv_call_duration_seconds_count")[
        ("openenv_call_duration_seconds_count", (("call", "step"),))
    ] == len(DURATIONS_S)


def test_nothing_is_added_twice_by_repeated_scrapes() -> None:
    metrics = _server_metrics()
    metrics.call_done("reset", 0.002, "ok", None)
    first = generate_latest(metrics.registry).decode()
    second = generate_latest(metrics.registry).decode()
    assert _samples(first, "openenv_resets") == _samples(second, "openenv_resets")
    assert _samples(second, "openenv_resets_total") == {("openenv_resets_total", (("outcome", "ok"),)): 1.0}
