"""Attacks on `openenv_sdk.sandbox.Sandbox` itself: what one session's commands can reach.

Each test is an attack an agent could run from a tool that executes commands; it fails if the
attack works. Sessions A and B are two `Sandbox`es, as two sessions of a server hold them.
These run as root (as CI does): each session then has a uid of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.sandbox import Mount, Sandbox, SandboxLimits, isolation_mode, kill_uid

REPO = Path(__file__).resolve().parents[2]
HIDDEN_REFERENCE = REPO / "environments" / "coding" / "hidden" / "anagrams" / "reference.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session uids need root (CI runs as root)")


@pytest.fixture
def pair() -> Iterator[tuple[Sandbox, Sandbox]]:
    isolation_mode()  # fails with what is missing, never skips
    limits = SandboxLimits(timeout_s=20, max_processes=64)
    a, b = Sandbox(limits=limits, name="sec-a"), Sandbox(limits=limits, name="sec-b")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _background(sandbox: Sandbox, script: str) -> subprocess.Popen[bytes]:
    """A long command of `sandbox` running while the other session attacks."""
    return sandbox.popen(["/bin/bash", "-c", script])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


def test_sessions_have_distinct_unprivileged_uids(pair: tuple[Sandbox, Sandbox]) -> None:
    a, b = pair
    ids = {a.run("id -u").stdout.strip(), b.run("id -u").stdout.strip()}
    assert len(ids) == 2 and "0" not in ids and str(os.getuid()) not in ids


def test_other_session_workspace_unreachable_by_path(pair: tuple[Sandbox, Sandbox]) -> None:
    a, b = pair
    assert a.run("echo secret-of-a > notes.txt").exit_code == 0
    attack = b.run(f"cat {a.workspace}/notes.txt; echo pwned > {a.workspace}/notes.txt; ls {a.root}")
    assert "secret-of-a" not in attack.stdout
    assert (a.workspace / "notes.txt").read_text() == "secret-of-a\n"


def test_other_session_workspace_unreachable_through_proc_cwd(pair: tuple[Sandbox, Sandbox]) -> None:
    a, b = pair
    a.run("echo secret-of-a > notes.txt")
    running = _background(a, "sleep 30")
    try:
        time.sleep(0.3)
        attack = b.run(
            "for p in /proc/[0-9]*; do cat $p/cwd/notes.txt 2>/dev/null; echo pwned > $p/cwd/notes.txt 2>/dev/null; done;"
            " ps -eo pid,user,cmd"
        )
        assert "secret-of-a" not in attack.stdout
        assert "sleep 30" not in attack.stdout  # A's process is not even visible
        assert (a.workspace / "notes.txt").read_text() == "secret-of-a\n"
    finally:
        _stop(running)


def test_kill_minus_one_reaches_only_its_own_processes(pair: tuple[Sandbox, Sandbox]) -> None:
    a, b = pair
    running = _background(a, "sleep 5; echo survived > survived.txt")
    try:
        time.sleep(0.3)
        b.run("kill -9 -1; pkill -9 -u 0 sleep; pkill -9 sleep; true")
        assert running.wait(timeout=15) == 0
        assert (a.workspace / "survived.txt").read_text() == "survived\n"
    finally:
        _stop(running)


def test_setsid_double_fork_dies_with_its_command(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    watcher = "import time\nwhile True:\n    open('watch.txt', 'w').write('pwned'); time.sleep(0.05)\n"
    (a.workspace / "w.py").write_text(watcher)
    a.run("setsid env -i python3 w.py >/dev/null 2>&1 < /dev/null & (nohup sh -c 'sleep 60' &) ; disown; echo started")
    time.sleep(0.3)
    leftovers = subprocess.run(["pgrep", "-u", str(a.uid)], capture_output=True, text=True).stdout.split()
    assert leftovers == []
    (a.workspace / "watch.txt").write_text("correct")
    time.sleep(0.3)
    assert (a.workspace / "watch.txt").read_text() == "correct"


def test_server_loopback_api_unreachable(pair: tuple[Sandbox, Sandbox], echo_server: str) -> None:
    a, _ = pair
    port = echo_server.rsplit(":", 1)[1]
    probe = textwrap.dedent(f"""
        import socket
        for host in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
            try:
                socket.create_connection((host, {port}), timeout=1).close()
                print("REACHED", host)
            except OSError as e:
                print("refused", host, e)
    """)
    attack = a.run(["python3", "-c", probe])
    assert "REACHED" not in attack.stdout, attack.stdout
    import httpx

    assert httpx.get(f"{echo_server}/health", timeout=5).status_code == 200  # the server is there


def test_no_network_interfaces_but_its_own_loopback(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    attack = a.run("cat /proc/net/dev")
    interfaces = [line.split(":")[0].strip() for line in attack.stdout.splitlines()[2:]]
    assert interfaces == ["lo"]


def test_hidden_data_and_environment_folders_not_mounted(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    assert HIDDEN_REFERENCE.is_file()
    attack = a.run(
        f"cat {HIDDEN_REFERENCE}; ls {REPO}/environments; find / -xdev -name reference.py 2>/dev/null | head; true"
    )
    assert HIDDEN_REFERENCE.read_text()[:40] not in attack.stdout
    assert "reference.py" not in attack.stdout


def test_server_process_environment_invisible(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    os.environ["OPENENV_TEST_SERVER_SECRET"] = "server-secret-123"
    try:
        attack = a.run(f"cat /proc/{os.getpid()}/environ; cat /proc/1/environ; cat /proc/*/environ 2>/dev/null; true")
        assert "server-secret-123" not in attack.stdout
    finally:
        del os.environ["OPENENV_TEST_SERVER_SECRET"]


def test_commands_hold_no_capabilities_and_cannot_gain_any(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    status = a.run("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status").stdout
    assert "CapEff:\t0000000000000000" in status
    assert "CapBnd:\t0000000000000000" in status
    assert "NoNewPrivs:\t1" in status


def test_fork_bomb_is_bounded_and_the_session_goes_on(pair: tuple[Sandbox, Sandbox]) -> None:
    a, b = pair
    bomb = a.run(["python3", "-c", "import os\nwhile True:\n    os.fork()"], timeout_s=5)
    assert bomb.exit_code != 0
    assert subprocess.run(["pgrep", "-u", str(a.uid)], capture_output=True).stdout == b""
    assert a.run("echo alive").stdout == "alive\n"
    assert b.run("echo alive").stdout == "alive\n"


def test_timeout_kills_the_whole_namespace(pair: tuple[Sandbox, Sandbox]) -> None:
    a, _ = pair
    started = time.monotonic()
    result = a.run("sleep 100 & sleep 100 & wait", timeout_s=1)
    assert result.timed_out and time.monotonic() - started < 5
    assert subprocess.run(["pgrep", "-u", str(a.uid)], capture_output=True).stdout == b""


def test_read_only_mounts_stay_read_only(pair: tuple[Sandbox, Sandbox], tmp_path: Path) -> None:
    a, _ = pair
    (tmp_path / "check.sh").write_text("exit 1\n")
    os.chmod(tmp_path, 0o755)
    attack = a.run(
        f"echo 'exit 0' > {tmp_path}/check.sh; rm -f {tmp_path}/check.sh; echo x > /usr/pwned; echo x > /etc/pwned",
        mounts=[Mount(source=tmp_path)],
    )
    assert attack.exit_code != 0
    assert (tmp_path / "check.sh").read_text() == "exit 1\n"
    assert not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()


def test_close_ends_every_process_and_removes_the_folder() -> None:
    sandbox = Sandbox(limits=SandboxLimits(timeout_s=10), name="sec-close")
    worker = sandbox.popen(["/bin/sh", "-c", "sleep 60"])
    uid, root = sandbox.uid, sandbox.root
    sandbox.close()
    assert worker.wait(timeout=5) != 0
    assert worker.stdout is not None and worker.stdout.closed
    assert subprocess.run(["pgrep", "-u", str(uid)], capture_output=True).stdout == b""
    assert not root.exists()


def test_uids_are_leased_across_processes() -> None:
    """Two servers on one host never give two sessions the same uid (or one kills the other's)."""
    script = (
        "import sys, time; from openenv_sdk.sandbox import Sandbox; s = Sandbox(name='sec-lease'); "
        "print(s.uid, flush=True); sys.stdin.readline(); s.close()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
    ) as other:
        assert other.stdout is not None and other.stdin is not None
        their_uid = int(other.stdout.readline())
        with Sandbox(name="sec-lease-here") as mine:
            assert mine.uid != their_uid
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.wait(timeout=10) == 0


def test_a_crashed_servers_leftovers_are_killed_before_reuse() -> None:
    script = (
        "import os, time; from openenv_sdk.sandbox import Sandbox; s = Sandbox(name='sec-crash'); "
        "s.popen(['/bin/sh', '-c', 'sleep 60']); print(s.uid, flush=True); time.sleep(0.3); os._exit(9)"
    )
    crashed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=30)
    uid = int(crashed.stdout.split()[0])
    time.sleep(0.2)
    # bubblewrap's --die-with-parent already ended the namespace; a new lease sweeps the uid anyway
    kill_uid(uid)
    assert subprocess.run(["pgrep", "-u", str(uid)], capture_output=True).stdout == b""
