"""The egress allowlist proxy ends with the process that started it, however that process ends.

Real sandboxes, real proxy processes: `proxy_owner.py` (a child of this test) starts the proxy
through a sandboxed command; the test ends the owner and watches the proxy's pids (only those).
The proxy used to outlive an owner killed while it started (it set `PR_SET_PDEATHSIG` itself,
too late), to leave its folder behind, to leave its acceptors running when it was killed itself,
and to stop when the *thread* that started it ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.sandbox import isolation_mode

OWNER = Path(__file__).with_name("proxy_owner.py")
GONE_WITHIN_S = 10.0
"""The proxy's own bound on a stop is 5 s (`_egress_proxy.STOP_TIMEOUT_S`); a clean stop takes well under 1 s."""


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state, ppid, pgrp, ...), or None
    for a process that is not (or no longer) an egress proxy, a zombie included."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields if fields[0] != "Z" and b"openenv_sdk.sandbox._egress_proxy" in cmdline else None


def is_proxy(pid: int) -> bool:
    """Whether `pid` is still an egress proxy process (a zombie or a reused pid is not)."""
    return _stat(pid) is not None


def group_of(proxy: int) -> list[int]:
    """The proxy processes in `proxy`'s process group (it leads one: all it forked, found even
    once orphaned). Only read from /proc, never signalled."""
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    return [pid for pid in pids if (fields := _stat(pid)) is not None and fields[2] == str(proxy)]


def wait_gone(pids: list[int], timeout_s: float = GONE_WITHIN_S) -> list[int]:
    """The pids still running after `timeout_s` (none, once they are all gone)."""
    deadline = time.monotonic() + timeout_s
    while (alive := [pid for pid in pids if is_proxy(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def wait_group_gone(proxy: int, timeout_s: float = GONE_WITHIN_S) -> list[int]:
    """What is left of the proxy's process group after `timeout_s` (nothing, once it is gone)."""
    deadline = time.monotonic() + timeout_s
    while (alive := group_of(proxy)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


class Owner:
    def __init__(self, mode: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.process = subprocess.Popen(
            [sys.executable, str(OWNER), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
        )

    def started(self, timeout_s: float = 60.0) -> dict[str, object]:
        """The owner's report (its proxy's pid, the proxy's children, its folder)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = ""
        os.set_blocking(self.process.stdout.fileno(), False)
        while not line and time.monotonic() < deadline and self.process.poll() is None:
            line = self.process.stdout.readline()
            time.sleep(0.001)
        line = line or self.process.stdout.readline()
        if not line and self.process.poll() is not None and self.process.stderr is not None:
            line = self.process.stderr.read()
            raise AssertionError(f"the owner exited with {self.process.returncode} and no report: {line}")
        assert line, f"the owner reported nothing within {timeout_s} s"
        return dict(json.loads(line))

    def end(self, sig: signal.Signals | None = None) -> None:
        """Signal it (if `sig`), reap it, close our ends of its pipes."""
        if sig is not None and self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=30)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def owners() -> Iterator[list[Owner]]:
    isolation_mode()  # fails with what is missing, never skips
    made: list[Owner] = []
    yield made
    for owner in made:  # only the processes this test started
        owner.end(signal.SIGKILL)


def proxy_pids(report: dict[str, object]) -> list[int]:
    children = report["children"]
    assert isinstance(children, list)
    return [int(str(report["proxy"])), *(int(pid) for pid in children)]


def test_the_proxy_stops_when_its_owner_is_sigkilled_while_it_starts(owners: list[Owner]) -> None:
    """The server is SIGKILLed the moment it has spawned an egress proxy, before the proxy is up: the proxy (and anything it forked) is gone within 10 s (was: left running for good, 2 processes, every time)."""
    for _ in range(3):  # the window is the proxy's start, most of its first ~0.3 s
        owner = Owner("starting")
        owners.append(owner)
        proxy = int(str(owner.started()["proxy"]))
        owner.end(signal.SIGKILL)
        assert wait_group_gone(proxy) == []
        time.sleep(1)  # nothing forked late, after the group looked empty
        assert group_of(proxy) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_proxy_stops_with_its_owner_and_removes_its_folder(owners: list[Owner], sig: signal.Signals) -> None:
    """The server that ran a sandboxed command through the egress proxy is killed (SIGKILL; SIGTERM, which runs no atexit): the proxy and its acceptors are gone within 10 s and its folder (socket, log) is removed (was: folder left behind)."""
    owner = Owner("running")
    owners.append(owner)
    report = owner.started()
    pids = proxy_pids(report)
    assert len(pids) >= 2 and all(is_proxy(pid) for pid in pids), pids  # proxy.py forks its acceptor
    owner.end(sig)
    assert wait_gone(pids) == []
    assert group_of(pids[0]) == []
    deadline = time.monotonic() + 5
    while Path(str(report["folder"])).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(str(report["folder"])).exists()


def test_the_proxy_stops_when_its_owner_closes_the_sandbox_and_exits(owners: list[Owner]) -> None:
    """The server closes its sandbox and exits normally: the egress proxy and its acceptors are gone and its folder removed by the time it has exited."""
    owner = Owner("exit")
    owners.append(owner)
    report = owner.started()
    owner.end()
    assert owner.process.returncode == 0
    assert wait_gone(proxy_pids(report), timeout_s=1) == []
    assert not Path(str(report["folder"])).exists()


def test_acceptors_die_with_a_sigkilled_proxy(owners: list[Owner]) -> None:
    """The egress proxy itself is SIGKILLed (the OOM killer, say): the acceptor processes it forked die with it (was: left running, orphaned)."""
    owner = Owner("running")
    owners.append(owner)
    proxy, *acceptors = proxy_pids(owner.started())
    assert acceptors
    os.kill(proxy, signal.SIGKILL)  # a process our owner started, by its pid
    assert wait_gone(acceptors, timeout_s=5) == []


def test_the_proxy_outlives_the_thread_that_started_it(owners: list[Owner]) -> None:
    """A sandboxed command on a worker thread starts the egress proxy and the thread ends: the proxy keeps serving the server's other commands (was: stopped by PR_SET_PDEATHSIG when that thread ended, under whichever command used it)."""
    owner = Owner("thread")
    owners.append(owner)
    report = owner.started()
    assert report["proxy"] == report["first"], "the proxy died with its thread and was started again"
    owner.end()
    assert wait_gone(proxy_pids(report), timeout_s=2) == []
