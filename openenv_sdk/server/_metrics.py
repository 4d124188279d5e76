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


class ServerMetrics:
    """The app's registry, and the session manager's observer (`SessionObserver`)."""

    def __init__(self, state: ServerState) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
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
        # (call, outcome, tool) -> its histograms and counter; bounded: tools are the declared
        # ones or `<unknown>`, outcomes a fixed set
        self._children: dict[tuple[str, str, str | None], tuple[tuple[Histogram, ...], Counter]] = {}

    def session_opened(self, kind: str) -> None:
        self.opened.labels(kind).inc()

    def session_closed(self, kind: str, reason: str) -> None:
        self.closed.labels(kind, reason).inc()

    def call_done(self, call: str, seconds: float, outcome: str, tool: str | None) -> None:
        key = (call, outcome, tool)
        children = self._children.get(key)
        if children is None:  # labels() takes a lock and builds a key: once per label set, not per call
            children = self._children[key] = self._label_children(call, outcome, tool)
        for histogram in children[0]:
            histogram.observe(seconds)
        children[1].inc()

    def _label_children(self, call: str, outcome: str, tool: str | None) -> tuple[tuple[Histogram, ...], Counter]:
        if call == "reset":
            return (self.seconds.labels(call),), self.resets.labels(outcome)
        if call == "step":
            return (self.seconds.labels(call),), self.steps.labels(outcome)
        name = tool or "<unknown>"
        return (self.seconds.labels(call), self.tool_seconds.labels(name)), self.tool_calls.labels(name, outcome)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(request: Request) -> Response:
    """Prometheus metrics: sessions, resets, steps, tool calls and errors, durations."""
    server_metrics: ServerMetrics = request.app.state.openenv_metrics
    return Response(generate_latest(server_metrics.registry), media_type=CONTENT_TYPE_LATEST)
