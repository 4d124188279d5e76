"""One session's sandbox: a uid of its own, a private folder, every command in fresh namespaces.

`Sandbox` is what sandboxed environments hold, one per session (episode). Under bubblewrap
(`Isolation.BWRAP`), each command:

- runs as the session's own uid (leased from a pool shared by every server on the host when the
  server is root; the server's uid otherwise), with no supplementary groups;
- in new user, pid, mount, IPC, UTS and network namespaces: it sees only its own processes
  (`kill -9 -1` reaches nobody else), its 127.0.0.1 is its own (the server's API, host ports and
  host abstract unix sockets are unreachable), and it has no resolver; what it may reach beyond
  that is an `Egress` (`_network.py`): fixed endpoints relayed in, and an allowlist proxy;
- sees a read-only system (`/usr`, `/etc`, the Python runtime), a fresh `/tmp`, `/proc` and
  `/dev`, its session folder (`root`) and whatever the caller mounts; nothing else of the host
  (no environment folder, no `hidden/`, no other session, no grading tree);
- ends with every process it started: when the command exits or hits its limits, its pid
  namespace is killed, so nothing outlives it (`setsid`, double forks and `nohup` included).

As root, each session is also bounded by the kernel as a whole (see `SandboxLimits`): its folder is
a tmpfs of bounded size and inodes (`_workspace.py`), and its commands run in a cgroup of its own
with a memory and a process bound (`_cgroup.py`); every command runs under a seccomp filter that
denies ptrace and its relatives (`_seccomp.py`).

`close()` kills whatever is left of the uid, removes the folder and returns the uid.
With the opt-out (`Isolation.NONE`) commands run through `run_command`: same limits, no
namespaces; `/health` and `openenv validate` say so.

One class per mode behind the one contract `Sandbox` (an ABC): `BubblewrapSandbox` and
`UnisolatedSandbox`; `Sandbox(...)` makes the one in force. Environments build theirs with
`Sandbox.from_manifest(manifest)`: the limits, the user, the isolation mode and the phase's
egress all come from the manifest, converted here once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shlex
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import tracing
from ..errors import SandboxError, SandboxKilled
from ._cgroup import Counters, SessionCgroup, cgroup_support, remove_stale_cgroup
from ._fs import remove_tree
from ._isolation import Isolation, isolation_mode
from ._limits import CommandResult, SandboxLimits
from ._network import Egress, current_launch_egress, egress_plan
from ._run import (
    DEFAULT_PATH,
    _user_ids,
    apply_limits,
    count_processes,
    kill_session,
    limit_process,
    run_command,
    run_process,
)
from ._seccomp import program_fd, program_path
from ._workspace import mount_tmpfs, tmpfs_support, unmount

if TYPE_CHECKING:
    from ..manifest import Manifest
    from ..manifest import Sandbox as ManifestSandbox

__all__ = ["BubblewrapSandbox", "Mount", "Sandbox", "UnisolatedSandbox"]

UID_BASE_ENV = "OPENENV_SANDBOX_UID_BASE"
UID_COUNT_ENV = "OPENENV_SANDBOX_UID_COUNT"
DEFAULT_UID_BASE = 62000
DEFAULT_UID_COUNT = 2000
LEASE_DIR = Path("/run/openenv-sandbox")
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NOBODY = 65534
PYTHON = os.path.abspath(sys.executable)
"""This server's interpreter, which bubblewrap shows every command at the same path."""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class Mount(BaseModel):
    """A host path made visible in the sandbox."""

    model_config = ConfigDict(frozen=True)

    source: Path = Field(description="The host path.")
    target: Path | None = Field(default=None, description="Where it appears in the sandbox (default: the same path).")
    writable: bool = Field(default=False, description="Read-write; read-only by default.")


# --- the bubblewrap command line ---------------------------------------------------------------


def _runtime_dirs() -> list[str]:
    """The running Python's prefixes and site-packages: what `python3` in the sandbox needs."""
    dirs = {sys.base_prefix, sys.prefix, *site.getsitepackages()}
    dirs.add(str(Path(sys.executable).resolve().parent.parent))
    kept: list[str] = []
    for folder in sorted(dirs, key=len):
        if not os.path.isdir(folder) or any(folder == s or folder.startswith(s + "/") for s in ("/usr", *kept)):
            continue
        kept.append(folder)
    return kept


def _parent_dirs(target: str, covered: list[str], sources: dict[str, str] | None = None) -> list[str]:
    """`--dir` operations for the folders above `target` that bubblewrap would otherwise make
    itself: as root it makes them 0700, so the session user could not reach the mount. Folders
    inside something already mounted (`covered`) are left alone (`--perms` would chmod them),
    unless that mount is a bind from `sources` (target -> host path) where the folder does not
    exist yet: bubblewrap would make it there, 0700 again."""
    args: list[str] = []
    parts = Path(target).parts[1:-1]
    for i in range(len(parts)):
        folder = "/" + "/".join(parts[: i + 1])
        cover = next((c for c in covered if folder == c or folder.startswith(c.rstrip("/") + "/")), None)
        if cover is not None:
            source = (sources or {}).get(cover)
            if source is None:
                return args
            if (Path(source) / Path(folder).relative_to(cover)).exists():
                continue
        args += ["--perms", "0755", "--dir", folder]
    return args


def _system_args() -> list[str]:
    args: list[str] = []
    covered = ["/proc", "/dev"]  # not /tmp: folders made in the sandbox's own tmpfs need 0755 too
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
        covered.append(path)
    for folder in _runtime_dirs():
        args += [*_parent_dirs(folder, covered), "--ro-bind", folder, folder]
        covered.append(folder)
    return args


def base_argv(*, network: bool, cwd: str) -> list[str]:
    """bubblewrap's arguments for one command, up to (not including) `--`."""
    argv = [
        "bwrap",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        # the fresh /tmp first: a runtime under the host's /tmp (a venv in a checkout there) is
        # then bound on top of it instead of hidden by it
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/dev/shm",
        *_system_args(),
    ]
    # always (`network` is ignored): what a command reaches is its Egress, relayed in (_network.py)
    argv.insert(1, "--unshare-net")
    if os.geteuid() != 0:
        argv.insert(1, "--unshare-user")  # unprivileged: the user namespace maps our own uid
    return [*argv, "--chdir", cwd]


def drop_to(uid: int, gid: int) -> list[str]:
    """As root, bubblewrap sets up the namespaces and mounts (it can reach every source path);
    the command itself then runs as `uid` with no capabilities and no way to gain any."""
    return [
        "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
    ]  # fmt: skip


def probe_argv() -> list[str]:
    """The isolation probe: a sandboxed `true`, as nobody when root (like a session)."""
    drop = drop_to(NOBODY, NOBODY) if os.geteuid() == 0 else []
    argv = [*base_argv(network=False, cwd="/"), "--seccomp", str(LAUNCH_FD)]
    return launcher(argv, cgroup_procs=[]) + ["--", *drop, "/bin/sh", "-c", "exit 0"]


LAUNCH_FD = 9
"""The descriptor `launcher` opens the seccomp program on (one digit: any shell can redirect it)."""


def launcher(bwrap_argv: list[str], *, cgroup_procs: Sequence[str]) -> list[str]:
    """A command line that starts `bwrap_argv` (which reads its filter from `LAUNCH_FD`) from any
    process: a shell joins the session's cgroup (`cgroup_procs` files), opens the compiled filter
    on `LAUNCH_FD` and execs bubblewrap. For callers that spawn the sandbox from a process of
    their own; `Sandbox.run` and `popen` do the same in a preexec, without the shell."""
    joins = "".join(f"echo 0 > {shlex.quote(procs)} || exit 125; " for procs in cgroup_procs)
    return ["/bin/sh", "-c", f'{joins}exec "$@" {LAUNCH_FD}< "$0"', program_path(), *bwrap_argv]


# --- uids: one per session, leased across every server on the host ---------------------------


class _UidLease:
    """A uid held through an flock on `/run/openenv-sandbox/<uid>.lock` (released if we die)."""

    def __init__(self) -> None:
        base = int(os.environ.get(UID_BASE_ENV, DEFAULT_UID_BASE))
        count = int(os.environ.get(UID_COUNT_ENV, DEFAULT_UID_COUNT))
        LEASE_DIR.mkdir(mode=0o700, exist_ok=True)
        for uid in range(base, base + count):
            fd = os.open(LEASE_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EAGAIN, errno.EACCES):
                    continue
                raise
            with _held_lock:
                if uid in _held:  # flock is per open file: this process may hold it already
                    os.close(fd)
                    continue
                _held.add(uid)
            self.uid, self._fd = uid, fd
            return
        raise SandboxError(
            f"all {count} sandbox uids from {base} are in use; raise {UID_COUNT_ENV} or close sessions"
        )

    def previous(self) -> list[str]:
        """What the last holder recorded and did not clear (it died before `close()`): its folder,
        then its cgroups."""
        return _read_record(self._fd)

    def record(self, folder: Path | None, cgroups: Sequence[str] = ()) -> None:
        """Note the session's folder and cgroups in the lease file, so a later holder can remove
        them if we die."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            if folder is not None:
                os.pwrite(self._fd, "\n".join([str(folder), *cgroups]).encode(), 0)

    def release(self) -> None:
        with _held_lock:
            _held.discard(self.uid)
        with contextlib.suppress(OSError):
            os.close(self._fd)


_held: set[int] = set()
_held_lock = threading.Lock()
_swept = False


def _read_record(fd: int) -> list[str]:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return [line for line in os.pread(fd, 8192, 0).decode().splitlines() if line.strip()]
    return []


def remove_leftover(record: list[str]) -> None:
    """Remove a dead server's session (as recorded in its lease): its folder, only a root-owned
    real folder named `openenv-*`, never a link (its tmpfs detached first), then its cgroups."""
    folder = record[0] if record else ""
    if folder.startswith("/"):
        path = Path(folder)
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and path.name.startswith("openenv-"):
                unmount(path)
                remove_tree(path)
    for cgroup in record[1:]:
        remove_stale_cgroup(cgroup)


def sweep_stale_leases() -> None:
    """Once per process: kill what dead servers' sessions left (processes and folders), for
    every uid whose lease nobody holds now."""
    global _swept
    with _held_lock:
        if _swept:
            return
        _swept = True
        held = set(_held)
    with contextlib.suppress(OSError):
        for entry in os.scandir(LEASE_DIR):
            uid_text = entry.name.removesuffix(".lock")
            if not uid_text.isdigit() or int(uid_text) in held:
                continue
            try:
                fd = os.open(entry.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                record = _read_record(fd)
                if record:
                    kill_uid(int(uid_text))
                    remove_leftover(record)
                    os.ftruncate(fd, 0)
            except OSError:
                pass  # held by a live server
            finally:
                os.close(fd)


def kill_uid(uid: int, *, rounds: int = 50) -> int:
    """SIGKILL every process of `uid` (any namespace) until none is left; returns how many."""
    killed = 0
    me = os.getpid()
    for _ in range(rounds):
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) != me:
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        found.append(int(entry.name))
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.01)
    return killed


class _Admission:
    """How a command joins its session's cgroup under cgroup v2 without a migration on its path.

    Moving a process into a v2 cgroup waits for the kernel's global cgroup lock (an RCU grace
    period: 10 to 20 ms, measured on an idle 16-core host and on this busy 2-core one), and a
    preexec that does it serially forces a full fork too. (Under v1 a child joins itself through
    `tasks`, which skips that lock: `SessionCgroup.join`, in the preexec.) Instead bubblewrap
    starts (with `vfork`, no preexec) and waits on a pipe (`--block-fd`) once its namespaces are
    set up, before it runs the command; meanwhile the server moves bubblewrap's processes into the
    cgroup and sets their rlimits, then writes the byte that lets it go on. The move overlaps
    bubblewrap's own setup. If anything fails, the command is killed before it ran."""

    def __init__(self, cgroup: SessionCgroup, limits: SandboxLimits) -> None:
        self.cgroup, self.limits = cgroup, limits
        self.read_end, self._write_end = os.pipe()
        self._closed = False

    def admit(self, proc: subprocess.Popen[bytes], *, timeout_s: float = 10.0) -> None:
        """Raises OSError (or TimeoutError) when bubblewrap's processes could not be bounded."""
        pids = _bubblewrap_processes(proc, timeout_s=timeout_s)
        self.cgroup.adopt(pids)
        for pid in pids:
            limit_process(pid, self.limits, self.limits.max_processes)
        os.write(self._write_end, b"1")

    def close(self) -> None:
        """Close both ends (bubblewrap reads EOF on the pipe as a go: only after it was admitted,
        or killed)."""
        if not self._closed:
            self._closed = True
            os.close(self.read_end)
            os.close(self._write_end)


def _children(pid: int) -> list[int]:
    """The children of `pid` (its only thread's `children` list; a scan of /proc without it)."""
    with contextlib.suppress(FileNotFoundError):
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _bubblewrap_processes(proc: subprocess.Popen[bytes], *, timeout_s: float) -> list[int]:
    """bubblewrap and the processes it has made, once it has made its namespaces' first one."""
    deadline = time.monotonic() + timeout_s
    while not _children(proc.pid):
        if proc.poll() is not None:
            return []  # it failed before it got there; its error is in its output
        if time.monotonic() > deadline:
            raise TimeoutError(f"bubblewrap made no sandbox process in {timeout_s:g} s")
        time.sleep(0.0002)
    tree, frontier = [proc.pid], [proc.pid]
    while frontier:
        frontier = [child for pid in frontier for child in _children(pid)]
        tree += frontier
    return tree


def _mib(size: int | None) -> str:
    return "no limit" if size is None else f"{size / 1024**2:g} MiB"


# --- the sandbox ----------------------------------------------------------------------------------


class Sandbox:
    """One session's sandbox (see the module's docstring), the contract of every isolation mode.

    `Sandbox(...)` makes the class of the mode in force (`isolation`, default `isolation_mode()`):
    `BubblewrapSandbox`, or `UnisolatedSandbox` under the operator's opt-out. Environments build
    theirs with `Sandbox.from_manifest`, which reads every setting from the manifest. A mode
    implements the four hooks below that raise `NotImplementedError` here (`_take_user`,
    `_bound`, `_execute`, `_start`); the base is not an `abc.ABC` only because `Sandbox(...)`
    itself stays the way to make one.
    """

    isolation: ClassVar[Isolation]
    """The mode this class implements."""
    namespaced: ClassVar[bool]
    """Whether each command runs in namespaces of its own: then `mounts` (over system files or
    `/tmp` too) are its whole view, and its processes and network are its own."""

    def __new__(cls, *args: Any, isolation: Isolation | None = None, **kwargs: Any) -> Sandbox:
        if cls is Sandbox:
            mode = isolation or isolation_mode()
            cls = BubblewrapSandbox if mode is Isolation.BWRAP else UnisolatedSandbox
        return super().__new__(cls)

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        name: str = "session",
        base_dir: str | Path | None = None,
        mounts: Sequence[Mount] = (),
        isolation: Isolation | None = None,
        network: Egress | None = None,
        user: str | None = None,
    ) -> None:
        """Take the session's uid and make its folder (with `work/`, the default working directory).

        Args:
            limits: the default limits of each command.
            name: part of the folder's name (`openenv-<name>-XXXX`).
            base_dir: where the folder is made (default: the system temp dir).
            mounts: host paths every command sees (read-only unless `writable`).
            isolation: default: bubblewrap, or the opt-out when the operator set it.
            network: what every command may reach (default nothing); `from_manifest` gives the
                manifest's egress for the phase.
            user: the name the session's uid goes by (default: `limits.sandbox_user`, else `nobody`).

        Raises:
            IsolationUnavailable: bubblewrap cannot run here and the operator did not opt out.
            SandboxError: the session cannot get a user of its own (no uid free; the opt-out's
                user missing or root).
        """
        if isolation is not None and isolation is not self.isolation:
            raise ValueError(f"{type(self).__name__} runs {self.isolation.value}, not {isolation.value}")
        self.limits = limits or SandboxLimits()
        self.user = user or self.limits.sandbox_user or "nobody"
        self.mounts = list(mounts)
        self.network = network or Egress()
        self._as_root = os.geteuid() == 0
        self._lease: _UidLease | None = None
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._closed = False
        self.cgroup: SessionCgroup | None = None
        """The session's cgroup (memory and process bounds); None where cgroups cannot be had."""
        self.workspace_bounded = False
        """Whether the session's folder is a bounded tmpfs."""
        self.uid, self.gid = self._take_user()
        try:
            base = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
            base.mkdir(parents=True, exist_ok=True)
            self.root = Path(tempfile.mkdtemp(prefix=f"openenv-{name}-", dir=base))
            os.chmod(self.root, 0o711 if self._as_root else 0o700)
            if self._lease is not None:
                self._lease.record(self.root)
                self._bound()
            self.workspace = self.make_dir("work")
        except BaseException:
            self._teardown()
            raise

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest | ManifestSandbox | None,
        *,
        phase: Literal["agent", "grading"] = "agent",
        name: str = "session",
        base_dir: str | Path | None = None,
        mounts: Sequence[Mount] = (),
        isolation: Isolation | None = None,
    ) -> Sandbox:
        """The sandbox an environment's manifest describes: its `sandbox:` section's limits
        (`SandboxLimits.from_manifest`, the session bounds included) and user, the isolation in
        force here, and its `network:` section's egress for `phase` (`Egress.from_manifest`:
        `allow` for the agent's phase, `grading_allow` for a grader's sandbox, with the
        operator's `OPENENV_EGRESS_PINS`). Given the `sandbox:` section alone, or None, the
        sandbox reaches nothing.

        Raises:
            IsolationUnavailable: bubblewrap cannot run here and the operator did not opt out.
            SandboxError: as for `Sandbox(...)`.
        """
        from ..manifest import Manifest
        from ..manifest import Sandbox as ManifestSandbox

        if isinstance(manifest, Manifest):
            section, network = manifest.sandbox or ManifestSandbox(), Egress.from_manifest(manifest.network, phase=phase)
        else:
            section, network = manifest or ManifestSandbox(), Egress()
        return cls(
            limits=SandboxLimits.from_manifest(section), name=name, base_dir=base_dir, mounts=mounts,
            isolation=isolation, network=network, user=section.user,
        )  # fmt: skip

    def _take_user(self) -> tuple[int, int]:
        """The uid and gid the session's commands run as (taking a lease when the mode needs one)."""
        raise NotImplementedError

    def _bound(self) -> None:
        """The session-wide kernel bounds, where the mode and this host give them (its uid leased)."""
        raise NotImplementedError

    # --- folders ------------------------------------------------------------------------------

    @property
    def privileged(self) -> bool:
        """Whether the sandbox user differs from the server's (the server is root)."""
        return self.uid != os.getuid()

    def make_dir(self, name: str, *, writable: bool = True) -> Path:
        """A folder in the session's folder (made again if missing). Writable: `root:<session gid>`
        0770 as root (the agent works in it through its group but cannot lock root out or remove
        it); else root-owned 0755. Without root: the server's own, 0700."""
        folder = self.root / name
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(exist_ok=True)
        if self._as_root:
            os.chown(folder, 0, self.gid if writable else 0)
            os.chmod(folder, 0o770 if writable else 0o755)
        else:
            os.chmod(folder, 0o700)
        return folder

    def give(self, path: Path) -> None:
        """Hand a file or tree the server wrote to the sandbox user."""
        if self.privileged:
            from ._fs import chown_tree

            chown_tree(path, self.uid, self.gid)

    def python(self) -> str:
        """An interpreter the session's commands can run: this server's (bubblewrap shows its
        runtime to every command), or where the sandbox user cannot reach it (the opt-out, as
        root, with a private runtime) the system's `python3`."""
        return PYTHON

    # --- commands ---------------------------------------------------------------------------

    def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        mounts: Sequence[Mount] = (),
        network: bool = False,
        seccomp_fd: int | None = None,
        block_fd: int | None = None,
    ) -> list[str]:
        """The command line that runs `argv` in this sandbox from any process (as the session's
        user; the caller applies the limits). `cwd`, `mounts`, `network`, `seccomp_fd` and
        `block_fd` are for modes with namespaces."""
        return [*(drop_to(self.uid, self.gid) if self.privileged else []), *argv]

    def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        timeout_s: float | None = None,
        max_output_bytes: int | None = None,
        mounts: Sequence[Mount] = (),
        network: bool | Egress = False,
        limits: SandboxLimits | None = None,
    ) -> CommandResult:
        """Run one command in the sandbox; never raises for anything the command does.

        Args:
            command: a shell command line (`/bin/bash -c`), or an argument list.
            cwd: its working directory (default `work/`); if missing, exit code 126.
            env: its whole environment (default: PATH, HOME=cwd, LANG). Nothing of the server's
                own environment is passed on.
            stdin: fed to its standard input.
            timeout_s: wall-clock limit (default: the sandbox's limits).
            max_output_bytes: bytes kept of stdout and of stderr each.
            mounts: extra host paths for this command only.
            network: what the command may reach: `False`, the sandbox's own egress (`network`,
                nothing by default); `True`, that plus the endpoints of the agent launch being
                run (`launch_egress`, set by `AgentHost.run_agent`: its model endpoint); an
                `Egress`, exactly that. Never the host's network itself (except under the
                opt-out, which has no namespaces).
            limits: replaces the sandbox's limits for this command.

        Raises:
            SandboxError: the sandbox is closed, or its egress proxy could not start.
            SandboxKilled: the host killed the sandbox (`kill_all`, `close`) while the command ran:
                its end is no result of the command's (a grader must not score it).
        """
        options: dict[str, Any] = dict(
            cwd=cwd, env=env, stdin=stdin, timeout_s=timeout_s, max_output_bytes=max_output_bytes,
            mounts=mounts, network=network, limits=limits,
        )  # fmt: skip
        kills = self._kills
        result = self._dispatch(command, self._egress(network), options)
        if self._kills != kills:
            raise SandboxKilled(
                f"the sandbox was killed while the command ran (exit code {result.exit_code} after {result.duration_s:.2f} s)"
            )
        return result

    def _egress(self, network: bool | Egress) -> Egress:
        if isinstance(network, Egress):
            return network
        return self.network.merged(current_launch_egress()) if network else self.network

    def _dispatch(self, command: str | Sequence[str], egress: Egress, options: dict[str, Any]) -> CommandResult:
        """Run with `egress` (modes without namespaces cannot hold a command to it: they ignore it)."""
        if tracing.enabled():
            return self._run_traced(command, options)
        return self._run(command, **options)

    def _run_traced(self, command: str | Sequence[str], options: dict[str, Any]) -> CommandResult:
        """`_run` in a span `openenv.sandbox.run` (the program's name, exit code, timeout, duration)."""
        program = command.split(None, 1)[0] if isinstance(command, str) and command.strip() else "bash"
        if not isinstance(command, str):
            program = os.path.basename(command[0]) if command else ""
        attributes = {"process.executable.name": program, "openenv.sandbox.isolation": self.isolation.value}
        with tracing.span("openenv.sandbox.run", attributes=attributes) as span:
            result = self._run(command, **options)
            tracing.set_attributes(span, {
                "process.exit.code": result.exit_code, "openenv.sandbox.timed_out": result.timed_out,
                "openenv.sandbox.duration_s": round(result.duration_s, 4),
            })  # fmt: skip
            return result

    def _run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None,
        env: Mapping[str, str] | None,
        stdin: str | bytes | None,
        timeout_s: float | None,
        max_output_bytes: int | None,
        mounts: Sequence[Mount],
        network: bool | Egress,
        limits: SandboxLimits | None,
    ) -> CommandResult:
        self._check_open()
        limits = limits or self.limits
        update: dict[str, object] = {}
        if timeout_s is not None:
            update["timeout_s"] = timeout_s
        if max_output_bytes is not None:
            update["max_output_bytes"] = max_output_bytes
        if update:
            limits = limits.model_copy(update=update)
        folder = Path(cwd) if cwd is not None else self.workspace
        argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
        environment = dict(env) if env is not None else {"PATH": DEFAULT_PATH, "HOME": str(folder), "LANG": "C.UTF-8"}
        return self._execute(argv, cwd=folder, env=environment, stdin=stdin, limits=limits, mounts=mounts)

    def _execute(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: str | bytes | None,
        limits: SandboxLimits,
        mounts: Sequence[Mount],
    ) -> CommandResult:
        """Run `argv` to its end under `limits` as this mode isolates it."""
        raise NotImplementedError

    def popen(
        self,
        argv: Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        mounts: Sequence[Mount] = (),
        network: bool = False,
        stderr: int | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[bytes]:
        """Start a long-lived process in the sandbox with stdin/stdout pipes (e.g. a worker that
        answers a grader). Killing it (`proc.kill()`) ends its whole pid namespace; `close()` ends
        it too. The caller bounds its waits. It has no network (`network` must stay False).

        Raises:
            SandboxError: the sandbox is closed.
        """
        self._check_open()
        if network:
            raise ValueError("a long-lived sandboxed process has no network; run the command with Sandbox.run(network=...)")
        folder = Path(cwd) if cwd is not None else self.workspace
        environment = dict(env) if env is not None else {"PATH": DEFAULT_PATH, "HOME": str(folder), "LANG": "C.UTF-8"}
        proc = self._start(list(argv), cwd=folder, env=environment, mounts=mounts, stderr=stderr)
        self._procs = {p for p in self._procs if p.poll() is None}
        self._procs.add(proc)
        return proc

    def _start(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], mounts: Sequence[Mount], stderr: int | None
    ) -> subprocess.Popen[bytes]:
        """Start `argv` with stdin/stdout pipes, as this mode isolates it."""
        raise NotImplementedError

    # --- the end ----------------------------------------------------------------------------

    _kills = 0
    """Counts `kill_all`'s starts and ends: a command that saw it change was killed by the host
    (counted at both ends: a kill that began before the command and still ran when it started
    reaches it too)."""

    def kill_all(self) -> int:
        """Kill every process this session started (as root: every process of its uid); a
        command running meanwhile raises `SandboxKilled`."""
        self._kills += 1
        try:
            return self._kill_all()
        finally:
            self._kills += 1

    def _kill_all(self) -> int:
        killed = 0
        for proc in list(self._procs):
            if proc.poll() is None:
                kill_session(proc.pid)
                killed += 1
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self._procs.clear()
        if self.privileged and self.uid not in (0, os.getuid()):
            killed += kill_uid(self.uid)
        if self.cgroup is not None:
            self.cgroup.kill()  # what runs in the cgroup under another uid (the launcher, bubblewrap)
        return killed

    def close(self) -> None:
        """Kill what is left, remove the folder, return the uid. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.kill_all()
        finally:
            self._teardown()

    def _teardown(self) -> None:
        """Detach the tmpfs, remove the folder and the cgroup, return the uid (best effort: what
        stays is recorded in the lease, for the uid's next holder)."""
        try:
            if hasattr(self, "root"):
                if self.workspace_bounded:
                    unmount(self.root)
                remove_tree(self.root)
            cgroup_gone = self.cgroup is None or self.cgroup.remove()
            if self._lease is not None and not (hasattr(self, "root") and self.root.exists()) and cgroup_gone:
                self._lease.record(None)
        finally:
            self._release()

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed and hasattr(self, "root"):
                self.close()


class BubblewrapSandbox(Sandbox):
    """Every command in fresh namespaces under bubblewrap, as a leased uid of its own when the
    server is root, in the session's cgroup and bounded tmpfs where the host gives them."""

    isolation = Isolation.BWRAP
    namespaced = True

    def _take_user(self) -> tuple[int, int]:
        if not self._as_root:
            return os.getuid(), os.getgid()
        sweep_stale_leases()
        self._lease = _UidLease()
        uid = self._lease.uid
        kill_uid(uid)  # a crashed server's leftovers: its processes, then its folder and cgroups
        remove_leftover(self._lease.previous())
        return uid, uid

    def _bound(self) -> None:
        """The session-wide kernel bounds, where this host gives them (`isolation_report()` says
        which it does not): the folder becomes a bounded tmpfs, and a cgroup is made."""
        limits = self.limits
        if tmpfs_support() is None and (limits.workspace_bytes is not None or limits.workspace_inodes is not None):
            mount_tmpfs(self.root, size_bytes=limits.workspace_bytes, inodes=limits.workspace_inodes, mode=0o711)
            self.workspace_bounded = True
        if cgroup_support().parents and (
            limits.session_memory_bytes is not None or limits.session_max_processes is not None
        ):
            self.cgroup = SessionCgroup(
                str(self.uid), memory_bytes=limits.session_memory_bytes, max_processes=limits.session_max_processes
            )
            if self._lease is not None:
                self._lease.record(self.root, self.cgroup.paths)

    def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        mounts: Sequence[Mount] = (),
        network: bool = False,
        seccomp_fd: int | None = None,
        block_fd: int | None = None,
    ) -> list[str]:
        """The command line that runs `argv` in this sandbox, from any process: a short shell joins
        the session's cgroup and hands bubblewrap the seccomp filter (`launcher`). With
        `seccomp_fd` (a descriptor the caller passes to the child, which also joins the cgroup
        itself), bubblewrap alone; with `block_fd`, bubblewrap waits for a byte on it before it
        runs `argv` (`--block-fd`: see `_Admission`)."""
        args = base_argv(network=network, cwd=str(cwd))
        # /tmp is the sandbox's own tmpfs: folders made in it are not the host's, so they get 0755
        # too (else a session folder under the host's /tmp is reachable only by its relative cwd)
        covered = ["/proc", "/dev", *SYSTEM_DIRS, *_runtime_dirs()]
        binds: list[str] = [*_parent_dirs(str(self.root), covered), "--bind", str(self.root), str(self.root)]
        covered.append(str(self.root))
        sources = {str(self.root): str(self.root)}
        for mount in [*self.mounts, *mounts]:
            target = str(mount.target or mount.source)
            flag = "--bind" if mount.writable else "--ro-bind"
            binds += [*_parent_dirs(target, covered, sources), flag, str(mount.source), target]
            covered.append(target)
            sources[target] = str(mount.source)
        chdir = args.index("--chdir")
        drop = drop_to(self.uid, self.gid) if self.privileged else []
        filter_fd = LAUNCH_FD if seccomp_fd is None else seccomp_fd
        block = ["--block-fd", str(block_fd)] if block_fd is not None else []
        bwrap = [*args[:chdir], *binds, *block, "--seccomp", str(filter_fd), *args[chdir:]]
        if seccomp_fd is None:
            bwrap = launcher(bwrap, cgroup_procs=self._cgroup_procs())
        return [*bwrap, "--", *drop, *argv]

    def _cgroup_procs(self) -> list[str]:
        return self.cgroup.join_files if self.cgroup is not None else []

    def _preexec(self, limits: SandboxLimits) -> Callable[[], None]:
        cgroup = self.cgroup
        if cgroup is not None:
            join = cgroup.join

            def join_and_limit() -> None:
                join()  # before exec: bubblewrap and all it starts count in the session's cgroup
                apply_limits(limits, None, limits.max_processes, None)

            return join_and_limit
        if self.privileged:
            # bubblewrap starts as root; RLIMIT_NPROC binds the session's uid once setpriv drops to it
            return lambda: apply_limits(limits, None, limits.max_processes, None)
        nproc = None
        if limits.max_processes is not None:
            # without a uid of its own, the limit is above what this user already runs
            nproc = count_processes(self.uid) + limits.max_processes + 8
        return lambda: apply_limits(limits, None, nproc, None)

    def _dispatch(self, command: str | Sequence[str], egress: Egress, options: dict[str, Any]) -> CommandResult:
        if egress.empty:
            return super()._dispatch(command, egress, options)
        return self._run_with_egress(command, egress, options)

    def _run_with_egress(self, command: str | Sequence[str], egress: Egress, options: dict[str, Any]) -> CommandResult:
        """`run` with `egress` relayed into the command's network namespace while it runs."""
        self._check_open()
        with egress_plan(egress) as plan:
            argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
            cwd = Path(options["cwd"]) if options["cwd"] is not None else self.workspace
            env = options["env"] if options["env"] is not None else {"PATH": DEFAULT_PATH, "HOME": str(cwd), "LANG": "C.UTF-8"}
            binds = [Mount(source=source, target=Path(target)) for source, target in plan.binds]
            options = {**options, "env": {**env, **plan.env}, "mounts": [*options["mounts"], *binds], "network": False}
            if tracing.enabled():
                return self._run_traced([*plan.prefix, *argv], options)
            return self._run([*plan.prefix, *argv], **options)

    def _execute(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: str | bytes | None,
        limits: SandboxLimits,
        mounts: Sequence[Mount],
    ) -> CommandResult:
        if not cwd.is_dir():
            return CommandResult(
                stdout="", stderr=f"working directory {cwd} does not exist (was it deleted?)", exit_code=126, duration_s=0.0
            )
        before = self.cgroup.begin_command() if self.cgroup is not None else None
        seccomp_fd = program_fd()
        gate = _Admission(self.cgroup, limits) if self.cgroup is not None and not self.cgroup.joins_fast else None
        try:
            result = run_process(
                self.wrap(argv, cwd=cwd, mounts=mounts, seccomp_fd=seccomp_fd, block_fd=gate.read_end if gate else None),
                limits=limits,
                env=env,
                preexec=None if gate else self._preexec(limits),
                stdin=stdin,
                cwd="/",
                pass_fds=(seccomp_fd, gate.read_end) if gate else (seccomp_fd,),
                admit=gate.admit if gate else None,
            )
        finally:
            os.close(seccomp_fd)
            if gate is not None:
                gate.close()
        return self._with_bounds_hit(result, before)

    def _with_bounds_hit(self, result: CommandResult, before: Counters | None) -> CommandResult:
        """Say in the result (a flag, and a line in stderr) when the session's cgroup bounds were hit
        while the command ran (by it, or by another command of the session running meanwhile)."""
        if self.cgroup is None or before is None:
            return result
        after = self.cgroup.counters()
        killed = result.exit_code in (137, -signal.SIGKILL) and not result.timed_out
        if after.oom_kills == before.oom_kills and killed:
            # the kernel counts an OOM kill just after it sends the SIGKILL: a killed command may
            # be reaped before the count moves
            deadline = time.monotonic() + 0.2
            while after.oom_kills == before.oom_kills and time.monotonic() < deadline:
                time.sleep(0.005)
                after = self.cgroup.counters()
        oom = after.oom_kills - before.oom_kills
        notes = []
        # a SIGKILL while the memory use stood at its limit is the OOM killer's too, even where the
        # kernel did not count it as such (seen under cgroup v1 in a container)
        if oom > 0 or (killed and after.memory_limit_reached > before.memory_limit_reached):
            result.memory_limit_hit = True
            count = f"; {oom} process(es) killed" if oom > 0 else ""
            notes.append(f"[killed: the session's memory limit ({_mib(self.cgroup.memory_bytes)}) was reached{count}]")
        if after.forks_refused > before.forks_refused:
            result.process_limit_hit = True
            notes.append(f"[the session's process limit ({self.cgroup.max_processes} processes) was reached: a fork failed]")
        if notes:
            result.stderr = "\n".join([result.stderr.rstrip("\n"), *notes]).lstrip("\n")
        return result

    def _start(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], mounts: Sequence[Mount], stderr: int | None
    ) -> subprocess.Popen[bytes]:
        seccomp_fd = program_fd()
        gate = _Admission(self.cgroup, self.limits) if self.cgroup is not None and not self.cgroup.joins_fast else None
        try:
            proc = subprocess.Popen(
                self.wrap(argv, cwd=cwd, mounts=mounts, seccomp_fd=seccomp_fd, block_fd=gate.read_end if gate else None),
                cwd="/", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                preexec_fn=None if gate else self._preexec(self.limits), start_new_session=gate is not None,
                close_fds=True, pass_fds=(seccomp_fd, gate.read_end) if gate else (seccomp_fd,),
            )  # fmt: skip
            if gate is not None:
                try:
                    gate.admit(proc)
                except Exception:
                    kill_session(proc.pid)
                    proc.wait(timeout=10)
                    raise
        finally:
            os.close(seccomp_fd)
            if gate is not None:
                gate.close()
        return proc


class UnisolatedSandbox(Sandbox):
    """The operator's opt-out (`OPT_OUT_ENV`): commands run through `run_command`, same limits, no
    namespaces, no egress control; as root, as the manifest's user (it must exist and not be
    root). Not a sandbox: `/health` and `openenv validate` say so."""

    isolation = Isolation.NONE
    namespaced = False

    def _take_user(self) -> tuple[int, int]:
        if not self._as_root:
            return os.getuid(), os.getgid()
        try:
            ids = _user_ids(self.limits.sandbox_user)
        except KeyError:
            raise SandboxError(f"the opt-out runs commands as {self.limits.sandbox_user!r}, which does not exist here") from None
        if ids is None or ids[0] == 0:
            raise SandboxError(f"the opt-out runs commands as {self.limits.sandbox_user!r}, which must not be root")
        self.user = str(self.limits.sandbox_user)  # the user it runs as is the name it goes by
        return ids

    def _bound(self) -> None:
        """None: without namespaces there is no session to bound (and no lease)."""

    def python(self) -> str:
        if not self.privileged:
            return PYTHON
        return shutil.which("python3", path=SYSTEM_PATH) or PYTHON

    def _execute(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: str | bytes | None,
        limits: SandboxLimits,
        mounts: Sequence[Mount],
    ) -> CommandResult:
        user = limits.sandbox_user if self._as_root else None
        text = stdin.decode() if isinstance(stdin, bytes) else stdin
        return run_command(argv, cwd=cwd, limits=limits.model_copy(update={"sandbox_user": user}), env=env, stdin=text)

    def _start(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], mounts: Sequence[Mount], stderr: int | None
    ) -> subprocess.Popen[bytes]:
        ids = (self.uid, self.gid) if self.privileged else None
        limits = self.limits
        return subprocess.Popen(
            argv, cwd=str(cwd), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            preexec_fn=lambda: apply_limits(limits, ids, None, None), close_fds=True,
        )  # fmt: skip
