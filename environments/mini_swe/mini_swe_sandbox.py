"""Where mini_swe's episodes run: one `openenv_sdk.sandbox.Sandbox` per session, and grading runs.

One `SandboxHost` per server process holds what every session shares:

- a private base directory (`mkdtemp`, mode 0711) under which every session's sandbox folder
  and every grading sandbox is made;
- the manifest, from which every session's `Sandbox` is made (`Sandbox.from_manifest`: the
  `sandbox:` block's limits and user, the `network:` block's egress for the agent's phase);
- the runtime (`runtime/`, mounted read-only in every session's sandbox): `python`, `python3` and
  `pytest` wrappers on `PATH`, and a site directory holding copies of pytest and its dependencies
  (for the agent's own test runs).

Each session is a `Sandbox` (its own uid, its commands in fresh pid, mount, network, IPC and UTS
namespaces, every process killed when its command ends): `repo/` (the workspace, the sandbox
user's) and `home/` (its `HOME` and `TMPDIR`). Nothing of the host is visible to it but the
system, the Python runtime, its own folder and the runtime directory.

Grading is the SDK's (`openenv_sdk.grading.pytest_run.run_hidden_tests`, called by
`mini_swe_env.run_tests` with the session's sandbox); this module gives it the workspace's
reading (`read_tree`, without following links) and the signs of tampering (`workspace_tampering`).
"""

from __future__ import annotations

import compileall
import difflib
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from openenv_sdk.manifest import Manifest, load_manifest
from openenv_sdk.manifest import Sandbox as SandboxSettings
from openenv_sdk.sandbox import CommandResult, Mount, Sandbox, SandboxLimits, remove_tree

__all__ = [
    "WORKSPACE_ROOT_ENV",
    "SandboxHost",
    "SessionDirs",
    "TreeTooLarge",
    "check_relative_path",
    "diff_trees",
    "host",
    "read_tree",
    "workspace_tampering",
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


def _write_file(root: Path, rel: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write `root/rel` as the server (directories 0755, the file `mode`), never through a link."""
    target = root / rel
    missing = []
    current = target.parent
    while current != root and not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=0o755)
        os.chmod(path, 0o755)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


# --- what the agent may not change ----------------------------------------------------------

_STARTUP_FILES = ("sitecustomize.py", "usercustomize.py")
_PYTEST_CONFIG = ("pytest.ini", "tox.ini", "setup.cfg", ".pytest.ini")


def _pytest_section(text: bytes | None) -> str:
    """The `[tool.pytest...]` tables of a pyproject.toml (what pytest would read from it)."""
    if text is None:
        return ""
    kept, inside = [], False
    for line in text.decode("utf-8", "replace").splitlines():
        if line.lstrip().startswith("["):
            inside = line.strip().startswith(("[tool.pytest", "[[tool.pytest"))
        if inside:
            kept.append(line.rstrip())
    return "\n".join(kept)


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_") or name.endswith("_test.py")


def workspace_tampering(current: dict[str, bytes], pristine: dict[str, bytes], host_files: dict[str, str]) -> list[str]:
    """Signs that the agent worked on the grading rather than the code: test files edited or
    deleted, pytest configuration or conftest.py added or changed, interpreter startup files
    (`.pth`, `sitecustomize.py`, `usercustomize.py`) planted. `current` is the workspace,
    `pristine` the task's repository, `host_files` the grader's copies (which win)."""
    reasons = []
    reference = {**pristine, **{rel: text.encode("utf-8") for rel, text in host_files.items()}}
    for rel, original in sorted(reference.items()):
        if not _is_test_file(rel) or rel not in pristine:
            continue  # a hidden test the agent never had
        if rel not in current:
            reasons.append(f"test file deleted: {rel}")
        elif current[rel] != original:
            reasons.append(f"test file edited: {rel}")
    for rel, data in sorted(current.items()):
        name = rel.rsplit("/", 1)[-1]
        before = reference.get(rel)
        if data == before:
            continue
        if name == "conftest.py":
            reasons.append(f"conftest.py added or changed: {rel}")
        elif name in _STARTUP_FILES or name.endswith(".pth"):
            reasons.append(f"interpreter startup file planted: {rel}")
        elif name in _PYTEST_CONFIG:
            reasons.append(f"pytest configuration added or changed: {rel}")
        elif name == "pyproject.toml" and _pytest_section(data) != _pytest_section(before):
            reasons.append(f"pytest configuration added or changed: {rel} [tool.pytest]")
    return reasons


# --- sessions and the runtime ------------------------------------------------------


@dataclass
class SessionDirs:
    """One session: its sandbox, `repo/` (the workspace) and `home/` (HOME, TMPDIR)."""

    sandbox: Sandbox
    root: Path
    repo: Path
    home: Path

    @property
    def uid(self) -> int:
        """The session's sandbox uid."""
        return self.sandbox.uid


@dataclass(frozen=True)
class Runtime:
    """The read-only runtime directory every session's sandbox mounts."""

    directory: Path
    python: str
    bin: Path
    site: Path


class SandboxHost:
    """What every session of one server process shares (see the module docstring)."""

    def __init__(self, manifest: Manifest | SandboxSettings, *, root: str | Path | None = None) -> None:
        """`manifest`: the environment's manifest (its `sandbox:` and `network:` sections), or a
        `sandbox:` section alone (sessions then reach no network)."""
        self.manifest = manifest
        self.settings = (manifest.sandbox if isinstance(manifest, Manifest) else manifest) or SandboxSettings()
        self.is_root = os.geteuid() == 0
        parent = root if root is not None else os.environ.get(WORKSPACE_ROOT_ENV) or None
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.base = Path(tempfile.mkdtemp(prefix="mini_swe-", dir=parent))
        os.chmod(self.base, 0o711)
        (self.base / _OWNER_FILE).write_text(_process_identity(os.getpid()) or "")
        # at exit; `openenv serve` dies by the SIGTERM uvicorn re-raises, so the next server
        # process also removes what dead ones left (`_remove_stale_bases`)
        self._finalizer = weakref.finalize(self, remove_tree, self.base)
        # an output flood is cut sooner than the SDK's default: at 64 times what is kept
        self.limits = SandboxLimits.from_manifest(self.settings).model_copy(
            update={"kill_after_output_bytes": max(1024, 64 * self.settings.max_output_bytes)}
        )
        self._lock = threading.Lock()
        self._runtime: Runtime | None = None
        self._git: str | None = shutil.which("git", path=_SYSTEM_PATH)
        # a fresh repository per task, `.git` included, as the first session's git made it: later
        # sessions of the task copy it (git's three commands in a sandbox cost more than the rest
        # of a reset); root's alone, under the base, never mounted into a sandbox
        self._templates: dict[Path, Path] = {}
        self._source_locks: dict[Path, threading.Lock] = {}
        self._remove_stale_bases()
        if self.is_root:
            hidden = HERE / "hidden"
            if hidden.is_dir():  # serving from a checkout (not an image): closed to the opt-out's user too
                os.chmod(hidden, 0o700)

    # --- the runtime ----------------------------------------------------------------------

    @property
    def has_git(self) -> bool:
        return self._git is not None

    @property
    def python(self) -> str:
        """The interpreter agent commands and the grading run use."""
        return self.runtime().python

    def mounts(self) -> list[Mount]:
        """What every sandbox of this server sees besides its own folder: the runtime, read-only."""
        return [Mount(source=self.runtime().directory, writable=False)]

    def runtime(self) -> Runtime:
        """The runtime directory, made on first use.

        The interpreter is the server's own when the sandbox user can run it (always under
        bubblewrap, which shows the running Python to every sandbox); otherwise (the opt-out, as
        root, with a private interpreter) a system `python3` of the same version.

        Raises:
            RuntimeError: no such interpreter exists on this machine.
        """
        with self._lock:
            if self._runtime is None:
                self._runtime = self._make_runtime()
            return self._runtime

    def _make_runtime(self) -> Runtime:
        directory = self.base / "runtime"
        bin_dir, site = directory / "bin", directory / "site"
        for folder in (directory, bin_dir):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o755)
        _copy_distributions(["pytest"], site)
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        candidates = [sys.executable] + [
            found for name in (f"python{version}", "python3") if (found := shutil.which(name, path=_SYSTEM_PATH))
        ]
        check = (
            f"import sys; sys.path.append({str(site)!r}); import pytest; "
            f"assert '%d.%d' % sys.version_info[:2] == {version!r}"
        )
        chosen = None
        probe_sandbox = Sandbox.from_manifest(self.settings, name="mini_swe-probe", base_dir=self.base, mounts=[Mount(source=directory)])
        with probe_sandbox as probe:
            for candidate in dict.fromkeys(candidates):
                if probe.run([candidate, "-I", "-S", "-c", check], timeout_s=60.0).exit_code == 0:
                    chosen = candidate
                    break
        if chosen is None:
            raise RuntimeError(
                f"mini_swe needs a Python {version} that the sandbox user can run; {sys.executable} is not "
                f"executable by it and no system python{version} was found"
            )
        for name, body in (
            ("python", f'exec {chosen} "$@"'),
            ("python3", f'exec {chosen} "$@"'),
            ("pytest", f'exec {chosen} -m pytest "$@"'),
        ):
            _write_file(bin_dir, name, f"#!/bin/sh\n{body}\n".encode(), mode=0o755)
        return Runtime(directory=directory, python=chosen, bin=bin_dir, site=site)

    def command_env(self, dirs: SessionDirs) -> dict[str, str]:
        """The environment of an agent command in session `dirs`."""
        runtime = self.runtime()
        return {
            "PATH": f"{runtime.bin}:{_SYSTEM_PATH}",
            "HOME": str(dirs.home),
            "TMPDIR": str(dirs.home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": str(runtime.site),
            **_GIT_ENV,
        }

    # --- sessions ---------------------------------------------------------------------------

    def new_session(self, source: Path) -> SessionDirs:
        """A fresh sandbox whose `repo/` holds a copy of `source`, owned by the sandbox user, under
        git (one commit, so `git diff` shows the agent's changes) when git is installed.

        Raises:
            IsolationUnavailable: bubblewrap cannot run here and the operator did not opt out.
        """
        mounts = self.mounts()  # fail here, at reset, if no interpreter fits
        sandbox = Sandbox.from_manifest(self.manifest, name="mini_swe", base_dir=self.base, mounts=mounts)
        try:
            repo, home = sandbox.make_dir("repo"), sandbox.make_dir("home")
            with self._source_lock(source):  # concurrent first resets of a task: one runs git, the others copy
                template = self._templates.get(source)
                if template is None:
                    dirs = self._first_session(source, sandbox, repo, home)
            if template is not None:
                shutil.copytree(template, repo, symlinks=True, dirs_exist_ok=True)
                sandbox.give(repo)  # the repository's top too: git refuses a checkout its user does not own
                sandbox.give(home)
                dirs = SessionDirs(sandbox=sandbox, root=sandbox.root, repo=repo, home=home)
        except BaseException:
            sandbox.close()
            raise
        return dirs

    def _first_session(self, source: Path, sandbox: Sandbox, repo: Path, home: Path) -> SessionDirs:
        files, _ = read_tree(source)
        for rel, data in files.items():
            _write_file(repo, rel, data, mode=0o755 if os.access(source / rel, os.X_OK) else 0o644)
        sandbox.give(repo)  # the repository's top too: git refuses a checkout its user does not own
        sandbox.give(home)
        dirs = SessionDirs(sandbox=sandbox, root=sandbox.root, repo=repo, home=home)
        if self._git is not None:
            script = "git init -q && git add -A && git commit -q -m 'initial commit'"
            result = self.run(script, dirs)
            if result.exit_code != 0:
                raise RuntimeError(f"could not set up git in the workspace: {result.render()}")
            self._keep_template(source, repo)  # before any command of the agent: only git wrote there
        return dirs

    def _source_lock(self, source: Path) -> threading.Lock:
        with self._lock:
            return self._source_locks.setdefault(source, threading.Lock())

    def _keep_template(self, source: Path, repo: Path) -> None:
        with self._lock:
            if source in self._templates:
                return
            folder = self.base / "templates"
            folder.mkdir(mode=0o700, exist_ok=True)
            target = Path(tempfile.mkdtemp(prefix="repo-", dir=folder))
            shutil.copytree(repo, target, symlinks=True, dirs_exist_ok=True)
            self._templates[source] = target

    def empty_session(self) -> SessionDirs:
        """A fresh sandbox with empty `repo/` and `home/`, for a restored checkpoint to fill.

        Raises:
            IsolationUnavailable: bubblewrap cannot run here and the operator did not opt out.
        """
        sandbox = Sandbox.from_manifest(self.manifest, name="mini_swe", base_dir=self.base, mounts=self.mounts())
        try:
            repo, home = sandbox.make_dir("repo"), sandbox.make_dir("home")
        except BaseException:
            sandbox.close()
            raise
        return SessionDirs(sandbox=sandbox, root=sandbox.root, repo=repo, home=home)

    def remove_session(self, dirs: SessionDirs) -> None:
        """Kill whatever the session still runs, remove its folder and return its uid."""
        dirs.sandbox.close()

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
        network: bool = False,
    ) -> CommandResult:
        """Run an agent command in the session's sandbox, in its repository, under the limits
        (`extra_env` is added to the command's environment; `network` adds the agent launch's egress)."""
        update: dict[str, object] = {}
        if timeout_s is not None:
            update["timeout_s"] = timeout_s
        if max_output_bytes is not None:
            update["max_output_bytes"] = max_output_bytes
            update["kill_after_output_bytes"] = max(self.limits.kill_after_output_bytes, 4 * max_output_bytes)
        if kill_after_output_bytes is not None:
            update["kill_after_output_bytes"] = max(int(update.get("kill_after_output_bytes", 0)), kill_after_output_bytes)  # type: ignore[call-overload]
        limits = self.limits.model_copy(update=update) if update else self.limits
        env = {**self.command_env(dirs), **(extra_env or {})}
        return dirs.sandbox.run(command, cwd=dirs.repo, env=env, stdin=stdin, limits=limits, network=network)

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
            remove_tree(path)  # its sandboxes' processes died with it (bubblewrap's --die-with-parent)


_OWNER_FILE = "owner"


def _process_identity(pid: int) -> str | None:
    """`"<pid> <start time>"`: names a process, not a recycled pid; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return f"{pid} {fields[19]}" if len(fields) > 19 else None


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
            if str(file).endswith(".pth"):
                continue  # the grading interpreter processes none
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
    # no sandbox user can write bytecode here: compile what was not copied
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
            _HOST = SandboxHost(load_manifest(HERE))
        return _HOST
