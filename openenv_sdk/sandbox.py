"""Running an agent's commands: bounded in time, output, memory and processes.

`run_command` is what sandboxed environments (coding, terminal, mini-SWE) call for every agent
command. Whatever the command does (a fork bomb, an endless loop, a 1 GB print, deleting its
working directory), it costs that command at most: it is killed with every process it
started, its output is cut with a marker saying how much, and the server goes on.

When the server runs as root (sandboxed environments' images do), commands run as an
unprivileged user (`sandbox_user`), so an agent can neither signal the server nor read files
the server keeps to itself; without root they run as the server's own user, and there is no
privilege boundary (a development set-up, not a sandbox).

What root can do in a sandboxed container: the image keeps only the SETUID, SETGID, CHOWN and
KILL capabilities, so the server cannot read or delete files the sandbox user made private.
Fill a workspace before handing it to the sandbox user (`chown`), and take it back (`chown`)
before deleting it. Known limits: sessions of one server share the sandbox user, so they share
its process limit; a process that leaves the command's session (`setsid` plus a double fork)
escapes the command's clean-up, so environments sweep the sandbox user's leftover processes
between commands (see environments/terminal and environments/coding).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

__all__ = ["CommandResult", "SandboxLimits", "run_command"]

TRUNCATION_MARKER = "\n[... {cut} bytes truncated ...]\n"


class SandboxLimits(BaseModel):
    """Limits applied to each command. Every field has a finite default."""

    timeout_s: float = Field(default=30.0, gt=0, description="Wall-clock limit; the command and its children are killed.")
    max_output_bytes: int = Field(default=64 * 1024, ge=256, description="Bytes kept of stdout and of stderr each.")
    memory_bytes: int | None = Field(default=1024**3, description="Address-space limit per process (RLIMIT_AS).")
    max_processes: int | None = Field(
        default=128, description="Processes the command may add for its user (RLIMIT_NPROC, above those running)."
    )
    kill_after_output_bytes: int = Field(
        default=64 * 1024**2, ge=1024, description="Output (both streams) past which the command is killed."
    )
    max_file_bytes: int | None = Field(default=256 * 1024**2, description="Largest file a command may write.")
    sandbox_user: str | None = Field(default="nobody", description="User to run as when the server is root.")


class CommandResult(BaseModel):
    """What a command did."""

    stdout: str
    stderr: str
    exit_code: int = Field(description="The exit status; -N when killed by signal N; 124 on timeout.")
    timed_out: bool = False
    stdout_truncated_bytes: int = 0
    stderr_truncated_bytes: int = 0
    duration_s: float

    def render(self) -> str:
        """One text for an agent: output, errors, and the exit status."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append(f"[stderr]\n{self.stderr.rstrip(chr(10))}")
        status = f"[exit code {self.exit_code}]"
        if self.timed_out:
            status = f"[timed out after {self.duration_s:.1f} s; killed]"
        parts.append(status)
        return "\n".join(parts)


def _user_ids(name: str | None) -> tuple[int, int] | None:
    """The sandbox user's ids when the server is root; None when commands keep the server's user.

    Raises:
        KeyError: the server is root and the sandbox user does not exist (never run as root then).
    """
    if name is None or os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def _count_processes(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def _preexec(limits: SandboxLimits, ids: tuple[int, int] | None, nproc: int | None, cwd: str) -> None:
    # Runs in the child between fork and exec: only async-signal-safe work.
    os.setsid()
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
    if not entered:
        # A root without CAP_DAC_OVERRIDE (a sandboxed container) cannot enter a workspace that
        # only the sandbox user can; that user can.
        os.chdir(cwd)


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


def run_command(
    command: str | Sequence[str],
    *,
    cwd: str | Path,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> CommandResult:
    """Run one command under `limits`; never raises for anything the command does.

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
    started = time.monotonic()
    if not cwd.is_dir():
        return CommandResult(
            stdout="",
            stderr=f"working directory {cwd} does not exist (was it deleted?)",
            exit_code=126,
            duration_s=0.0,
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
        nproc = _count_processes(ids[0] if ids else os.getuid()) + limits.max_processes
    argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
    environment = dict(env) if env is not None else {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
    }
    try:
        proc = subprocess.Popen(
            argv,
            env=environment,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: _preexec(limits, ids, nproc, str(cwd)),
            close_fds=True,
        )
    except (OSError, subprocess.SubprocessError) as e:  # SubprocessError: preexec failed (e.g. setuid)
        return CommandResult(stdout="", stderr=f"could not start: {e}", exit_code=127, duration_s=0.0)
    if stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin.encode())
        proc.stdin.close()
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
        kill_session(proc.pid)
    try:
        exit_code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_session(proc.pid)
        exit_code = proc.wait()
    kill_session(proc.pid)  # background children left behind by the command
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


def _text(data: bytearray, cut: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + TRUNCATION_MARKER.format(cut=cut) if cut else text
