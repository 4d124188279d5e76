"""Attacks on `openenv_sdk.sandbox.Sandbox` itself: what one session's commands can reach.

Each test is an attack an agent could run from a tool that executes commands; it fails if the
attack works. Sessions A and B are two `Sandbox`es, as two sessions of a server hold them.
These run as root (as CI does): each session then has a uid of its own.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.sandbox import CommandResult, Mount, Sandbox, SandboxLimits, isolation_mode, isolation_report, kill_uid

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


# --- ptrace and its relatives ---------------------------------------------------------------------

# The agent's program, run by a trusted check's shell in the same sandbox (same uid, same pid
# namespace): what terminal's checks do with `bin/greet`, or git with a clean filter. It tries to
# take over its parent, the check's bash, which would otherwise print a failure and exit 1.
HIJACK = textwrap.dedent("""
    import ctypes, errno, json, mmap, os, platform, struct, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    victim = os.getppid()
    tried = {}

    def note(name, ret):
        tried[name] = 0 if ret >= 0 else ctypes.get_errno()

    PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
    note("ptrace_attach", libc.ptrace(PTRACE_ATTACH, victim, 0, 0))
    if tried["ptrace_attach"] == 0:  # attached (no filter): let it go again, it would stay stopped
        os.waitpid(victim, 0x40000000)
        libc.ptrace(17, victim, 0, 0)
    note("ptrace_seize", libc.ptrace(PTRACE_SEIZE, victim, 0, 0))
    # process_vm_writev into the victim's stack (its address from /proc/<pid>/maps)
    stack = next(int(l.split("-")[0], 16) for l in open(f"/proc/{victim}/maps") if l.rstrip().endswith("[stack]"))
    data = ctypes.create_string_buffer(b"exit 0;" * 8)

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    local, remote = IoVec(ctypes.addressof(data), 56), IoVec(stack + 4096, 56)
    note("process_vm_writev", libc.process_vm_writev(victim, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    note("process_vm_readv", libc.process_vm_readv(victim, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    SYS = {"x86_64": {"pidfd_open": 434, "pidfd_getfd": 438, "kcmp": 312},
           "aarch64": {"pidfd_open": 434, "pidfd_getfd": 438, "kcmp": 272}}[platform.machine()]
    pidfd = libc.syscall(SYS["pidfd_open"], victim, 0)
    note("pidfd_getfd", libc.syscall(SYS["pidfd_getfd"], pidfd, 0, 0) if pidfd >= 0 else -1)
    note("kcmp", libc.syscall(SYS["kcmp"], os.getpid(), victim, 0, 0, 0))
    if platform.machine() == "x86_64":
        # x32: the x86_64 entry with bit 30 set (x32's ptrace is 521); a filter for x86_64 alone misses it
        note("ptrace_x32", libc.syscall(0x40000000 | 521, PTRACE_ATTACH, victim, 0, 0))
        # the 32-bit entry: `int 0x80` with i386's ptrace (26), from this 64-bit process
        code = (b"\\x53\\xb8" + struct.pack("<I", 26) + b"\\xbb" + struct.pack("<I", PTRACE_ATTACH) + b"\\xb9"
                + struct.pack("<I", victim) + b"\\x31\\xd2\\x31\\xf6\\xcd\\x80\\x5b\\xc3")
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        ret = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
        tried["ptrace_int80"] = 0 if ret >= 0 else -ret
    print(json.dumps(tried), flush=True)
""")
CHECK = "python3 hijack.py; echo 'FAIL: the file is wrong'; exit 1"


def _yama_allows_same_uid_ptrace() -> bool:
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    return not scope.exists() or scope.read_text().strip() == "0"


def test_the_agents_program_cannot_ptrace_the_check_that_runs_it(pair: tuple[Sandbox, Sandbox]) -> None:
    """A check's bash runs the agent's program; the program attaches to the bash (same uid, same
    pid namespace, no Yama) by every entry: ptrace attach/seize, x32, int 0x80. All fail with
    EPERM, and the check's verdict (exit 1) stands."""
    a, _ = pair
    (a.workspace / "hijack.py").write_text(HIJACK)
    result = a.run(["/bin/bash", "-c", CHECK])
    tried = json.loads(result.stdout.splitlines()[0])
    ptrace_calls = {k: v for k, v in tried.items() if k.startswith("ptrace")}
    assert ptrace_calls and set(ptrace_calls.values()) == {errno.EPERM}, tried
    assert result.exit_code == 1 and "FAIL: the file is wrong" in result.stdout


def test_the_agents_program_cannot_write_or_read_the_checks_memory(pair: tuple[Sandbox, Sandbox]) -> None:
    """process_vm_writev/readv into the check's bash, and taking its descriptors (pidfd_getfd) or
    comparing them (kcmp): each fails with EPERM."""
    a, _ = pair
    (a.workspace / "hijack.py").write_text(HIJACK)
    result = a.run(["/bin/bash", "-c", CHECK])
    tried = json.loads(result.stdout.splitlines()[0])
    for call in ("process_vm_writev", "process_vm_readv", "pidfd_getfd", "kcmp"):
        assert tried[call] == errno.EPERM, tried
    assert result.exit_code == 1


@pytest.mark.skipif(not _yama_allows_same_uid_ptrace(), reason="control: Yama already forbids it on this kernel")
def test_control_without_the_filter_the_same_attack_takes_over_the_check() -> None:
    """Control: the same program run without the sandbox's filter (the unisolated runner, same
    uid) attaches to the check's bash and reads its memory: the attack is real on this kernel."""
    from openenv_sdk.sandbox import run_command

    with tempfile.TemporaryDirectory(prefix="openenv-control-") as folder:
        os.chmod(folder, 0o777)  # the runner's unprivileged user reads the program
        Path(folder, "hijack.py").write_text(HIJACK)
        result = run_command(["/bin/bash", "-c", CHECK], cwd=folder, limits=SandboxLimits(timeout_s=20))
    tried = json.loads(result.stdout.splitlines()[0])
    assert (tried["ptrace_attach"], tried["process_vm_readv"]) == (0, 0), result.render()


def test_proc_mem_of_the_sessions_other_processes_is_out_of_reach(pair: tuple[Sandbox, Sandbox]) -> None:
    """seccomp cannot stop `open("/proc/<pid>/mem")`; the pid namespace does: a worker of the same
    session (same uid) and one of another session are not in the command's /proc at all, and the
    only process it sees besides its own is bubblewrap's init (root: no access)."""
    a, b = pair
    secret = "worker-secret-" + os.urandom(8).hex()
    worker_code = f"import sys, time\nheld = {secret[:7]!r} + {secret[7:]!r}\nprint('ready', flush=True)\ntime.sleep(60)\n"
    workers = [s.popen(["python3", "-c", worker_code]) for s in (a, b)]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline() == b"ready\n"
        attack = textwrap.dedent(f"""
            import os
            me = os.getpid()
            seen, opened, found = [], [], False
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == me:
                    continue
                seen.append(name)
                try:
                    with open(f"/proc/{{name}}/mem", "r+b", buffering=0) as mem:
                        opened.append(name)
                except OSError:
                    pass
            for worker_pid in {[w.pid for w in workers]}:
                try:
                    open(f"/proc/{{worker_pid}}/mem", "r+b").close()
                    found = True
                except OSError:
                    pass
            print(sorted(seen), opened, found)
        """)
        result = a.run(["python3", "-c", attack])
        assert result.stdout.strip() == "['1'] [] False", result.render()
    finally:
        for worker in workers:
            _stop(worker)


# --- session-wide kernel bounds -------------------------------------------------------------------


def _bounded(name: str, **limits: Any) -> Sandbox:
    isolation_mode()
    settings = {"timeout_s": 30, **limits}
    sandbox = Sandbox(limits=SandboxLimits(**settings), name=name)
    assert sandbox.cgroup is not None, isolation_report()
    assert sandbox.workspace_bounded, isolation_report()
    return sandbox


def test_isolation_report_names_every_session_bound() -> None:
    report = isolation_report()
    for bound in ("session_memory", "session_processes", "workspace"):
        assert isinstance(report[bound], str) and not str(report[bound]).startswith("missing"), report


def test_memory_past_the_sessions_cgroup_is_killed_with_a_typed_error_and_the_session_goes_on() -> None:
    """Six processes each under RLIMIT_AS (the finding: 5.2 GiB held by one session) together
    pass the session's 256 MiB: the kernel kills, the result says so, the next command works."""
    hog = "import time; b = b'x' * (120 * 1024**2); time.sleep(3)"
    with _bounded("sec-mem", session_memory_bytes=256 * 1024**2, memory_bytes=512 * 1024**2) as a:
        other = _bounded("sec-mem-b")
        try:
            result = a.run(" ".join(f"python3 -c \"{hog}\" &" for _ in range(6)) + " wait")
            assert result.memory_limit_hit, result.render()
            assert "memory limit (256 MiB) was reached" in result.render()
            assert a.cgroup is not None and (a.cgroup.peak_memory_bytes() or 0) <= 256 * 1024**2
            after = a.run("echo alive")
            assert (after.stdout, after.memory_limit_hit) == ("alive\n", False)
            assert other.run("echo alive").stdout == "alive\n"
        finally:
            other.close()


def test_a_fork_bomb_stops_at_the_sessions_pids_max_and_other_sessions_run_meanwhile() -> None:
    bomb_code = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)"
    with _bounded("sec-bomb", session_max_processes=48, max_processes=None) as a, _bounded("sec-bomb-b") as b:
        results: list[CommandResult] = []
        bomber = threading.Thread(target=lambda: results.append(a.run(["python3", "-c", bomb_code], timeout_s=6)))
        bomber.start()
        try:
            time.sleep(2)
            assert a.cgroup is not None and len(Path(a.cgroup.paths[-1], "cgroup.procs").read_text().split()) <= 48
            started = time.monotonic()
            assert b.run("echo alive").stdout == "alive\n"
            assert time.monotonic() - started < 5
        finally:
            bomber.join(timeout=30)
        bomb = results[0]
        assert bomb.process_limit_hit and "process limit (48 processes) was reached" in bomb.render()
        assert a.run("echo alive").stdout == "alive\n"


def test_writing_past_the_workspace_bound_gets_enospc_bytes_and_inodes() -> None:
    with _bounded("sec-disk", workspace_bytes=32 * 1024**2, workspace_inodes=2048) as a:
        big = a.run("head -c 100M /dev/zero > big; echo status $?; stat -c %s big")
        assert "No space left on device" in big.stderr and int(big.stdout.split()[-1]) <= 32 * 1024**2
        assert a.run("rm big").exit_code == 0
        files = a.run("for i in $(seq 5000); do : > f$i || break; done; ls | wc -l")
        assert "No space left on device" in files.stderr and int(files.stdout.split()[-1]) < 2048
        assert a.run("df --output=size,itotal . | tail -1").stdout.split() == [str(32 * 1024), "2048"]
        assert a.run("rm f*; echo ok > note; cat note").stdout == "ok\n"  # freed, the session goes on


def test_close_removes_the_cgroup_and_unmounts_the_workspace() -> None:
    sandbox = _bounded("sec-close-bounds")
    worker = sandbox.popen(["/bin/sh", "-c", "sleep 60"])
    assert sandbox.cgroup is not None
    cgroups, root = sandbox.cgroup.paths, sandbox.root
    assert os.path.ismount(root) and all(Path(p).is_dir() for p in cgroups)
    sandbox.close()
    assert worker.wait(timeout=5) != 0
    assert not any(Path(p).exists() for p in cgroups)
    assert not root.exists() and str(root) not in Path("/proc/self/mountinfo").read_text()


def test_a_crashed_servers_cgroup_and_tmpfs_are_removed_by_the_next_server() -> None:
    script = (
        "import os, json; from openenv_sdk.sandbox import Sandbox; s = Sandbox(name='sec-crash-bounds'); "
        "s.popen(['/bin/sh', '-c', 'sleep 60']); "
        "print(json.dumps([str(s.root), s.cgroup.paths]), flush=True); os._exit(9)"
    )
    crashed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=30)
    root, cgroups = json.loads(crashed.stdout.splitlines()[0])
    assert os.path.ismount(root) and all(Path(p).is_dir() for p in cgroups)  # what a crash leaves
    # the next server's first sandbox sweeps every lease nobody holds
    subprocess.run(
        [sys.executable, "-c", "from openenv_sdk.sandbox import Sandbox; Sandbox(name='sec-next').close()"],
        cwd=REPO, timeout=30, check=True,
    )  # fmt: skip
    assert not os.path.exists(root) and root not in Path("/proc/self/mountinfo").read_text()
    assert not any(Path(p).exists() for p in cgroups)
