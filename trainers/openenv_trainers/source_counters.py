"""`SourceCounters`: one environment source's episodes, as `EnvRolloutWorker` counts them.

Over a fleet, every source is one server on one node, so these are the per-node figures a
training run watches: where episodes run now, where they finish, where they fail. The worker
keeps one per source (`EnvRolloutWorker.source_counters`) and pushes them to its
`metrics_queue` as `worker/source/<label>/<counter>`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["SourceCounters", "source_labels"]

COUNTERS = ("inflight", "episodes", "failures", "timeouts", "restarts")
"""The numeric fields, in the order they are pushed."""


@dataclass(kw_only=True)
class SourceCounters:
    """One source's episodes since the worker started; the worker's loop updates them."""

    label: str
    """The source's name, shortened and made unique among the worker's sources (`source_labels`); metric keys use it."""
    url: str | None = None
    """The server's URL when an episode last started on it (a restart gives a new one)."""
    node: str | None = None
    """The node the server ran on then: a fleet member's Ray node id; `None` for other sources."""
    inflight: int = 0
    """Episodes running on this source now (an attempt counts until it ends, failed or not)."""
    episodes: int = 0
    """Episodes that finished on it."""
    failures: int = 0
    """Attempts that failed on it (a lost server, a refused connection, a typed server error)."""
    timeouts: int = 0
    """Attempts that ran past `episode_timeout_s` on it."""
    restarts: int = 0
    """Times the worker's circuit breaker replaced its server."""

    def metrics(self) -> dict[str, float]:
        """The counters as metric values (`worker/source/<label>/<counter>`), for TRL's log."""
        return {f"worker/source/{self.label}/{name}": float(getattr(self, name)) for name in COUNTERS}


def source_labels(names: Iterable[str]) -> list[str]:
    """Short, unique metric labels for the sources' names, one level of a metric key each.

    A URL loses its scheme and a path or image keeps its last part (`http://10.0.0.5:8000` ->
    `10.0.0.5:8000`, `/repo/environments/echo` -> `echo`); a repeated label gets `#<position>`.
    """
    short = [_short(name) for name in names]
    return [f"{label}#{i}" if short.count(label) > 1 else label for i, label in enumerate(short)]


def _short(name: str) -> str:
    for scheme in ("http://", "https://"):
        name = name.removeprefix(scheme)
    return name.rstrip("/").rsplit("/", 1)[-1] or "source"
