"""Run `openenv serve FOLDER` as a child process on a free loopback port, for runtime checks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import httpx

from ..errors import ProviderError

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "LocalServer", "free_port"]

DEFAULT_STARTUP_TIMEOUT_S = 30.0
_STOP_GRACE_S = 5.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """`openenv serve FOLDER --port <free>` in a child process; a context manager.

    `start()` returns the base URL once `GET /health` answers 200, and `stop()` (always called
    on leaving the `with` block) terminates the process group it started.

    Args:
        env_dir: the environment folder.
        startup_timeout_s: the longest wait for `/health`, in seconds.
        python: the interpreter that runs the server (default: this one).
    """

    def __init__(self, env_dir: str | Path, *, startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
                 python: str = sys.executable) -> None:
        if startup_timeout_s <= 0:
            raise ValueError(f"startup_timeout_s must be positive, got {startup_timeout_s}")
        self.env_dir = Path(env_dir).resolve()
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self.base_url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> str:
        """Start the server and wait until it is healthy.

        Raises:
            ProviderError: the process exited, or `/health` did not answer in time; the message
                carries the last lines of its output.
        """
        port = free_port()
        self._log = tempfile.TemporaryFile(prefix="openenv-validate-")
        command = [self.python, "-m", "openenv_sdk.cli.main", "serve", str(self.env_dir),
                   "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--log-level", "warning"]
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self._process.poll() is not None:
                    raise ProviderError(f"`openenv serve` exited with status {self._process.returncode} before "
                                        f"/health answered; its output:\n{self.output_tail()}")
                try:
                    if client.get(base_url + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ProviderError(f"{base_url}/health did not answer 200 within {self.startup_timeout_s:.0f}s; "
                                        f"the server's output:\n{self.output_tail()}")
                time.sleep(0.1)
        self.base_url = base_url
        return base_url

    def output_tail(self, lines: int = 20) -> str:
        """The last `lines` lines the server printed."""
        if self._log is None:
            return ""
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace")
        return "\n".join(f"  | {line}" for line in text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the server's process group (SIGTERM, then SIGKILL after a grace period)."""
        process, self._process, self.base_url = self._process, None, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)  # the group we made with start_new_session
                process.wait(timeout=_STOP_GRACE_S)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=_STOP_GRACE_S)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
