"""Serve an environment folder in a local process: `openenv serve ENV_DIR` on a free loopback port.

The server runs in its own process group, so `stop()` ends it with everything it started.
Its output goes to a temporary file; when it dies or never becomes healthy, the error quotes
its last lines. It is stopped by `stop()`, on leaving the `with` block, when the provider is
garbage-collected, and at interpreter exit.
"""

from __future__ import annotations

import collections
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..errors import ProviderError
from ..types import ORCHESTRATOR_TOKEN_VAR
from .base import Provider
from .health import wait_for_health

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "LocalProcessProvider", "free_port"]

DEFAULT_STARTUP_TIMEOUT_S = 60.0
_LOG_TAIL_LINES = 40

if TYPE_CHECKING:
    _Finalizer = weakref.finalize[[subprocess.Popen[bytes], IO[bytes], float], "LocalProcessProvider"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that is free now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _terminate(process: subprocess.Popen[bytes], stop_timeout_s: float) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not ended in `stop_timeout_s`."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(stop_timeout_s)
    # Whatever the server itself started (workers, reloaders) goes with the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(stop_timeout_s)


def _cleanup(process: subprocess.Popen[bytes], log: IO[bytes], stop_timeout_s: float) -> None:
    try:
        _terminate(process, stop_timeout_s)
    finally:
        log.close()
        with contextlib.suppress(OSError):
            os.unlink(log.name)


class LocalProcessProvider(Provider):
    """Runs `openenv serve ENV_DIR` as a subprocess and gives its URL.

    Example:
        >>> with LocalProcessProvider("environments/echo") as provider:  # doctest: +SKIP
        ...     httpx.get(f"{provider.base_url}/health")
    """

    def __init__(
        self,
        env_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        stop_timeout_s: float = 5.0,
        env: Mapping[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        python: str | None = None,
        orchestrator_token: bool = True,
    ) -> None:
        """Describe the server; nothing runs until `start()`.

        Args:
            env_dir: the environment folder (holds `openenv.yaml`).
            host: the address to bind; loopback by default.
            port: the port; default a free one, chosen at each start.
            startup_timeout_s: longest wait, in seconds, for `GET /health` to answer 200.
            stop_timeout_s: grace period, in seconds, between SIGTERM and SIGKILL on stop.
            env: environment variables added to this process's for the server.
            extra_args: more `openenv serve` options, e.g. `("--max-sessions", "4")`.
            python: the interpreter that runs the server; default this one.
            orchestrator_token: start the server with a new orchestrator token (see
                `orchestrator_token`): only clients given this provider can reset, step or close.
                False serves it open, for clients that cannot send the token (OpenEnv's).

        Raises:
            ValueError: `startup_timeout_s` or `stop_timeout_s` is not positive.
        """
        if not startup_timeout_s > 0:
            raise ValueError(f"startup_timeout_s must be positive, got {startup_timeout_s}")
        if not stop_timeout_s > 0:
            raise ValueError(f"stop_timeout_s must be positive, got {stop_timeout_s}")
        self.env_dir = Path(env_dir)
        self.host = host
        self._port = port
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._env = dict(env or {})
        self._extra_args = tuple(extra_args)
        self._python = python or sys.executable
        self._use_token = orchestrator_token
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._finalizer: _Finalizer | None = None
        self._base_url: str | None = None
        self._token: str | None = None
        self._lock = threading.Lock()

    # --- public ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str | None:
        """`http://host:port` of the running server, or `None` before `start()` / after `stop()`."""
        return self._base_url

    @property
    def orchestrator_token(self) -> str | None:
        """The running server's orchestrator token (new at every start; `None` when stopped).
        Clients given this provider send it; the environment's own code never sees it."""
        return self._token

    @property
    def host_address(self) -> str:
        """The address at which the server's processes reach this host: loopback (same machine)."""
        return "127.0.0.1"

    @property
    def pid(self) -> int | None:
        """The server process's id (also its process group's), or `None`."""
        return self._process.pid if self._process is not None else None

    def start(self) -> str:
        """Start the server, wait until `/health` answers, and return its base URL.

        Raises:
            ProviderError: the folder is missing, or the server exited or did not become
                healthy within `startup_timeout_s` (the message quotes its last output).
        """
        with self._lock:
            if self._base_url is not None and self.is_alive():
                return self._base_url
            self._stop_locked()
            return self._start()

    def stop(self) -> None:
        """Stop the server (its whole process group). Safe to call twice, or before `start`."""
        with self._lock:
            self._stop_locked()

    def is_alive(self) -> bool:
        """Whether the server's process is still running.

        A killed multi-threaded server shows as a zombie while its other threads are still being
        torn down, and `poll()` cannot reap it until they are: that process is not running."""
        process = self._process
        if process is None or process.poll() is not None:
            return False
        try:
            with open(f"/proc/{process.pid}/stat", encoding="ascii", errors="replace") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # no /proc (not Linux): poll() has answered
            return True
        return state not in ("Z", "X")

    def exit_code(self) -> int | None:
        """The server's exit status once it has ended, else `None`."""
        return self._process.poll() if self._process is not None else None

    def logs_tail(self, lines: int = _LOG_TAIL_LINES) -> list[str]:
        """The server's last lines of output (stdout and stderr together)."""
        if self._log is None or self._log.closed:
            return []
        with open(self._log.name, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
        return list(collections.deque(text.splitlines(), maxlen=lines))

    def __repr__(self) -> str:
        state = self._base_url or ("stopped" if self._process is None else "starting")
        return f"<LocalProcessProvider {self.env_dir} {state}>"

    # --- internals ----------------------------------------------------------------------------

    def _start(self) -> str:
        folder = self.env_dir.resolve()
        if not (folder / "openenv.yaml").is_file():
            what = "does not exist" if not folder.exists() else "has no openenv.yaml"
            raise ProviderError(f"Cannot serve {folder}: the folder {what}")
        port = self._port if self._port is not None else free_port(self.host)
        command = [
            self._python,
            "-m",
            "openenv_sdk.cli.main",
            "serve",
            str(folder),
            "--host",
            self.host,
            "--port",
            str(port),
            "--log-level",
            "warning",
            *self._extra_args,
        ]
        token = secrets.token_urlsafe(32) if self._use_token else None
        env = {
            **os.environ,
            "COLUMNS": "200",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
            **self._env,
        }
        env.pop(ORCHESTRATOR_TOKEN_VAR, None)
        if token is not None:
            env[ORCHESTRATOR_TOKEN_VAR] = token  # the server removes it from its environment at startup
        else:
            command.append("--no-auth")  # open on purpose (orchestrator_token=False); never by default
        log = tempfile.NamedTemporaryFile(prefix="openenv-serve-", suffix=".log", delete=False)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            log.close()
            os.unlink(log.name)
            raise ProviderError(f"Could not run {command[0]}: {e}") from e
        self._process, self._log = process, log
        self._finalizer = weakref.finalize(self, _cleanup, process, log, self.stop_timeout_s)
        base_url = f"http://{self.host}:{port}"
        outcome = wait_for_health(base_url, timeout_s=self.startup_timeout_s, is_alive=self.is_alive)
        if outcome != "healthy":
            if outcome == "dead":
                why = f"exited with code {process.poll()} before it became healthy"
            else:
                why = f"did not answer {base_url}/health within {self.startup_timeout_s:g} s (startup_timeout_s)"
            tail = self.logs_tail()
            self._stop_locked()
            output = "\n".join(tail) if tail else "(no output)"
            raise ProviderError(f"openenv serve {folder} {why}. Its last output:\n{output}")
        self._base_url, self._token = base_url, token
        return base_url

    def _stop_locked(self) -> None:
        finalizer, self._finalizer = self._finalizer, None
        self._process = None
        self._log = None
        self._base_url = None
        self._token = None
        if finalizer is not None:
            finalizer()
