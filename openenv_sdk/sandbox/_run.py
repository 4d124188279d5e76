"""Running one process to completion under limits: time, output, memory, processes.

`run_command` is the unisolated runner (the server's own namespaces; a switch to an
unprivileged user when the server is root). `Sandbox.run` (in `_sandbox.py`) wraps the same
loop around bubblewrap. Whatever the command does (a fork bomb, an endless loop, a 1 GB print),
it costs that command at most: it is killed with every process it started, its output is cut
with a marker saying how much, and the caller goes on.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from ._limits import CommandResult, SandboxLimits

__all__ = ["kill_session", "run_command"]

TRUNCATION_MARKER = "\n[... {cut} bytes truncated ...]\n"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def _user_ids(name: str | None) -> tuple[int, int] | None:
    """The sandbox user's ids when the server is root; None when commands keep the server's user.

    Raises:
        KeyError: the server is root and the sandbox user does not exist (never run as root then).
    """
    if name is None or os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def existing_user(preferred: str) -> str:
    """The user unisolated commands run as when the server is root: `preferred` where it exists
    on this host, else `nobody` (never root: `UnisolatedSandbox` and `run_command` refuse it)."""
    try:
        pwd.getpwnam(preferred)
    except KeyError:
        return "nobody"
    return preferred


def count_processes(uid: int) -> int:
    """Threads run by `uid` (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def apply_limits(limits: SandboxLimits, ids: tuple[int, int] | None, nproc: int | None, cwd: str | None) -> None:
    """Between fork and exec (async-signal-safe work only): a new session, rlimits, the user switch."""
    os.setsid()
    entered = cwd is None
    if cwd is not None:
        try:  # as root first: the workspace may sit under folders only root can cross
            os.chdir(cwd)
            entered = True
        except OSError:
            entered = False
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.max_file_bytes is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if ids is not None:
        os.setgroups([])
        os.setgid(ids[1])
        os.setuid(ids[0])
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if not entered and cwd is not None:
        # A root without CAP_DAC_OVERRIDE (a container) cannot enter a folder only the user can.
        os.chdir(cwd)


def limit_process(pid: int, limits: SandboxLimits, nproc: int | None) -> None:
    """`apply_limits`'s rlimits, set from outside on a started process (root, or our own child)."""
    if limits.memory_bytes is not None:
        resource.prlimit(pid, resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.max_file_bytes is not None:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
    if nproc is not None:
        resource.prlimit(pid, resource.RLIMIT_NPROC, (nproc, nproc))


def _session_members(sid: int) -> list[int]:
    """Every process in session `sid` (a fork bomb's children included)."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def kill_session(sid: int, *, rounds: int = 20) -> None:
    """SIGKILL the process group and every process of session `sid`, until none is left."""
    for _ in range(rounds):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(sid, signal.SIGKILL)
        members = _session_members(sid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """Write `data` to a command's stdin and close it; a command that exits first just ends the write."""
    with contextlib.suppress(OSError):  # BrokenPipeError included
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def run_process(
    argv: Sequence[str],
    *,
    limits: SandboxLimits,
    env: Mapping[str, str],
    preexec: Callable[[], None] | None,
    stdin: str | bytes | None = None,
    kill: Callable[[int], None] = kill_session,
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
    admit: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> CommandResult:
    """Start `argv`, feed `stdin`, keep bounded output, and kill (`kill(pid)`) at the limits.
    `pass_fds` stay open in the child (bubblewrap's seccomp program). Without a `preexec`, the
    child starts in a session of its own; `admit(proc)`, run right after the start, does what a
    preexec would (a sandbox's cgroup and limits); if it raises, the command is killed, not run."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=preexec,
            start_new_session=preexec is None,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except (OSError, subprocess.SubprocessError) as e:  # SubprocessError: preexec failed (e.g. setuid)
        return CommandResult(stdout="", stderr=f"could not start: {e}", exit_code=127, duration_s=0.0)
    if admit is not None:
        try:
            admit(proc)
        except Exception as e:
            kill(proc.pid)
            proc.communicate()
            return CommandResult(stdout="", stderr=f"could not start: {e}", exit_code=127, duration_s=0.0)
    if stdin is not None and proc.stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        # fed from a thread: a command that writes a full pipe of output before reading its input
        # (an error message quoting a 100 kB argument) would otherwise block both sides past any limit
        threading.Thread(target=_feed, args=(proc.stdin, data), name="sandbox-stdin", daemon=True).start()
    kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    cut = {"stdout": 0, "stderr": 0}
    timed_out = False
    output_flood = False
    deadline = started + limits.timeout_s
    with selectors.DefaultSelector() as selector:
        assert proc.stdout is not None and proc.stderr is not None
        selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
        selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
        open_streams = 2
        exited_at: float | None = None
        while open_streams:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.2:
                break  # the command is done; a background child still holds its output open
            for key, _ in selector.select(timeout=min(remaining, 0.1 if exited_at else 0.5)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                buf = kept[key.data]
                room = limits.max_output_bytes - len(buf)
                if room > 0:
                    buf += chunk[:room]
                cut[key.data] += max(0, len(chunk) - max(room, 0))
                if cut["stdout"] + cut["stderr"] > limits.kill_after_output_bytes:
                    output_flood = True
                    break
            if output_flood:
                break
    if timed_out or output_flood:
        kill(proc.pid)
    try:
        exit_code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill(proc.pid)
        exit_code = proc.wait()
    kill(proc.pid)  # background children left behind by the command
    proc.stdout.close()
    proc.stderr.close()
    stderr = _text(kept["stderr"], cut["stderr"])
    if output_flood:
        stderr += f"\n[killed: output exceeded {limits.kill_after_output_bytes} bytes]"
    return CommandResult(
        stdout=_text(kept["stdout"], cut["stdout"]),
        stderr=stderr,
        exit_code=124 if timed_out else exit_code,
        timed_out=timed_out,
        stdout_truncated_bytes=cut["stdout"],
        stderr_truncated_bytes=cut["stderr"],
        duration_s=time.monotonic() - started,
    )


def run_command(
    command: str | Sequence[str],
    *,
    cwd: str | Path,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> CommandResult:
    """Run one command under `limits`, without namespaces; never raises for anything it does.

    This is the unisolated runner: the command shares the server's view of processes, files
    and network (it runs as `limits.sandbox_user` when the server is root). Agent commands go
    through `Sandbox.run`; this serves trusted helpers and the explicit opt-out.

    Args:
        command: a shell command line (run with `/bin/bash -c`), or an argument list.
        cwd: the working directory; if it no longer exists, the command is not run and the
            result says so (exit code 126).
        limits: time, output, memory and process limits.
        env: the command's environment (defaults to a minimal PATH/HOME/LANG).
        stdin: text fed to the command's standard input.
    """
    limits = limits or SandboxLimits()
    cwd = Path(cwd)
    if not cwd.is_dir():
        return CommandResult(
            stdout="", stderr=f"working directory {cwd} does not exist (was it deleted?)", exit_code=126, duration_s=0.0
        )
    try:
        ids = _user_ids(limits.sandbox_user)
    except KeyError:
        return CommandResult(
            stdout="",
            stderr=f"sandbox user {limits.sandbox_user!r} does not exist; refusing to run the command as root",
            exit_code=126,
            duration_s=0.0,
        )
    nproc = None
    if limits.max_processes is not None:
        nproc = count_processes(ids[0] if ids else os.getuid()) + limits.max_processes
    argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
    environment = dict(env) if env is not None else {"PATH": DEFAULT_PATH, "HOME": str(cwd), "LANG": "C.UTF-8"}
    return run_process(
        argv,
        limits=limits,
        env=environment,
        stdin=stdin,
        preexec=lambda: apply_limits(limits, ids, nproc, str(cwd)),
    )


def _text(data: bytearray, cut: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + TRUNCATION_MARKER.format(cut=cut) if cut else text
