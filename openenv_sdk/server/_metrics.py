"""`GET /metrics`: the server's Prometheus metrics (text exposition format).

Each app has its own registry. Counted as they happen (the session manager's observer):
sessions opened and closed (`reason`: `closed` or `reaped`), and every `reset`, `step` and tool
call with its outcome and duration. Read at scrape time: sessions held, MCP sessions, abandoned
threads, and the process's garbage-collection pauses by generation (`_gc.PAUSES`). Tool labels
are the environment's declared tools (any other name is `<unknown>`), so an agent cannot grow
the label set.

An orchestrator route: with an orchestrator token set, a scraper sends it (Prometheus:
`authorization: {credentials: <token>}` in the scrape config).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ._gc import PAUSES

if TYPE_CHECKING:
    from ._state import ServerState

__all__ = ["ServerMetrics", "router"]

router = APIRouter(tags=["metrics"])

_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _Gauges(Collector):
    """What is read from the server's state at each scrape."""

    def __init__(self, state: ServerState) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        sessions = self._state.sessions
        yield GaugeMetricFamily("openenv_sessions_active", "Sessions held now.", value=sessions.active)
        yield GaugeMetricFamily("openenv_sessions_max", "Sessions the server may hold.", value=sessions.max_sessions)
        yield GaugeMetricFamily("openenv_sessions_unreset", "Sessions not reset yet.", value=sessions.unreset)
        yield GaugeMetricFamily("openenv_mcp_sessions_active", "MCP sessions open at /mcp.", value=self._state.mcp_sessions())
        yield GaugeMetricFamily(
            "openenv_abandoned_threads", "Sync calls that timed out and still run.", value=sessions.abandoned.count
        )
        pauses = CounterMetricFamily(
            "openenv_gc_pause_seconds", "Time the garbage collector held the process, by generation (2: full).",
            labels=["generation"],
        )  # fmt: skip
        collections = CounterMetricFamily(
            "openenv_gc_collections", "Garbage collections, by generation (2: full).", labels=["generation"]
        )
        longest = GaugeMetricFamily(
            "openenv_gc_longest_pause_seconds", "The longest single collection, by generation.", labels=["generation"]
        )
        for generation in range(3):
            pauses.add_metric([str(generation)], PAUSES.seconds[generation])
            collections.add_metric([str(generation)], PAUSES.collections[generation])
            longest.add_metric([str(generation)], PAUSES.longest_s[generation])
        yield from (pauses, collections, longest)


class _Tally:
    """One (call, outcome, tool)'s calls since the last scrape: their count, the sum of their
    seconds, and how many fell in each histogram bucket (the last is +Inf)."""

    __slots__ = ("count", "seconds", "buckets", "histograms", "counter")

    def __init__(self, histograms: tuple[Histogram, ...], counter: Counter) -> None:
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(_BUCKETS_S) + 1)
        self.histograms = histograms
        self.counter = counter


class ServerMetrics:
    """The app's registry, and the session manager's observer (`SessionObserver`).

    A call's duration and outcome are tallied in plain numbers (`call_done`, once per step,
    on the event loop) and added to the registry's counters and histograms when the registry
    is read (`flush`, from `/metrics`, on the loop too: no lock needed): what a scrape shows is
    the same, and a step costs three calls, not the dozen (locks, checks, a bucket search in
    Python) of a counter and a histogram updated one by one."""

    def __init__(self, state: ServerState) -> None:
        # (call, outcome, tool) -> its tally; bounded: tools are the declared ones or
        # `<unknown>`, outcomes a fixed set
        self._tallies: dict[tuple[str, str, str | None], _Tally] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Flush(self))  # first: the registry collects in registration order
        self.registry.register(_Gauges(state))
        r = self.registry
        self.opened = Counter("openenv_sessions_opened", "Sessions created.", ["kind"], registry=r)
        self.closed = Counter("openenv_sessions_closed", "Sessions ended.", ["kind", "reason"], registry=r)
        self.resets = Counter("openenv_resets", "reset calls, by outcome.", ["outcome"], registry=r)
        self.steps = Counter("openenv_steps", "step calls, by outcome.", ["outcome"], registry=r)
        self.tool_calls = Counter(
            "openenv_tool_calls", "Tool calls (MCP and step), by tool and outcome.", ["tool", "outcome"], registry=r
        )
        self.seconds = Histogram(
            "openenv_call_duration_seconds", "Duration of reset, step and tool calls.", ["call"],
            buckets=_BUCKETS_S, registry=r,
        )  # fmt: skip
        self.tool_seconds = Histogram(
            "openenv_tool_call_duration_seconds", "Duration of tool calls, by tool.", ["tool"],
            buckets=_BUCKETS_S, registry=r,
        )  # fmt: skip

    def session_opened(self, kind: str) -> None:
        self.opened.labels(kind).inc()

    def session_closed(self, kind: str, reason: str) -> None:
        self.closed.labels(kind, reason).inc()

    def call_done(self, call: str, seconds: float, outcome: str, tool: str | None) -> None:
        tally = self._tallies.get((call, outcome, tool))
        if tally is None:  # labels() takes a lock and builds a key: once per label set, not per call
            tally = self._tallies[(call, outcome, tool)] = _Tally(*self._label_children(call, outcome, tool))
        tally.count += 1
        tally.seconds += seconds
        tally.buckets[bisect_left(_UPPER_BOUNDS_S, seconds)] += 1  # the first bound >= seconds, as `observe`

    def flush(self) -> None:
        """Add the calls tallied since the last flush to the registry's counters and histograms."""
        for tally in self._tallies.values():
            if not tally.count:
                continue
            count, seconds, buckets = tally.count, tally.seconds, tally.buckets
            tally.count, tally.seconds, tally.buckets = 0, 0.0, [0] * len(buckets)
            for histogram in tally.histograms:
                histogram._sum.inc(seconds)  # what `observe` adds to, in bulk
                for bucket, n in zip(histogram._buckets, buckets, strict=True):
                    if n:
                        bucket.inc(n)
            tally.counter.inc(count)

    def _label_children(self, call: str, outcome: str, tool: str | None) -> tuple[tuple[Histogram, ...], Counter]:
        if call == "reset":
            return (self.seconds.labels(call),), self.resets.labels(outcome)
        if call == "step":
            return (self.seconds.labels(call),), self.steps.labels(outcome)
        name = tool or "<unknown>"
        return (self.seconds.labels(call), self.tool_seconds.labels(name)), self.tool_calls.labels(name, outcome)


_UPPER_BOUNDS_S = (*_BUCKETS_S, float("inf"))


class _Flush(Collector):
    """Flushes the tallies into the registry's metrics when the registry is read."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self._metrics.flush()
        return iter(())


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """Prometheus metrics: sessions, resets, steps, tool calls and errors, durations."""
    server_metrics: ServerMetrics = request.app.state.openenv_metrics
    return Response(generate_latest(server_metrics.registry), media_type=CONTENT_TYPE_LATEST)
