"""`SessionManager(config)`: the server's limits come from `ServerConfig` alone, and a session
closed before any call leaves no thread behind."""

from __future__ import annotations

import asyncio
import inspect
import threading

from fixtures.envs import Recorder, probe_class, probe_factory
from fixtures.servers import wait_until

from openenv_sdk import ServerConfig
from openenv_sdk.server._manager import SessionManager


def test_no_server_default_is_declared_twice() -> None:
    parameters = inspect.signature(SessionManager).parameters
    assert list(parameters) == ["config", "env_factory", "concurrent"]
    assert [name for name, p in parameters.items() if p.default is not inspect.Parameter.empty] == ["concurrent"]


def test_the_limits_are_the_configs() -> None:
    config = ServerConfig(max_sessions=3, idle_timeout_s=7.0, unreset_grace_s=None, max_abandoned_threads=5)
    manager = SessionManager(config, probe_factory())
    assert (manager.max_sessions, manager.idle_timeout_s, manager.unreset_grace_s) == (3, 7.0, None)
    assert manager.abandoned.limit == 5
    assert SessionManager(config, probe_factory(), concurrent=False).max_sessions == 1


def test_the_session_takes_its_bounds_from_the_config() -> None:
    async def scenario() -> tuple[int, int]:
        manager = SessionManager(ServerConfig(max_transcript_bytes=8192), probe_factory())
        session = await manager.create("ws")
        try:
            return session._transcript.max_bytes, len(manager.sessions)
        finally:
            await manager.close_all()

    assert asyncio.run(scenario()) == (8192, 1)


def test_a_pinned_session_closed_before_any_call_ends_its_thread() -> None:
    """`close()` is the first call into the environment: the thread started for it must end too."""
    recorder = Recorder()
    pinned = probe_class("PinnedClose", THREAD_AFFINITY=True)

    async def scenario() -> str:
        manager = SessionManager(ServerConfig(), probe_factory(pinned, recorder=recorder))
        session = await manager.create("ws")
        await manager.close(session.id)
        return f"openenv-{session.id[:8]}"

    name = asyncio.run(scenario())
    assert recorder.wait_closed(1)

    def session_threads() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == name and t.is_alive()]

    assert wait_until(lambda: not session_threads(), timeout_s=5), session_threads()
