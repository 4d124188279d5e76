"""Starting a worker process, and exchanging one line with it under a deadline."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from openenv_sdk.grading._errors import ProtocolError, RemoteTimeout, WorkerDied

__all__ = ["Spawn", "prefixed_spawn", "spawn_subprocess"]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class Spawn(Protocol):
    """Starts the worker: how the trusted side runs it (plainly, in a sandbox, as another user)."""

    def __call__(self, argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        """Start `argv` with `cwd` as its working directory and return the started process.

        Args:
            argv: the worker's command, `[python, "-I", "-S", "-c", <script>, <config JSON>]`;
                run it as it is, or wrapped (e.g. `["bwrap", ..., "--chdir", dir, "--", *argv]`).
            cwd: the directory that holds the solution's files. The worker imports them from its own
                working directory, so a wrapper that mounts `cwd` elsewhere must start it there.

        Returns:
            The process, with `stdin=PIPE` and `stdout=PIPE` (the channel). `stderr` may be a
            pipe (then it is drained and its tail kept as the solution's output), or anything else.
            `kill()` must end the worker and every process it started: use a new session or
            process group, or a sandbox that dies with its first process.
        """
        ...


class _GroupPopen(subprocess.Popen[bytes]):
    """A process started in its own session: `kill()` kills its whole process group."""

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        super().kill()


def spawn_subprocess(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    """The default `Spawn`: `argv` as a plain subprocess in a new session, with a minimal environment.

    It isolates nothing but the channel: use it where the whole grading run is already sandboxed,
    or in tests. `kill()` kills the worker's process group.
    """
    return _GroupPopen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8"},
    )


def prefixed_spawn(prefix: Sequence[str]) -> Spawn:
    """A `Spawn` that runs `[*prefix, *argv]` (e.g. a `bwrap ... --` or `setpriv ... --` command)."""
    words = [str(word) for word in prefix]

    def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        return spawn_subprocess([*words, *argv], cwd)

    return spawn


def describe_exit(code: int | None) -> str:
    if code is None:
        return "closed its channel"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Channel:
    """One worker process: one request line out, one reply line back, under a deadline."""

    def __init__(self, process: subprocess.Popen[bytes], *, max_line_bytes: int, output_limit_bytes: int) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("the spawned worker needs stdin=PIPE and stdout=PIPE")
        self.process = process
        self._max_line = max_line_bytes
        self._in = process.stdin.fileno()
        self._out = process.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buffer = bytearray()
        self._output = bytearray()
        self._output_limit = output_limit_bytes
        self._output_lock = threading.Lock()
        self._drain: threading.Thread | None = None
        if process.stderr is not None:
            self._drain = threading.Thread(target=self._drain_output, name="remote-worker-output", daemon=True)
            self._drain.start()

    def _drain_output(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._output_lock:
                self._output += chunk
                if len(self._output) > self._output_limit:
                    del self._output[: len(self._output) - self._output_limit]

    def output(self) -> str:
        """The tail of what the worker (the solution) wrote to stdout and stderr."""
        with self._output_lock:
            return self._output.decode("utf-8", "replace")

    def exchange(self, data: bytes, timeout_s: float) -> bytes:
        """Send `data` (one line) and return the next line the worker writes (without its newline).

        Raises:
            RemoteTimeout: no full line within `timeout_s`.
            WorkerDied: the worker exited or closed its channel.
            ProtocolError: the line is longer than the limit.
        """
        deadline = time.monotonic() + timeout_s
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._in, view)
            except BlockingIOError:
                self._wait(self._in, deadline, timeout_s, write=True)
                continue
            except (BrokenPipeError, OSError):
                raise self._died() from None
            view = view[written:]
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > self._max_line:
                raise ProtocolError(f"the worker sent a line longer than {self._max_line} bytes")
            self._wait(self._out, deadline, timeout_s, write=False)
            try:
                chunk = os.read(self._out, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                raise self._died()
            self._buffer += chunk

    def _wait(self, fd: int, deadline: float, timeout_s: float, *, write: bool) -> None:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            readable, writable, _ = select.select([] if write else [fd], [fd] if write else [], [], remaining)
            if readable or writable:
                return
        raise RemoteTimeout(f"the solution did not answer within {timeout_s:g} s{self._tail()}")

    def _died(self) -> WorkerDied:
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        return WorkerDied(f"the worker {describe_exit(code)} before answering{self._tail()}")

    def _tail(self) -> str:
        if self._drain is not None:
            self._drain.join(timeout=0.05)
        tail = self.output()[-1500:].strip()
        return f"; the solution's last output:\n{tail}" if tail else ""

    def close(self) -> None:
        """Kill the worker (and, through the spawn's contract, all it started) and close the pipes."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self._drain is not None:
            self._drain.join(timeout=1)
        if self.process.stderr is not None:
            with contextlib.suppress(OSError):
                self.process.stderr.close()
