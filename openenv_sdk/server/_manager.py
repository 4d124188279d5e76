"""`SessionManager`: creates sessions up to a capacity, finds them by id or MCP token, reaps idle ones.

Its limits are the server's `ServerConfig`, read from there and nowhere re-declared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..environment import Environment
from ..types import ErrorCode
from ._config import ServerConfig
from ._protocol import RequestRefused
from ._protocols import Connection
from ._session import Session
from ._worker import AbandonedCalls, AffinityPool, LoopHandoff, WorkerPool, guard_sync

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["SessionManager", "SessionObserver"]


class SessionObserver(Protocol):
    """Told what sessions do (the server's `/metrics`). Every method is quick and never raises."""

    def session_opened(self, kind: str) -> None:
        """A session of this kind (`http`, `ws`) was created."""

    def session_closed(self, kind: str, reason: str) -> None:
        """A session ended: `closed` (by its client or the server) or `reaped` (idle)."""

    def call_done(self, call: str, seconds: float, outcome: str, tool: str | None) -> None:
        """A `reset`, `step` or `tool` call ended: `ok`, a tool error type, or a protocol error code
        (lowercase); `tool` is the tool's name, `<unknown>` for a name the environment lacks."""


class SessionManager:
    """Creates sessions up to a capacity, finds them by id or MCP token, and reaps idle ones.

    A session not reset within `unreset_grace_s` of its creation (`POST /sessions`, a WebSocket
    that only connects) is reaped then, not after `idle_timeout_s`; so is one made by
    `POST /reset` without a session, `unreset_grace_s` after the connection that made it closed,
    unless a request from another connection named it (`bind_to_connection`); every session counts against
    `max_sessions`. While `max_abandoned_threads` calls that timed out still run, no session is
    created.
    """

    def __init__(
        self,
        config: ServerConfig,
        env_factory: Callable[[], Environment[Any, Any, Any]],
        *,
        concurrent: bool = True,
    ) -> None:
        """Args:
            config: the server's limits (`max_sessions`, `idle_timeout_s`, `unreset_grace_s`,
                `tool_timeout_s`, `max_abandoned_threads`, `max_transcript_bytes`,
                `max_tool_result_bytes`).
            env_factory: makes one environment per session.
            concurrent: False holds one session at most, whatever `config.max_sessions` says
                (an environment class without `SUPPORTS_CONCURRENT_SESSIONS`).
        """
        self.config = config
        self.env_factory = env_factory
        self.max_sessions = config.max_sessions if concurrent else 1
        self.sessions: dict[str, Session] = {}
        self.by_token: dict[str, Session] = {}
        self.abandoned = AbandonedCalls(config.max_abandoned_threads)
        self.workers = WorkerPool()
        """The threads that run free-threaded (`THREAD_AFFINITY = False`) sessions' blocking sync
        calls, and a `close()` run beside a call that hangs."""
        self.pinned = AffinityPool()
        """The threads that sessions' blocking sync calls are pinned to (the default affinity)."""
        self._handoff: LoopHandoff | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.observer: SessionObserver | None = None
        """Told of sessions opened and closed and of every call (the server's metrics)."""

    @property
    def idle_timeout_s(self) -> float | None:
        return self.config.idle_timeout_s

    @property
    def unreset_grace_s(self) -> float | None:
        return self.config.unreset_grace_s

    @property
    def active(self) -> int:
        return len(self.sessions)

    def handoff(self, loop: asyncio.AbstractEventLoop) -> LoopHandoff:
        """The way back to `loop` for results of calls run on worker threads."""
        handoff = self._handoff
        if handoff is None or handoff.loop is not loop:
            handoff = self._handoff = LoopHandoff(loop)
        return handoff

    @property
    def unreset(self) -> int:
        """Sessions not reset yet (they count against `max_sessions`)."""
        return sum(1 for s in self.sessions.values() if not s.has_reset)

    async def create(self, kind: str) -> Session:
        if len(self.sessions) >= self.max_sessions:
            raise RequestRefused(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(self.sessions)} of {self.max_sessions} sessions in use",
                details={"active_sessions": len(self.sessions), "max_sessions": self.max_sessions},
            )
        if self.abandoned.full:
            raise RequestRefused(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {self.abandoned.count} calls that timed out still run on their threads "
                f"(max_abandoned_threads is {self.abandoned.limit}); new sessions wait until some end",
                details={"abandoned_threads": self.abandoned.count, "max_abandoned_threads": self.abandoned.limit},
            )
        session_id = secrets.token_hex(16)
        try:
            env = guard_sync(self.env_factory)
        except Exception as e:
            raise RequestRefused(
                ErrorCode.FACTORY_ERROR, f"Could not create the environment: {type(e).__name__}: {e}"
            ) from e
        session = Session(self, session_id, env, kind)
        self.sessions[session_id] = session
        self.by_token[session.mcp_token] = session
        if self.observer is not None:
            self.observer.session_opened(kind)
        return session

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            idle_timeout_s = self.config.idle_timeout_s
            reaped = f", reaped after {idle_timeout_s:g} s idle" if idle_timeout_s is not None else ""
            raise RequestRefused(
                ErrorCode.SESSION_NOT_FOUND,
                f"No session {session_id[:64]!r}: it was closed{reaped}, or never existed. "
                f"Create one with POST /sessions or POST /reset.",
            )
        return session

    def bind_to_connection(self, session: Session, connection: Connection | None) -> None:
        """Hold `session` only as long as `connection` (the one whose request made it) or another
        client that names it: when the connection closes and no request from another connection
        has named the session, it is reaped `unreset_grace_s` later (unless one names it by then).
        Without a `Connection` (a server other than `ServerHttpProtocol`'s), nothing changes."""
        if connection is None:
            return
        session.connection = connection

        def closed() -> None:
            if session.connection is connection:
                session.orphaned_at = time.monotonic()

        connection.on_close(closed)

    def get_by_token(self, token: str) -> Session | None:
        return self.by_token.get(token)

    async def close(self, session_id: str, *, reason: str = "closed") -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        self.by_token.pop(session.mcp_token, None)
        if self.observer is not None:
            self.observer.session_closed(session.kind, reason)
        await session.aclose()

    async def close_all(self) -> None:
        """Close every session, all at once (a server that stops waits for the slowest, not the sum)."""
        await asyncio.gather(*(self.close(session_id) for session_id in list(self.sessions)), return_exceptions=True)
        self.workers.shutdown()
        self.pinned.shutdown()

    def start_reaper(self) -> None:
        if (self.config.idle_timeout_s is not None or self.config.unreset_grace_s is not None) and self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_forever(), name="openenv-idle-reaper")

    async def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None

    async def _reap_forever(self) -> None:
        limits = [t for t in (self.config.idle_timeout_s, self.config.unreset_grace_s) if t is not None]
        interval_s = max(0.05, min(min(limits) / 4, 30.0))
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.reap_idle()
            except Exception:  # the reaper must outlive any one session's failure
                logger.exception("the idle reaper failed; it goes on")

    async def reap_idle(self) -> int:
        """Close sessions idle longer than `idle_timeout_s`, and sessions not reset within
        `unreset_grace_s` of their creation; returns how many."""
        idle_timeout_s, unreset_grace_s = self.config.idle_timeout_s, self.config.unreset_grace_s
        now = time.monotonic()
        idle = []
        for s in list(self.sessions.values()):
            if s.in_call:
                continue
            if not s.has_reset and unreset_grace_s is not None and now - s.created_at > unreset_grace_s:
                idle.append((s, f"not reset within {unreset_grace_s:g} s"))
            elif s.orphaned_at is not None and now - s.orphaned_at > (unreset_grace_s or 0.0):
                idle.append((s, "the connection that made it closed, and no other client named it"))
            elif idle_timeout_s is not None and now - s.last_active > idle_timeout_s:
                idle.append((s, f"{idle_timeout_s:g} s idle"))
        for session, why in idle:
            logger.info("session %s: reaped: %s", session.id[:8], why)
            if session.on_reap is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(session.on_reap(), timeout=5.0)
            await self.close(session.id, reason="reaped")
        return len(idle)
