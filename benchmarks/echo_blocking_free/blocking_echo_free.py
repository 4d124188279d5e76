"""`benchmarks/echo_blocking` declared free-threaded (`THREAD_AFFINITY = False`): its sync calls
run on any thread of the shared pool, as every `BLOCKING` environment's did by default before
sessions were pinned to a thread. bench_echo.py `--free-threaded-echo` serves it beside the
default, to measure what pinning costs."""

from __future__ import annotations

from pathlib import Path

from openenv_sdk.loader import import_ref

BlockingEchoEnvironment = import_ref(
    Path(__file__).resolve().parents[1] / "echo_blocking", "blocking_echo:BlockingEchoEnvironment", what="environment"
)


class FreeThreadedEchoEnvironment(BlockingEchoEnvironment):  # type: ignore[misc, valid-type]
    """The BLOCKING echo, its calls on any pool thread."""

    name = "echo-blocking-free"
    THREAD_AFFINITY = False
