"""One cgroup per session: the kernel bounds the memory and the processes of all its commands.

The cgroup is made when the `Sandbox` is made, below the server's own cgroup (so whatever bounds
the server, a container's limit say, still bounds its sessions): `<server's cgroup>/openenv-sandbox/
<uid>`. Each command's bubblewrap process joins it between fork and exec (`join`, run in the
child), so everything the command starts is counted. `close()` kills what is left in it and
removes it; a crashed server's cgroups are found through the uid leases and removed the same way.

Both hierarchies are read from `/proc/self/mountinfo` and `/proc/self/cgroup`, controller by
controller: cgroup v2 (one unified tree, most hosts and Kubernetes nodes) and cgroup v1 (a tree per
controller, `memory` and `pids`). Under v2, a cgroup that holds processes cannot hand controllers
to its children ("no internal processes"): when the server's cgroup is such a one, its processes
are first moved into a leaf `openenv-server` below it, as container runtimes do for a nested engine.

In a container the cgroupfs is mounted read-only (Docker and Podman do so unless privileged); its
root is then the container's own cgroup. A server holding SYS_ADMIN there (DockerProvider grants it
for bubblewrap) remounts that view read-write: the sessions' cgroups go below the container's, so
the container's limits still bound them all.

Files used: v1 `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`, `memory.oom_control`
(`oom_kill`), `memory.max_usage_in_bytes`; v2 `memory.max`, `memory.swap.max`, `memory.events`
(`oom_kill`), `memory.peak`; both `pids.max` and `pids.events` (`max`: forks refused).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

__all__ = ["CGROUP_PARENT", "CgroupSupport", "Counters", "SessionCgroup", "cgroup_support", "remove_stale_cgroup"]

CGROUP_PARENT = "openenv-sandbox"
SERVER_LEAF = "openenv-server"
T = TypeVar("T")
CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class CgroupSupport:
    """Where each controller's session cgroups go here, and why a missing one is missing."""

    parents: dict[str, Path] = field(default_factory=dict)
    """controller -> the folder session cgroups are made in (`.../openenv-sandbox`)."""
    versions: dict[str, int] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    """controller -> why it cannot be had."""

    def describe(self, controller: str) -> str:
        if controller in self.parents:
            return f"cgroup v{self.versions[controller]}, one per session ({self.parents[controller]})"
        return f"missing: {self.missing.get(controller, 'unknown')}"


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _in_container() -> bool:
    return any(os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")) or bool(
        os.environ.get("container") or os.environ.get("KUBERNETES_SERVICE_HOST")
    )


def _writable(point: str, attempt: Callable[[], T]) -> T:
    """`attempt()`; if the cgroupfs at `point` is read-only inside a container, remount it
    read-write (nosuid, nodev, noexec kept) and try once more."""
    try:
        return attempt()
    except OSError as e:
        if e.errno != errno.EROFS or not _in_container():
            raise
    from ._workspace import remount_writable

    remount_writable(Path(point))
    return attempt()


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fs type, super options) of each cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
                continue
            root, point = (f.replace("\\040", " ") for f in fields[3:5])
            found.append((root, point, tail[0], set(tail[2].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """Hierarchy -> this process's cgroup path: a v1 controller's name, or "" for v2."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _on_disk(root: str, point: str, path: str) -> Path:
    """The folder of cgroup `path` in a mount of the hierarchy whose root is `root`."""
    relative = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    if relative.startswith(".."):  # our cgroup lies outside what is mounted (a container's view)
        relative = ""
    return Path(point) / relative if relative not in ("", ".") else Path(point)


def _prepare_v2(base: Path, controllers: list[str]) -> Path:
    """Make `base/openenv-sandbox` hand `controllers` to its children; returns it."""
    wanted = " ".join(f"+{c}" for c in controllers)
    enabled = set((base / "cgroup.subtree_control").read_text().split())
    if not set(controllers) <= enabled:
        try:
            _write(base / "cgroup.subtree_control", wanted)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            # "no internal processes": our cgroup holds processes (the server's), so they move to a leaf
            leaf = base / SERVER_LEAF
            leaf.mkdir(exist_ok=True)
            for pid in (base / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # exited meanwhile, or a kernel thread
                    _write(leaf / "cgroup.procs", pid)
            _write(base / "cgroup.subtree_control", wanted)
    parent = base / CGROUP_PARENT
    parent.mkdir(exist_ok=True)
    _write(parent / "cgroup.subtree_control", wanted)
    return parent


@functools.cache
def cgroup_support() -> CgroupSupport:
    """Find (and prepare, once per process) where session cgroups go. Needs root."""
    support = CgroupSupport()
    if os.geteuid() != 0:
        for name in CONTROLLERS:
            support.missing[name] = "the server is not root (session cgroups need a writable cgroupfs)"
        return support
    own = _own_cgroups()
    mounts = _mounts()
    v2 = next(((root, point) for root, point, kind, _ in mounts if kind == "cgroup2"), None)
    v2_base = _on_disk(v2[0], v2[1], own[""]) if v2 is not None and "" in own else None
    v2_wanted: list[str] = []
    for name in CONTROLLERS:
        v1 = next(((root, point) for root, point, kind, opts in mounts if kind == "cgroup" and name in opts), None)
        if v1 is not None and name in own:
            try:
                parent = _on_disk(v1[0], v1[1], own[name]) / CGROUP_PARENT
                _writable(v1[1], functools.partial(parent.mkdir, exist_ok=True))
                support.parents[name], support.versions[name] = parent, 1
            except OSError as e:
                support.missing[name] = f"cgroup v1 {name} at {v1[1]} is not writable ({e.strerror})"
            continue
        if v2_base is not None:
            try:
                available = (v2_base / "cgroup.controllers").read_text().split()
            except OSError as e:
                support.missing[name] = f"cgroup v2 at {v2_base} cannot be read ({e.strerror})"
                continue
            if name in available:
                v2_wanted.append(name)
            else:
                support.missing[name] = f"the {name} controller is not enabled for {v2_base} (cgroup v2)"
            continue
        support.missing[name] = f"no cgroup hierarchy has the {name} controller"
    if v2_wanted and v2_base is not None and v2 is not None:
        try:
            base = v2_base
            parent = _writable(v2[1], lambda: _prepare_v2(base, v2_wanted))
            for name in v2_wanted:
                support.parents[name], support.versions[name] = parent, 2
        except OSError as e:
            for name in v2_wanted:
                support.missing[name] = f"cgroup v2 at {v2_base} is not writable ({e.strerror})"
    return support


def _pids(folder: Path) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    return []


def _read_int(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return None


def _counter(path: Path, key: str) -> int:
    """`key`'s number in a flat-keyed file (`memory.events`, `pids.events`, `memory.oom_control`)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _kill_members(folder: Path) -> None:
    """SIGKILL every process in the cgroup `folder` (v2's `cgroup.kill` where there is one)."""
    if (folder / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            _write(folder / "cgroup.kill", "1")
    for pid in _pids(folder):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _kill_and_remove(folder: Path, *, timeout_s: float) -> bool:
    """SIGKILL every process in the cgroup `folder` until it can be removed; whether it was."""
    deadline = time.monotonic() + timeout_s
    while True:
        _kill_members(folder)
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        time.sleep(0.01)  # killed processes leave the cgroup once reaped


def remove_stale_cgroup(path: str, *, timeout_s: float = 5.0) -> None:
    """Remove a dead server's session cgroup recorded in a uid lease: only `.../openenv-sandbox/<n>`
    on a cgroup mount."""
    folder = Path(path)
    points = [Path(point) for _, point, _, _ in _mounts()]
    if folder.parent.name != CGROUP_PARENT or not folder.name.isdigit():
        return
    if not any(folder.is_relative_to(point) for point in points):
        return
    _kill_and_remove(folder, timeout_s=timeout_s)


@dataclass(frozen=True)
class Counters:
    """What the kernel counted in a session's cgroup."""

    oom_kills: int
    """Processes killed at the memory limit."""
    memory_limit_reached: int
    """Times the memory use reached the limit (v2 `memory.events` `max`; v1: 1 when the watermark
    since `begin_command` stands at the limit)."""
    forks_refused: int
    """Forks refused at the process limit."""


class SessionCgroup:
    """A session's cgroup in each hierarchy that has `memory` or `pids` here."""

    def __init__(self, name: str, *, memory_bytes: int | None, max_processes: int | None) -> None:
        """Make (or remake) the cgroup `name` under each controller's parent and set its limits.

        Raises:
            OSError: a cgroup could not be made or limited.
        """
        support = cgroup_support()
        self.support = support
        self.memory_bytes = memory_bytes
        self.max_processes = max_processes
        self.dirs: dict[str, Path] = {}
        self._peak = 0
        try:
            for controller, parent in support.parents.items():
                folder = parent / name
                if folder in self.dirs.values():
                    self.dirs[controller] = folder
                    continue
                if folder.exists():  # a dead server's, of the same uid
                    _kill_and_remove(folder, timeout_s=5.0)
                folder.mkdir(exist_ok=True)
                self.dirs[controller] = folder
            self._limit()
        except OSError:
            self.remove()
            raise
        # what `join` writes to, between fork and exec: no allocation to do there
        self._procs = [os.fsencode(folder / "cgroup.procs") for folder in dict.fromkeys(self.dirs.values())]
        # a single-threaded child that moves itself by writing 0 to a v1 `tasks` file skips the
        # kernel's global cgroup lock (no RCU grace period: ~0 ms instead of 10 to 20); v2 has no
        # such file for domain cgroups, so there `join` waits for the lock (see `joins_fast`)
        version_of = {folder: support.versions[controller] for controller, folder in self.dirs.items()}
        self._joins = [
            os.fsencode(folder / ("tasks" if version == 1 else "cgroup.procs")) for folder, version in version_of.items()
        ]
        self.joins_fast = bool(version_of) and all(version == 1 for version in version_of.values())
        """Whether `join` skips the global lock (every hierarchy is v1)."""

    def _limit(self) -> None:
        memory = self.dirs.get("memory")
        if memory is not None and self.memory_bytes is not None:
            if self.support.versions["memory"] == 1:
                _write(memory / "memory.limit_in_bytes", str(self.memory_bytes))
                if (memory / "memory.memsw.limit_in_bytes").exists():  # swap accounting on: no swap either
                    _write(memory / "memory.memsw.limit_in_bytes", str(self.memory_bytes))
            else:
                _write(memory / "memory.max", str(self.memory_bytes))
                if (memory / "memory.swap.max").exists():
                    _write(memory / "memory.swap.max", "0")
        pids = self.dirs.get("pids")
        if pids is not None and self.max_processes is not None:
            _write(pids / "pids.max", str(self.max_processes))

    @property
    def join_files(self) -> list[str]:
        """The files a process writes 0 to, to join the cgroup itself (`join`)."""
        return [os.fsdecode(path) for path in self._joins]

    @property
    def paths(self) -> list[str]:
        return [str(folder) for folder in dict.fromkeys(self.dirs.values())]

    def join(self) -> None:
        """Move the calling process into the cgroup (run in the single-threaded child between fork
        and exec)."""
        for path in self._joins:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")  # 0: the writer itself
            finally:
                os.close(fd)

    def adopt(self, pids: Sequence[int]) -> None:
        """Move running processes into the cgroup, from outside (the first move waits for the
        kernel's cgroup lock, an RCU grace period; the next ones right after it are quick).

        Raises:
            OSError: a move was refused (the process is gone, or the cgroup).
        """
        for procs in self._procs:
            for pid in pids:
                fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, str(pid).encode())
                finally:
                    os.close(fd)

    def counters(self) -> Counters:
        """The kernel's event counts for the session so far."""
        oom = reached = 0
        memory = self.dirs.get("memory")
        if memory is not None:
            if self.support.versions["memory"] == 1:
                oom = _counter(memory / "memory.oom_control", "oom_kill")
                # v1 counts no "limit reached" event (failcnt stays 0 on recent kernels): its
                # watermark, reset by `begin_command`, tells whether the use touched the limit
                peak = _read_int(memory / "memory.max_usage_in_bytes")
                reached = int(self.memory_bytes is not None and peak is not None and peak >= self.memory_bytes - 65536)
            else:
                oom = _counter(memory / "memory.events", "oom_kill")
                reached = _counter(memory / "memory.events", "max")
        pids = self.dirs.get("pids")
        refused = _counter(pids / "pids.events", "max") if pids is not None else 0
        return Counters(oom_kills=oom, memory_limit_reached=reached, forks_refused=refused)

    def begin_command(self) -> Counters:
        """The counts before a command starts (under v1, after its watermark is reset, the
        session's peak so far kept)."""
        memory = self.dirs.get("memory")
        if memory is not None and self.support.versions["memory"] == 1:
            self._peak = max(self._peak, _read_int(memory / "memory.max_usage_in_bytes") or 0)
            with contextlib.suppress(OSError):
                _write(memory / "memory.max_usage_in_bytes", "0")
        return self.counters()

    def peak_memory_bytes(self) -> int | None:
        """The most memory the session held at once (None where the kernel does not say)."""
        memory = self.dirs.get("memory")
        if memory is None:
            return None
        name = "memory.max_usage_in_bytes" if self.support.versions["memory"] == 1 else "memory.peak"
        now = _read_int(memory / name)
        return None if now is None else max(now, self._peak)

    def kill(self) -> None:
        """SIGKILL every process in the session's cgroup (once)."""
        for folder in dict.fromkeys(self.dirs.values()):
            _kill_members(folder)

    def remove(self, *, timeout_s: float = 5.0) -> bool:
        """Kill what is left and remove the cgroup; whether every folder went."""
        removed = True
        for folder in dict.fromkeys(self.dirs.values()):
            removed = _kill_and_remove(folder, timeout_s=timeout_s) and removed
        return removed
