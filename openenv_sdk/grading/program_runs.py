"""Run the agent's programs for a check, each in a fresh sandbox, and hand back what they did.

A check that must run something the agent wrote (its script, its program, `python3 its.py`)
must not run it itself: the program would run with the check's uid in the check's pid
namespace, where it could signal or ptrace the check, rewrite its files, or outlive its call
and change files while later conditions are read. `ProgramRunServer` serves such requests on a
unix socket that the check's sandbox sees; the check calls the stdlib-only client
(`run_program.py`, `CLIENT_SCRIPT`) where it would have run the program. Each request runs:

- as a new command of the grading `Sandbox` (`Sandbox.popen`): in fresh pid, mount, IPC, UTS and
  network namespaces of its own, with no network: the check's processes are not in its world, so
  it can neither see nor signal nor trace them (the check runs in another pid namespace);
- seeing the system read-only, the sandbox's folder and the `folders` the server was given (the
  copy of the workspace, a scratch folder), nothing else: keep the check's own files, its home
  (with its git config) and its temp folder out of the sandbox's folder and mount them for the
  check's command only;
- under the sandbox's limits, with its own deadline; every process it started ends with it (its
  pid namespace ends with its first process, or is killed at the deadline), so nothing of it is
  left when the check reads the files again.

Runs may overlap (a test's subprocess while a remote-module worker is alive): each is its own
namespace. They run as the sandbox's uid, the check's: files pass both ways without changing
hands; what that uid shares (its process limit) is the check's to give.

Its stdout, stderr and exit code are relayed to the client, which judges them on the trusted
side. The wire format: frames of one type byte, a 4-byte big-endian length and the payload;
the client sends `R` (the request, JSON), then `I` (stdin data) and `E` (stdin closed); the
server answers `O`/`X` (stdout/stderr data), then `Z` (`{"exit_code", "timed_out"}`) or `F`
(`{"error"}`, a refused request).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openenv_sdk.grading import run_program
from openenv_sdk.grading.run_program import read_frame, write_frame
from openenv_sdk.sandbox import Mount, Sandbox

__all__ = ["CLIENT_SCRIPT", "ProgramRunServer", "RunRequest"]

CLIENT_SCRIPT = Path(run_program.__file__).resolve()
"""The client (standard library only): copy it where the check can run it with `python3 -I -S`."""

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BWRAP_ENV = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
"""bubblewrap's own environment (it starts as root): fixed, never the request's. The program's
environment is set inside the sandbox by `env -i`."""
REQUEST_WAIT_S = 10.0
MAX_ARGV_BYTES = 256 * 1024
MAX_ENV_BYTES = 256 * 1024
MAX_WAITING = 16
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RunRequest(BaseModel):
    """One program run, as the client asks for it."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str] = Field(min_length=1, max_length=4096, description="The program and its arguments.")
    cwd: str = Field(description="Its working directory: inside one of the server's folders (as the check sees it).")
    timeout_s: float = Field(gt=0, description="Its wall-clock limit, in seconds (at most the server's).")
    env: dict[str, str] | None = Field(default=None, description="Its whole environment (default: the server's).")
    read_only: bool = Field(
        default=False,
        description="The folders read-only: for a long-lived run (a remote-module worker) whose code must not "
        "change files while the check reads them.",
    )

    @field_validator("argv")
    @classmethod
    def _argv(cls, argv: list[str]) -> list[str]:
        if any("\0" in word for word in argv) or sum(len(word.encode()) for word in argv) > MAX_ARGV_BYTES:
            raise ValueError(f"arguments must hold no NUL and come to at most {MAX_ARGV_BYTES} bytes")
        if argv[0].startswith("-") or "=" in argv[0]:
            raise ValueError(f"the program {argv[0]!r} starts with '-' or holds '='")
        return argv

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str] | None) -> dict[str, str] | None:
        if env is None:
            return None
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name) or "\0" in value:
                raise ValueError(f"bad environment variable {name!r}")
        if sum(len(k) + len(v) for k, v in env.items()) > MAX_ENV_BYTES:
            raise ValueError(f"the environment is over {MAX_ENV_BYTES} bytes")
        return env


class ProgramRunServer:
    """Serves a check's requests to run the agent's programs, each in a fresh sandbox (module doc).

    Use it as a context manager around the check: `close()` stops serving and ends the runs in progress.
    """

    def __init__(
        self,
        socket_path: str | Path,
        *,
        sandbox: Sandbox,
        folders: Sequence[Mount],
        env: Mapping[str, str] | None = None,
        max_timeout_s: float = 60.0,
        max_output_bytes: int = 1024 * 1024,
    ) -> None:
        """Args:
        socket_path: where to listen (a path the check's sandbox sees; its folder must exist).
        sandbox: the sandbox whose commands the runs are (the check's); its folder is in every run's world.
        folders: what each run sees besides the system and the sandbox's folder, and where a run
            may start (its `cwd` must be inside one of them).
        env: the programs' environment when the request brings none (default: PATH, LANG,
            TMPDIR=/tmp, HOME the first folder).
        max_timeout_s: the longest a request may ask for.
        max_output_bytes: bytes relayed of stdout and of stderr each; the rest is dropped.

        Raises:
            ValueError: no folder, or a folder that is not a directory.
        """
        if not folders:
            raise ValueError("folders is empty: a run needs at least the folder it works in")
        for mount in folders:
            if not mount.source.is_dir():
                raise ValueError(f"{mount.source} is not a directory")
        self.socket_path = Path(socket_path)
        self.sandbox = sandbox
        self.folders = list(folders)
        self.env = dict(env) if env is not None else {
            "PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "TMPDIR": "/tmp", "HOME": str(self._target(self.folders[0])),
        }  # fmt: skip
        self.max_timeout_s = max_timeout_s
        self.max_output_bytes = max_output_bytes
        self.runs = 0
        self._lock = threading.Lock()
        self._waiting = threading.BoundedSemaphore(MAX_WAITING)
        self._closed = threading.Event()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _target(mount: Mount) -> Path:
        return mount.target or mount.source

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, *, socket_owner: tuple[int, int] | None = None) -> ProgramRunServer:
        """Listen; `socket_owner` (uid, gid) alone may connect (mode 0600); default: the sandbox's user."""
        if socket_owner is None and self.sandbox.privileged:
            socket_owner = (self.sandbox.uid, self.sandbox.gid)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        if socket_owner is not None and os.geteuid() == 0:
            os.chown(self.socket_path, *socket_owner)
        listener.listen(MAX_WAITING)
        listener.settimeout(0.2)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="program-runs", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; a run in progress is killed. Idempotent."""
        self._closed.set()
        with self._lock:
            running = list(self._running)
        for proc in running:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def __enter__(self) -> ProgramRunServer:
        return self if self._listener is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- serving ----------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._waiting.acquire(blocking=False):
                with conn:
                    self._refuse(conn, f"more than {MAX_WAITING} requests at once")
                continue
            threading.Thread(target=self._serve, args=(conn,), name="program-run", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(REQUEST_WAIT_S)
                try:
                    frame = read_frame(conn)
                    if frame is None or frame[0] != b"R":
                        raise ValueError("the first frame must be the request (R)")
                    request = RunRequest.model_validate_json(frame[1])
                    cwd = self._check(request)
                except (OSError, ValueError, ValidationError) as e:
                    self._refuse(conn, str(e))
                    return
                conn.settimeout(None)
                if self._closed.is_set():
                    self._refuse(conn, "the server is closing")
                    return
                self._run(conn, request, cwd)
        finally:
            self._waiting.release()

    def _check(self, request: RunRequest) -> Path:
        if request.timeout_s > self.max_timeout_s:
            raise ValueError(f"timeout_s {request.timeout_s:g} is over the limit of {self.max_timeout_s:g}")
        if not os.path.isabs(request.cwd):
            raise ValueError(f"cwd must be an absolute path, got {request.cwd!r}")
        cwd = Path(os.path.normpath(request.cwd))
        if not any(cwd.is_relative_to(self._target(m)) for m in self.folders):
            allowed = ", ".join(str(self._target(m)) for m in self.folders)
            raise ValueError(f"cwd {request.cwd} is outside the folders a program may work in ({allowed})")
        return cwd

    @staticmethod
    def _refuse(conn: socket.socket, error: str) -> None:
        with contextlib.suppress(OSError):
            write_frame(conn, b"F", json.dumps({"error": error}).encode())

    def _run(self, conn: socket.socket, request: RunRequest, cwd: Path) -> None:
        send_lock = threading.Lock()
        env = request.env if request.env is not None else self.env
        argv = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()), *request.argv]
        try:
            mounts = [m.model_copy(update={"writable": m.writable and not request.read_only}) for m in self.folders]
            proc = self.sandbox.popen(argv, cwd=cwd, env=BWRAP_ENV, mounts=mounts, stderr=subprocess.PIPE)
        except (OSError, RuntimeError) as e:
            self._refuse(conn, f"the program could not start: {e}")
            return
        with self._lock:
            self.runs += 1
            self._running.add(proc)
        try:
            outcome = self._relay(conn, proc, request.timeout_s, send_lock)
        finally:
            with self._lock:
                self._running.discard(proc)
        with contextlib.suppress(OSError):
            write_frame(conn, b"Z", json.dumps(outcome).encode(), send_lock)

    def _relay(
        self, conn: socket.socket, proc: subprocess.Popen[bytes], timeout_s: float, send_lock: threading.Lock
    ) -> dict[str, object]:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        client_gone = threading.Event()
        pumps = [
            threading.Thread(target=self._pump_out, args=(proc.stdout, b"O", conn, send_lock), daemon=True),
            threading.Thread(target=self._pump_out, args=(proc.stderr, b"X", conn, send_lock), daemon=True),
        ]
        feeder = threading.Thread(target=self._pump_in, args=(conn, proc, client_gone), daemon=True)
        for thread in (*pumps, feeder):
            thread.start()
        deadline = time.monotonic() + timeout_s
        timed_out = False
        while proc.poll() is None:
            if client_gone.is_set() or self._closed.is_set():
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()  # bubblewrap: its pid namespace goes with it
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        for thread in pumps:
            thread.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        code = proc.returncode if proc.returncode is not None else -9
        return {"exit_code": 124 if timed_out else code, "timed_out": timed_out}

    def _pump_out(self, stream: object, kind: bytes, conn: socket.socket, send_lock: threading.Lock) -> None:
        fd = stream.fileno()  # type: ignore[attr-defined]
        sent = 0
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            if sent >= self.max_output_bytes:
                continue  # drained, not relayed
            chunk = chunk[: self.max_output_bytes - sent]
            sent += len(chunk)
            try:
                write_frame(conn, kind, chunk, send_lock)
            except OSError:
                continue

    @staticmethod
    def _pump_in(conn: socket.socket, proc: subprocess.Popen[bytes], client_gone: threading.Event) -> None:
        stdin = proc.stdin
        assert stdin is not None
        try:
            while True:
                frame = read_frame(conn)
                if frame is None:
                    client_gone.set()  # the client died: nobody waits for this run
                    return
                kind, payload = frame
                if kind == b"E":
                    stdin.close()  # then keep reading, to see the client go
                elif kind == b"I" and not stdin.closed:
                    stdin.write(payload)
                    stdin.flush()
        except (OSError, ValueError):
            return
        finally:
            with contextlib.suppress(OSError):
                stdin.close()
