"""ProgramRunServer and its client: the agent's programs a check runs, each in a fresh sandbox.

Real bubblewrap sandboxes, a real unix socket, the real stdlib client run as a process (as a
check runs it). As root (as CI runs), each run has a uid of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.grading.program_runs import CLIENT_SCRIPT, ProgramRunServer
from openenv_sdk.sandbox import Mount, Sandbox, SandboxLimits, isolation_mode


@pytest.fixture
def check_sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """The check's sandbox: its folder holds what programs may see (work/, scratch/)."""
    isolation_mode()  # fails with what is missing, never skips
    tmp_path.chmod(0o755)
    with Sandbox(limits=SandboxLimits(timeout_s=20, sandbox_user=None), name="check", base_dir=tmp_path) as sandbox:
        yield sandbox


@pytest.fixture
def folders(check_sandbox: Sandbox, tmp_path: Path) -> tuple[Path, Path, Path]:
    work, scratch = check_sandbox.workspace, check_sandbox.make_dir("scratch")
    private = tmp_path / "private"  # the check's own, outside the sandbox's folder
    private.mkdir(mode=0o755)
    (private / "secret.txt").write_text("check's own\n")
    (private / "secret.txt").chmod(0o644)
    return work, scratch, private


@pytest.fixture
def server(check_sandbox: Sandbox, folders: tuple[Path, Path, Path], tmp_path: Path) -> Iterator[ProgramRunServer]:
    work, scratch, _ = folders
    with ProgramRunServer(
        tmp_path / "run.sock",
        sandbox=check_sandbox,
        folders=[Mount(source=work, writable=True), Mount(source=scratch, writable=True)],
        max_timeout_s=20,
    ) as running:
        yield running


def run(server: ProgramRunServer, cwd: Path, *argv: str, stdin: bytes = b"", timeout_s: float = 10) -> subprocess.CompletedProcess[bytes]:
    client = [sys.executable, "-I", "-S", str(CLIENT_SCRIPT), "--socket", str(server.socket_path), "--cwd", str(cwd)]
    return subprocess.run(
        [*client, "--timeout-s", str(timeout_s), "--", *argv], input=stdin, capture_output=True, timeout=timeout_s + 30
    )


def test_output_exit_code_and_stdin_come_back(server: ProgramRunServer, folders: tuple[Path, Path, Path]) -> None:
    work = folders[0]
    done = run(server, work, "/bin/sh", "-c", 'read x; echo "out $x"; echo "err $1" >&2; exit 3', "sh", "arg", stdin=b"in\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out in\n", b"err arg\n")
    big = run(server, work, "/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a")
    assert big.returncode == 0 and len(big.stdout) == 1024 * 1024  # relayed up to the limit


def test_files_the_program_writes_are_the_checks_afterwards(
    server: ProgramRunServer, check_sandbox: Sandbox, folders: tuple[Path, Path, Path]
) -> None:
    work, scratch, _ = folders
    (work / "input.txt").write_text("data\n")
    check_sandbox.give(work / "input.txt")
    done = run(server, scratch, "/bin/sh", "-c", f"cat {work}/input.txt > copy.txt && rm {work}/input.txt && id -u")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == check_sandbox.uid  # the sandbox's uid, never root
    assert (scratch / "copy.txt").read_text() == "data\n"
    assert not (work / "input.txt").exists()


def test_the_program_sees_neither_the_check_nor_its_files(
    server: ProgramRunServer, check_sandbox: Sandbox, folders: tuple[Path, Path, Path]
) -> None:
    work, _, private = folders
    marker = f"check-process-{os.getpid()}"
    # a process of the check: the sandbox's uid, in a sandbox command of its own
    check = check_sandbox.popen(["/bin/bash", "-c", f"exec -a {marker} sleep 30"], mounts=[Mount(source=private)])
    try:
        probe = (
            f"cat {private}/secret.txt; echo read=$?; "
            f"for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c 'chec[k]-process'; "
            f"kill -0 {check.pid} 2>/dev/null; echo kill=$?; ls /proc | grep -c '^[0-9]'"
        )
        done = run(server, work, "/bin/sh", "-c", probe)
        lines = done.stdout.decode().split()
        assert "read=1" in lines and "kill=1" in lines, done  # not mounted; no such process in its world
        assert lines[lines.index("read=1") + 1] == "0"  # no process of the check in its /proc
        assert int(lines[-1]) <= 6  # its own few processes only
        assert check.poll() is None
    finally:
        check.kill()
        check.wait()
        for stream in (check.stdin, check.stdout):
            if stream is not None:
                stream.close()


def test_nothing_the_program_started_outlives_it(server: ProgramRunServer, folders: tuple[Path, Path, Path]) -> None:
    work = folders[0]
    daemon = "setsid nohup sh -c 'sleep 1.5; echo late > late.txt' >/dev/null 2>&1 & echo started"
    done = run(server, work, "/bin/sh", "-c", daemon)
    assert done.stdout == b"started\n"
    time.sleep(2.5)
    assert not (work / "late.txt").exists()


def test_limits_and_refusals(server: ProgramRunServer, folders: tuple[Path, Path, Path], tmp_path: Path) -> None:
    work, _, private = folders
    started = time.monotonic()
    slow = run(server, work, "/bin/sleep", "30", timeout_s=1)
    assert slow.returncode == 124 and time.monotonic() - started < 10
    outside = run(server, private, "/bin/true")
    assert outside.returncode == 126 and b"outside the folders" in outside.stderr
    too_long = run(server, work, "/bin/true", timeout_s=100)
    assert too_long.returncode == 126 and b"over the limit" in too_long.stderr
    dashed = run(server, work, "-i", "/bin/true")
    assert dashed.returncode == 126
    missing = run(server, work, "./no-such-program")
    assert missing.returncode != 0
    assert server.runs >= 2


def test_runs_overlap(server: ProgramRunServer, folders: tuple[Path, Path, Path]) -> None:
    """A long run (a remote-module worker) does not hold up another (a test's subprocess)."""
    work = folders[0]
    client = [sys.executable, "-I", "-S", str(CLIENT_SCRIPT), "--socket", str(server.socket_path), "--cwd", str(work)]
    with subprocess.Popen([*client, "--timeout-s", "20", "--", "/bin/sleep", "15"], stdin=subprocess.DEVNULL) as long:
        started = time.monotonic()
        assert run(server, work, "/bin/echo", "meanwhile").stdout == b"meanwhile\n"
        assert time.monotonic() - started < 5
        long.kill()


def test_a_client_that_dies_ends_its_run(server: ProgramRunServer, folders: tuple[Path, Path, Path]) -> None:
    work = folders[0]
    client = [sys.executable, "-I", "-S", str(CLIENT_SCRIPT), "--socket", str(server.socket_path), "--cwd", str(work)]
    argv = [*client, "--timeout-s", "20", "--", "/bin/sh", "-c", "sleep 1; touch after.txt"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        time.sleep(0.5)
        proc.kill()
    time.sleep(1.5)
    assert not (work / "after.txt").exists()
    assert run(server, work, "/bin/echo", "next").stdout == b"next\n"  # the server serves on
