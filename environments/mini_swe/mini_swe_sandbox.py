"""Where mini_swe's episodes run: per-session workspaces, the agent's Python, and grading trees.

One `SandboxHost` per server process holds what every session shares:

- a private base directory (`mkdtemp`, mode 0711: the sandbox user may pass through it but
  cannot list it, so it cannot find other sessions' workspaces or a grading tree by name);
- the sandbox user (the manifest's `sandbox.user`, else `nobody`) when the server is root;
- the command limits (from the manifest's `sandbox:` block) for `openenv_sdk.sandbox.run_command`;
- the agent's runtime: `python`, `python3` and `pytest` wrappers on `PATH`, running an
  interpreter with pytest that the sandbox user can execute.

Every session gets `<base>/<random>/` (0711, server-owned) holding `repo/` (the workspace, owned
by the sandbox user) and `home/` (its `HOME` and `TMPDIR`). The agent cannot remove or replace
`repo/` itself, only what is inside it.

Grading (`build_grading_tree` + `run_pytest`) reads the agent's files without following
symlinks, writes them with the host's test files into a fresh tree the agent never saw
(server-owned and read-only for the sandbox user when the server is root), and runs pytest
there as the sandbox user with a small report plugin.
"""

from __future__ import annotations

import compileall
import contextlib
import difflib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from openenv_sdk.manifest import Sandbox, load_manifest
from openenv_sdk.sandbox import CommandResult, SandboxLimits, run_command

__all__ = [
    "WORKSPACE_ROOT_ENV",
    "GradingTree",
    "SandboxHost",
    "SessionDirs",
    "TreeTooLarge",
    "check_relative_path",
    "host",
    "read_tree",
]

HERE = Path(__file__).resolve().parent
WORKSPACE_ROOT_ENV = "MINI_SWE_WORKSPACE_ROOT"
"""Directory under which the server makes its base directory (default: the system temp dir)."""

SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache"})
MAX_TREE_BYTES = 32 * 1024 * 1024
MAX_TREE_FILES = 5000
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "mini-swe",
    "GIT_AUTHOR_EMAIL": "mini-swe@localhost",
    "GIT_COMMITTER_NAME": "mini-swe",
    "GIT_COMMITTER_EMAIL": "mini-swe@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class TreeTooLarge(Exception):
    """A directory holds more than the grader will copy."""


@dataclass(frozen=True)
class SandboxUser:
    """Who agent commands run as. `name` is None when the server is not root (no switch)."""

    name: str | None
    uid: int
    gid: int


def resolve_user(preferred: str) -> SandboxUser:
    """The sandbox user: `preferred`, else `nobody`; the server's own user when not root."""
    if os.geteuid() != 0:
        return SandboxUser(None, os.getuid(), os.getgid())
    for name in (preferred, "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return SandboxUser(name, entry.pw_uid, entry.pw_gid)
    raise RuntimeError(f"the server runs as root but neither sandbox user {preferred!r} nor 'nobody' exists")


def check_relative_path(path: str, what: str) -> str:
    """`path` as a normalised relative POSIX path inside a tree; raises ValueError otherwise."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or any(part in ("..", "") for part in path.split("/")) or "\0" in path:
        raise ValueError(f"{what} {path!r} must be a relative path inside the repository, without '..'")
    return pure.as_posix()


# --- reading the agent's files safely -------------------------------------------------------


def read_tree(
    top: Path, *, owner_uid: int | None = None, max_bytes: int = MAX_TREE_BYTES, max_files: int = MAX_TREE_FILES
) -> tuple[dict[str, bytes], list[str]]:
    """Regular files under `top` as `{relative posix path: bytes}`, and the paths skipped.

    Never follows a symlink (a link to a server file cannot leak it), never opens a FIFO or
    device (`O_NONBLOCK` + `fstat`), skips `.git`, `__pycache__`, `.pytest_cache`, and, when
    `owner_uid` is given, files owned by anyone else.

    Raises:
        TreeTooLarge: more than `max_files` files or `max_bytes` bytes.
    """
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    try:
        top_stat = os.lstat(top)
    except OSError:
        return files, skipped
    if not stat.S_ISDIR(top_stat.st_mode):
        if stat.S_ISLNK(top_stat.st_mode):
            skipped.append(".")
        return files, skipped
    total = 0
    for dirpath, dirnames, filenames, dirfd in os.fwalk(top, follow_symlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        prefix = os.path.relpath(dirpath, top)
        for name in sorted(filenames):
            rel = name if prefix == "." else f"{prefix}/{name}"
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
            except OSError:  # a symlink (ELOOP), gone, or unreadable
                skipped.append(rel)
                continue
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or (owner_uid is not None and info.st_uid != owner_uid):
                    skipped.append(rel)
                    continue
                if len(files) >= max_files or total + info.st_size > max_bytes:
                    raise TreeTooLarge(f"more than {max_files} files or {max_bytes} bytes under {top.name}/")
                chunks = []
                remaining = info.st_size
                while remaining > 0:
                    chunk = os.read(fd, min(remaining, 1 << 20))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    remaining -= len(chunk)
                data = b"".join(chunks)
                total += len(data)
                files[rel] = data
            finally:
                os.close(fd)
    return files, skipped


def _write_file(root: Path, rel: str, data: bytes, *, uid: int | None, gid: int | None, mode: int = 0o644) -> None:
    target = root / rel
    _make_dirs(root, target.parent, uid=uid, gid=gid)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        os.fchmod(fd, mode)
        if uid is not None and gid is not None:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _make_dirs(root: Path, directory: Path, *, uid: int | None, gid: int | None) -> None:
    missing = []
    current = directory
    while current != root and not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=0o755)
        os.chmod(path, 0o755)
        if uid is not None and gid is not None:
            os.lchown(path, uid, gid)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(top, topdown=False):
        for name in filenames + dirnames:
            os.lchown(os.path.join(dirpath, name), uid, gid)
    os.lchown(top, uid, gid)


def _remove_tree(path: Path) -> None:
    """Remove `path`; never changes anything outside it, and never raises."""
    top = os.path.abspath(path)

    def retry(function: Any, failed: str, _exc: Any) -> None:
        # not root: the agent may have taken our permission away on a directory inside the tree
        parent = os.path.dirname(os.path.abspath(failed))
        if function not in (os.rmdir, os.unlink, os.remove) or not (parent == top or parent.startswith(top + os.sep)):
            return
        with contextlib.suppress(OSError):
            os.chmod(parent, 0o700)
            function(failed)

    if os.path.lexists(top):
        with contextlib.suppress(OSError):
            shutil.rmtree(top, onerror=retry)


# --- sessions and grading trees -------------------------------------------------------------


@dataclass
class SessionDirs:
    """One session's directories: `root/repo` (the workspace) and `root/home` (HOME, TMPDIR)."""

    root: Path
    repo: Path
    home: Path


@dataclass
class GradingTree:
    """A fresh tree for one grading run; `remove()` when done."""

    root: Path
    repo: Path
    home: Path
    plugin_dir: Path
    report: Path
    kept: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


REPORT_PLUGIN = '''"""mini_swe's pytest report: every test's outcome, written as JSON at the end of the session."""
import json
import os

_outcomes = {}
_collect_errors = []
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append(report.nodeid)


def pytest_runtest_logreport(report):
    if report.when == "call":
        outcome = "skipped" if hasattr(report, "wasxfail") else report.outcome
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    previous = _outcomes.get(report.nodeid)
    if previous is None or _RANK[outcome] > _RANK[previous]:
        _outcomes[report.nodeid] = outcome


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["MINI_SWE_REPORT"], "w", encoding="utf-8") as handle:
        json.dump({"outcomes": _outcomes, "collect_errors": _collect_errors, "exitstatus": int(exitstatus)}, handle)
'''


class SandboxHost:
    """What every session of one server process shares (see the module docstring)."""

    def __init__(self, settings: Sandbox, *, root: str | Path | None = None) -> None:
        self.settings = settings
        self.user = resolve_user(settings.user)
        self.is_root = os.geteuid() == 0
        parent = root if root is not None else os.environ.get(WORKSPACE_ROOT_ENV) or None
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.base = Path(tempfile.mkdtemp(prefix="mini_swe-", dir=parent))
        os.chmod(self.base, 0o711)
        (self.base / _OWNER_FILE).write_text(_process_identity(os.getpid()) or "")
        # at exit; `openenv serve` dies by the SIGTERM uvicorn re-raises, so the next server
        # process also removes what dead ones left (`_remove_stale_bases`)
        self._finalizer = weakref.finalize(self, _remove_tree, self.base)
        self.limits = SandboxLimits(
            timeout_s=settings.command_timeout_s,
            max_output_bytes=settings.max_output_bytes,
            memory_bytes=settings.memory_bytes,
            max_processes=settings.max_processes,
            kill_after_output_bytes=max(1024, 64 * settings.max_output_bytes),
            sandbox_user=self.user.name,
        )
        self._lock = threading.Lock()
        self._commands_lock = threading.Lock()
        self._in_flight = 0
        self._runtime: dict[str, str] | None = None
        self._git: str | None = shutil.which("git", path=_SYSTEM_PATH)
        self._remove_stale_bases()
        if self.is_root:
            hidden = HERE / "hidden"
            if hidden.is_dir():  # serving from a checkout (not an image): keep the answers from the agent
                os.chmod(hidden, 0o700)

    # --- commands, and what escapes them --------------------------------------------------

    def _command(
        self, argv: str | list[str], *, cwd: Path, limits: SandboxLimits, env: dict[str, str], stdin: str | None = None
    ) -> CommandResult:
        with self._commands_lock:
            self._in_flight += 1
        try:
            return run_command(argv, cwd=cwd, limits=limits, env=env, stdin=stdin)
        finally:
            with self._commands_lock:
                self._in_flight -= 1

    def reap_escaped(self) -> list[int]:
        """Kill the sandbox user's processes that escaped their command (e.g. with `setsid`).

        `run_command` kills every process of a command's session; one that starts a session of
        its own outlives it. When the server is root and none of its commands is running, every
        process of the sandbox user orphaned to init (or to this server, when it is PID 1) is
        such an escapee: it is killed. Processes of other servers' commands (their parent is
        that server) are left alone. Returns the pids killed.
        """
        if not self.is_root or self.user.uid == 0:
            return []
        with self._commands_lock:
            if self._in_flight:
                return []
            table = _process_table()
            orphan_parents = {1, os.getpid()}
            doomed = []
            for pid, (uid, _) in table.items():
                if uid != self.user.uid:
                    continue
                ancestor, hops = pid, 0
                while ancestor in table and table[ancestor][0] == self.user.uid and hops < 256:
                    ancestor, hops = table[ancestor][1], hops + 1
                if ancestor in orphan_parents:
                    doomed.append(pid)
            for pid in doomed:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            return doomed

    # --- the agent's runtime ------------------------------------------------------------

    def command_env(self, dirs: SessionDirs) -> dict[str, str]:
        """The environment of an agent command in session `dirs`."""
        runtime = self.runtime()
        env = {
            "PATH": f"{runtime['bin']}:{_SYSTEM_PATH}",
            "HOME": str(dirs.home),
            "TMPDIR": str(dirs.home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            **_GIT_ENV,
        }
        if runtime["pythonpath"]:
            env["PYTHONPATH"] = runtime["pythonpath"]
        return env

    @property
    def python(self) -> str:
        """The interpreter agent commands and helpers run."""
        return self.runtime()["python"]

    @property
    def has_git(self) -> bool:
        return self._git is not None

    def runtime(self) -> dict[str, str]:
        """`{"python", "bin", "pythonpath"}`: an interpreter with pytest the sandbox user can run.

        The server's own interpreter when the sandbox user can run it (always in the image, and
        whenever the server is not root). Otherwise (root with a private interpreter, e.g. under
        /root) a system `python3` of the same version, with copies of pytest and its
        dependencies on `PYTHONPATH`.

        Raises:
            RuntimeError: no such interpreter exists on this machine.
        """
        with self._lock:
            if self._runtime is None:
                self._runtime = self._make_runtime()
            return self._runtime

    def _make_runtime(self) -> dict[str, str]:
        directory = self.base / "runtime"
        bin_dir = directory / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)
        os.chmod(bin_dir, 0o755)
        chosen: tuple[str, str] | None = None
        if self._probe(sys.executable, ""):
            chosen = (sys.executable, "")
        else:
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            candidates = [shutil.which(name, path=_SYSTEM_PATH) for name in (f"python{version}", "python3")]
            site = directory / "site"
            for candidate in dict.fromkeys(c for c in candidates if c):
                if self._probe(
                    candidate, "", check=f"import sys; assert '%d.%d' % sys.version_info[:2] == {version!r}"
                ):
                    _copy_distributions(["pytest"], site)
                    if self._probe(candidate, str(site)):
                        chosen = (candidate, str(site))
                        break
        if chosen is None:
            who = self.user.name or "the server's user"
            raise RuntimeError(
                f"mini_swe needs a Python with pytest that {who} can run; {sys.executable} is not "
                f"executable by it and no system python{sys.version_info.major}.{sys.version_info.minor} was found"
            )
        python, pythonpath = chosen
        for name, body in (
            ("python", f'exec {python} "$@"'),
            ("python3", f'exec {python} "$@"'),
            ("pytest", f'exec {python} -m pytest "$@"'),
        ):
            wrapper = bin_dir / name
            wrapper.write_text(f"#!/bin/sh\n{body}\n")
            os.chmod(wrapper, 0o755)
        return {"python": python, "bin": str(bin_dir), "pythonpath": pythonpath}

    def _probe(self, python: str, pythonpath: str, *, check: str = "import pytest") -> bool:
        env = {"PATH": _SYSTEM_PATH, "HOME": str(self.base), "LANG": "C.UTF-8"}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        limits = self.limits.model_copy(update={"timeout_s": 30.0})
        result = self._command([python, "-c", check], cwd=self.base, limits=limits, env=env)
        return result.exit_code == 0

    # --- sessions ---------------------------------------------------------------------------

    def new_session(self, source: Path) -> SessionDirs:
        """A fresh workspace holding a copy of `source`, owned by the sandbox user, under git
        (one commit, so `git diff` shows the agent's changes) when git is installed."""
        self.runtime()  # fail here, at reset, if no interpreter fits
        root = Path(tempfile.mkdtemp(prefix="s-", dir=self.base))
        os.chmod(root, 0o711)
        dirs = SessionDirs(root=root, repo=root / "repo", home=root / "home")
        try:
            dirs.repo.mkdir(mode=0o755)
            dirs.home.mkdir(mode=0o700)
            os.chmod(dirs.repo, 0o755)
            os.chmod(dirs.home, 0o700)
            files, _ = read_tree(source)
            for rel, data in files.items():
                mode = 0o755 if os.access(source / rel, os.X_OK) else 0o644
                _write_file(dirs.repo, rel, data, uid=None, gid=None, mode=mode)
            if self.is_root:  # last: a root without CAP_DAC_OVERRIDE cannot write what it gave away
                _chown_tree(dirs.repo, self.user.uid, self.user.gid)
                os.chown(dirs.home, self.user.uid, self.user.gid)
            if self._git is not None:
                script = "git init -q && git add -A && git commit -q -m 'initial commit'"
                result = self.run(script, dirs)
                if result.exit_code != 0:
                    raise RuntimeError(f"could not set up git in the workspace: {result.render()}")
        except BaseException:
            self.remove_session(dirs)
            raise
        return dirs

    def _remove_stale_bases(self) -> None:
        """Remove base directories of this kind whose server process is gone."""
        for path in self.base.parent.glob("mini_swe-*"):
            try:
                info = os.lstat(path)
                if path == self.base or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                    continue
                fd = os.open(path / _OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, encoding="ascii", errors="replace") as handle:
                    owner = handle.read(100).strip()
            except OSError:
                continue
            pid = owner.split(" ")[0]
            if not owner or not pid.isdigit() or _process_identity(int(pid)) == owner:
                continue  # alive (or not ours to judge)
            agent_owned = [*path.glob("s-*/repo"), *path.glob("s-*/home"), *path.glob("g-*/home")]
            self._remove(path, agent_owned)

    def remove_session(self, dirs: SessionDirs) -> None:
        self._remove(dirs.root, [dirs.repo, dirs.home])

    def remove_grading_tree(self, tree: GradingTree) -> None:
        self._remove(tree.root, [tree.home])

    def _remove(self, root: Path, agent_owned: list[Path]) -> None:
        """Remove `root`. The sandbox user empties what it owns first: a root server without
        CAP_DAC_OVERRIDE (a container's usual lot) cannot delete inside another user's directories."""
        present = [str(path) for path in agent_owned if path.is_dir()]
        if self.is_root and present:
            script = 'chmod -R u+rwX -- "$@" 2>/dev/null; rm -rf -- "$@" 2>/dev/null; chmod 755 -- "$@"; true'
            env = {"PATH": _SYSTEM_PATH, "HOME": str(root), "LANG": "C.UTF-8"}
            limits = self.limits.model_copy(update={"timeout_s": 30.0})
            self._command(["/bin/sh", "-c", script, "sh", *present], cwd=root, limits=limits, env=env)
        _remove_tree(root)

    def run(
        self,
        command: str | list[str],
        dirs: SessionDirs,
        *,
        timeout_s: float | None = None,
        stdin: str | None = None,
        max_output_bytes: int | None = None,
        kill_after_output_bytes: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> CommandResult:
        """Run an agent command in the session's workspace, as the sandbox user, under the limits
        (`extra_env` is added to the command's environment)."""
        update: dict[str, Any] = {}
        if timeout_s is not None:
            update["timeout_s"] = timeout_s
        if max_output_bytes is not None:
            update["max_output_bytes"] = max_output_bytes
            update["kill_after_output_bytes"] = max(self.limits.kill_after_output_bytes, 4 * max_output_bytes)
        if kill_after_output_bytes is not None:
            update["kill_after_output_bytes"] = max(update.get("kill_after_output_bytes", 0), kill_after_output_bytes)
        limits = self.limits.model_copy(update=update) if update else self.limits
        env = {**self.command_env(dirs), **(extra_env or {})}
        return self._command(command, cwd=dirs.repo, limits=limits, env=env, stdin=stdin)

    # --- grading ----------------------------------------------------------------------------

    def build_grading_tree(self, workspace: Path, source_paths: list[str], files: dict[str, str]) -> GradingTree:
        """A fresh tree: the agent's `source_paths` (read without following links; `conftest.py`
        files dropped) plus `files` from the host (tests, configuration), which win on conflict.

        Raises:
            TreeTooLarge: the agent's source paths hold too much to copy.
        """
        root = Path(tempfile.mkdtemp(prefix="g-", dir=self.base))
        os.chmod(root, 0o711)
        tree = GradingTree(
            root=root,
            repo=root / "repo",
            home=root / "home",
            plugin_dir=root / "plugin",
            report=root / "home" / "report.json",
        )
        try:
            owner = self.user.uid if self.is_root else None
            for directory in (tree.repo, tree.plugin_dir, tree.home):
                directory.mkdir(mode=0o755)
            os.chmod(tree.home, 0o711)  # the server reads the report back, without CAP_DAC_OVERRIDE
            if self.is_root:
                os.chown(tree.home, self.user.uid, self.user.gid)
            for source in source_paths:
                found, skipped = read_tree(workspace / source, owner_uid=owner)
                tree.skipped += [f"{source}/{rel}" for rel in skipped]
                for rel, data in found.items():
                    path = f"{source}/{rel}"
                    if rel.rsplit("/", 1)[-1] == "conftest.py":
                        tree.skipped.append(path)
                        continue
                    _write_file(tree.repo, path, data, uid=None, gid=None)
                    tree.kept.append(path)
            for rel, text in files.items():
                _write_file(tree.repo, rel, text.encode("utf-8"), uid=None, gid=None)
            _write_file(tree.plugin_dir, "mini_swe_report.py", REPORT_PLUGIN.encode(), uid=None, gid=None)
        except BaseException:
            self.remove_grading_tree(tree)
            raise
        return tree

    def run_pytest(
        self, tree: GradingTree, test_files: list[str], timeout_s: float
    ) -> tuple[CommandResult, dict[str, Any]]:
        """pytest on `test_files` in `tree`, as the sandbox user, in a fresh process."""
        runtime = self.runtime()
        pythonpath = ":".join(p for p in (str(tree.plugin_dir), runtime["pythonpath"]) if p)
        env = {
            "PATH": f"{runtime['bin']}:{_SYSTEM_PATH}",
            "HOME": str(tree.home),
            "TMPDIR": str(tree.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": pythonpath,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "MINI_SWE_REPORT": str(tree.report),
        }
        argv = [
            runtime["python"],
            "-m",
            "pytest",
            "-p",
            "mini_swe_report",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            "-q",
            "--no-header",
            "-rfE",
            "--rootdir",
            str(tree.repo),
            *test_files,
        ]
        limits = self.limits.model_copy(update={"timeout_s": timeout_s, "max_output_bytes": 64 * 1024})
        self.reap_escaped()  # nothing the agent left behind may watch or touch the run
        result = self._command(argv, cwd=tree.repo, limits=limits, env=env)
        report: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            fd = os.open(tree.report, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                loaded = json.loads(handle.read(8 * 1024 * 1024))
            if isinstance(loaded, dict):
                report = loaded
        return result, report


_OWNER_FILE = "owner"


def _process_identity(pid: int) -> str | None:
    """`"<pid> <start time>"`: names a process, not a recycled pid; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return f"{pid} {fields[19]}" if len(fields) > 19 else None


def _process_table() -> dict[int, tuple[int, int]]:
    """`{pid: (real uid, parent pid)}` of every live process (zombies left out), from /proc."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
            if fields["State"].split()[0] in ("Z", "X"):
                continue
            table[int(entry.name)] = (int(fields["Uid"].split()[0]), int(fields["PPid"].strip()))
        except (OSError, KeyError, ValueError):
            continue
    return table


def diff_trees(before: dict[str, bytes], after: dict[str, bytes], *, max_chars: int = 8000) -> tuple[list[str], str]:
    """Changed paths (`M path`, `A path`, `D path`) and a unified diff (cut at `max_chars`)."""
    changes: list[str] = []
    chunks: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        changes.append(f"{'A' if old is None else 'D' if new is None else 'M'} {path}")
        old_lines = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        new_lines = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
        chunks.extend(difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}"))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... diff cut at {max_chars} characters ...]\n"
    return changes, text


def _copy_distributions(names: list[str], target: Path) -> None:
    """Copy installed distributions `names` and what they require into `target` (a site dir)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    queue = list(names)
    target.mkdir(parents=True, exist_ok=True)
    while queue:
        name = re.sub(r"[-_.]+", "-", queue.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        for requirement in dist.requires or []:
            req = Requirement(requirement)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                queue.append(req.name)
        for file in dist.files or []:
            if file.parts and file.parts[0] == "..":
                continue  # scripts outside site-packages
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                destination = target / str(file)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)  # keeps mtimes, so copied bytecode stays valid
                cached = source.parent / "__pycache__"
                if source.suffix == ".py" and cached.is_dir():
                    for pyc in cached.glob(f"{source.stem}.*.pyc"):
                        (destination.parent / "__pycache__").mkdir(exist_ok=True)
                        shutil.copy2(pyc, destination.parent / "__pycache__" / pyc.name)
    # the sandbox user cannot write bytecode here: compile what was not copied
    compileall.compile_dir(str(target), quiet=1, workers=1)
    for path in [target, *target.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


_HOST: SandboxHost | None = None
_HOST_LOCK = threading.Lock()


def host() -> SandboxHost:
    """The server process's `SandboxHost`, made on first use from this folder's manifest."""
    global _HOST
    with _HOST_LOCK:  # exactly one: another one's finalizer would remove its base directory
        if _HOST is None:
            _HOST = SandboxHost(load_manifest(HERE).sandbox or Sandbox())
        return _HOST
