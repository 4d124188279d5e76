"""`environments/echo` with `BLOCKING = True`, the default of every environment: its sync calls
run off the event loop, on worker threads. bench_echo.py serves it to measure that path (the
thread hop per call, and the threads that 10,000 sessions hold)."""

from __future__ import annotations

from pathlib import Path

from openenv_sdk.loader import import_ref

EchoEnvironment = import_ref(
    Path(__file__).resolve().parents[2] / "environments" / "echo", "echo_env:EchoEnvironment", what="environment"
)


class BlockingEchoEnvironment(EchoEnvironment):  # type: ignore[misc, valid-type]
    """The echo environment, its sync calls on worker threads."""

    name = "echo-blocking"
    BLOCKING = True
