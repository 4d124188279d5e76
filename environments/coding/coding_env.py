"""Coding: write Python in a sandboxed workspace until the task's hidden tests would pass.

Each episode is one task from `tasks/` (a prompt and starting files, e.g. a stub
`solution.py`). The agent edits and runs code in its own workspace through the tools below;
every command it runs goes through `openenv_sdk.sandbox.run_command` (time, output, memory and
process limits) as an unprivileged user when the server runs as root.

The reward is computed host-side by `grader.CodingGrader`: after the episode it sends the
task's hidden pytest files (from `hidden/`, never in the image) to the orchestrator-only call
`run_checks`, which runs them against a copy of the solution file in a fresh directory the
agent never saw. Nothing the agent can reach (tools, observations, state) holds a test or a
reward.

The orchestrator may instead run a whole agent program (a CLI agent) in the episode with the
orchestrator-only call `run_agent` (`openenv_sdk.agents.AgentHost`): it runs through the same
sandboxed runner as `run_shell`, in the workspace, with a HOME of its own (`home-<random>/`).

Workspace layout, one per session (`$OPENENV_CODING_WORKDIR`, default the system temp dir):

    openenv-coding-XXXXXXXX/   the session root: root-owned, mode 0711 when the server is root
        bin/                   python / python3 / pytest launchers for the sandbox user
        ws-<random>/           the agent's working directory (root:<agent group> 0770; its files the agent's)
        home-<random>/         HOME of an agent program run by `run_agent` (same ownership as ws-)
        grade-<random>/        a grading run (root:<grading group> 0750, read-only to the run but
                               its out/ folder; removed after the run)
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import importlib.util
import os
import pwd
import random
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from openenv_sdk import Action, Environment, Observation, State, orchestrator, tool
from openenv_sdk.agents import AgentHost
from openenv_sdk.manifest import Sandbox, load_manifest
from openenv_sdk.sandbox import CommandResult, SandboxLimits, run_command

__all__ = ["CodingEnvironment", "CodingObservation", "CodingState", "Task", "load_tasks"]

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"

WORKDIR_ENV = "OPENENV_CODING_WORKDIR"
"""Folder under which session workspaces are created (default: the system temp dir)."""
MARKER_ENV = "OPENENV_CODING_SESSION"
"""Set in every command's environment; processes that outlive their command are found by it."""

DIFFICULTIES = ("easy", "medium", "hard")
GRADING_USER = "nobody"
"""Grading runs as this user when the server is root and it differs from the sandbox user, so
the agent's processes cannot read a grading run's files nor touch its processes."""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_FILE_BYTES = 1024 * 1024
"""Largest file `write_file` writes and `run_checks` copies."""
READ_LIMIT_BYTES = 64 * 1024
"""Bytes `read_file` returns; the rest is cut with a marker."""
MAX_CHECK_TIMEOUT_S = 300.0
MAX_CHECK_FILES_BYTES = 8 * 1024 * 1024
COLLECT_LIMIT_BYTES = 1024 * 1024

_MODULE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


# --- tasks -----------------------------------------------------------------------------------


class Task(BaseModel):
    """One task, as stored in `tasks/<id>.yaml` (public: prompts and starting files only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9_]+$", description="Task id; also the file's name.")
    title: str = Field(min_length=1, description="A short title.")
    difficulty: Literal["easy", "medium", "hard"] = Field(description="easy, medium or hard.")
    category: str = Field(min_length=1, description="strings, lists, parsing, algorithms, ...")
    prompt: str = Field(min_length=1, description="What to implement, in which file.")
    solution_file: str = Field(
        default="solution.py", pattern=rf"^{_MODULE_NAME}\.py$", description="The one file that is graded."
    )
    files: dict[str, str] = Field(description="Starting files of the workspace, by relative path.")

    @field_validator("solution_file")
    @classmethod
    def _not_a_shadow(cls, name: str) -> str:
        module = name[:-3]
        if module in sys.stdlib_module_names or module in ("pytest", "_pytest", "conftest", "pluggy"):
            raise ValueError(f"solution_file {name!r} would shadow the module {module!r}")
        return name

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for name in files:
            _check_relative(name)
        return files


def _check_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        raise ValueError(f"{name!r} must be a relative path without '.' or '..' parts")
    return path


@cache
def load_tasks() -> dict[str, Task]:
    """Every task in `tasks/`, by id, ordered by difficulty then id."""
    tasks = []
    for file in TASKS_DIR.glob("*.yaml"):
        task = Task.model_validate(yaml.safe_load(file.read_text(encoding="utf-8")))
        if task.id != file.stem:
            raise ValueError(f"{file}: id {task.id!r} must match the file name")
        if task.solution_file not in task.files:
            raise ValueError(f"{file}: solution_file {task.solution_file!r} is not among its files")
        tasks.append(task)
    tasks.sort(key=lambda t: (DIFFICULTIES.index(t.difficulty), t.id))
    return {task.id: task for task in tasks}


@cache
def sandbox_settings() -> Sandbox:
    """The manifest's `sandbox:` section (command limits and the sandbox user)."""
    return load_manifest(HERE).sandbox or Sandbox()


# --- who runs commands, and with which Python -------------------------------------------------


@dataclass(frozen=True)
class _Identity:
    """The unprivileged user commands run as (None: the server's own user, when not root)."""

    name: str | None
    uid: int
    gid: int


def _identity(preferred: str) -> _Identity:
    if os.geteuid() != 0:
        return _Identity(None, os.getuid(), os.getgid())
    for name in (preferred, "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return _Identity(name, entry.pw_uid, entry.pw_gid)
    raise RuntimeError(f"the server runs as root but neither {preferred!r} nor 'nobody' exists to run commands as")


@dataclass(frozen=True)
class _Python:
    """The interpreter (with pytest) that the sandbox user can run."""

    executable: str
    pythonpath: str | None = None


_python_lock = threading.Lock()
_python_cache: dict[str | None, _Python] = {}


def _python_for(user: str | None) -> _Python:
    """This server's interpreter when `user` can run it; else a system `python3` of the same
    version given this interpreter's site-packages (e.g. when the server's venv lives under
    /root, which the sandbox user cannot enter)."""
    with _python_lock:
        if user in _python_cache:
            return _python_cache[user]
        found = _Python(sys.executable) if user is None else _probe_pythons(user)
        _python_cache[user] = found
        return found


def _probe_pythons(user: str) -> _Python:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [_Python(sys.executable)]
    spec = importlib.util.find_spec("pytest")
    system = shutil.which("python3", path=SYSTEM_PATH)
    if system and spec is not None and spec.origin:
        candidates.append(_Python(system, str(Path(spec.origin).parents[1])))
    probe = "import sys, pytest; print('%d.%d' % sys.version_info[:2])"
    tried = []
    for candidate in candidates:
        env = {"PATH": SYSTEM_PATH, "HOME": "/", "LANG": "C.UTF-8"}
        if candidate.pythonpath:
            env["PYTHONPATH"] = candidate.pythonpath
        result = run_command(
            [candidate.executable, "-c", probe], cwd="/", env=env, limits=SandboxLimits(timeout_s=30, sandbox_user=user)
        )
        if result.exit_code == 0 and result.stdout.strip() == version:
            return candidate
        tried.append(f"{candidate.executable}: {result.stderr.strip()[-200:] or result.stdout.strip()}")
    raise RuntimeError(f"no Python {version} with pytest that user {user!r} can run; tried: " + "; ".join(tried))


# --- wire models -------------------------------------------------------------------------------


class CodingObservation(Observation):
    """The first observation of an episode: the task and how to work on it."""

    task_id: str = Field(default="", description="The task's id.")
    title: str = Field(default="", description="The task's title.")
    difficulty: str = Field(default="", description="easy, medium or hard.")
    prompt: str = Field(default="", description="What to implement.")
    solution_file: str = Field(default="", description="The file that is graded.")
    working_directory: str = Field(default="", description="The agent's working directory.")
    files: list[str] = Field(default_factory=list, description="Files in the working directory at the start.")
    tools: list[str] = Field(default_factory=list, description="The tools' names.")
    message: str = Field(default="", description="Everything above, as one text for an agent.")


class CodingState(State):
    """The episode's state (for the orchestrator and the grader; no tests, no reward)."""

    task_id: str | None = None
    title: str | None = None
    difficulty: str | None = None
    category: str | None = None
    solution_file: str | None = None
    working_directory: str | None = None
    tool_calls: int = 0
    submitted: bool = False


# --- the environment ---------------------------------------------------------------------------


class CodingEnvironment(AgentHost, Environment[Action, CodingObservation, CodingState]):
    """Implement a Python function or class in a sandboxed workspace; hidden tests grade it host-side."""

    name = "coding"
    version = "0.1.0"

    def __init__(self) -> None:
        self._settings = sandbox_settings()
        self._agent = _identity(self._settings.user)
        grading = _identity(GRADING_USER)
        self._grader_identity = grading if grading.name is not None and grading.uid != self._agent.uid else self._agent
        self._sandbox_uids = frozenset({self._agent.uid, self._grader_identity.uid} - {0})
        self._task: Task | None = None
        self._root: Path | None = None
        self._workspace: Path | None = None
        self._home: Path | None = None
        self._marker = ""

    # --- the orchestrator's verbs ------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        difficulty: str | None = None,
        **extra: Any,
    ) -> CodingObservation:
        """Start an episode: `task_id` picks the task; otherwise `seed` picks one (of `difficulty`, if given)."""
        if extra:
            raise ValueError(
                f"unknown reset argument(s) {sorted(extra)}: the coding environment takes task_id, difficulty, "
                f"seed and episode_id"
            )
        task = _pick_task(task_id, difficulty, seed)
        self._cleanup()
        self._task = None
        self._root, self._workspace, self._home = self._make_session_dirs(task)
        self._task = task
        self._marker = secrets.token_hex(12)
        self._state = CodingState(
            episode_id=episode_id or f"coding-{task.id}-{secrets.token_hex(4)}",
            task_id=task.id,
            title=task.title,
            difficulty=task.difficulty,
            category=task.category,
            solution_file=task.solution_file,
            working_directory=str(self._workspace),
        )
        self.episode_done = False
        tools = list(type(self).tool_specs)
        return CodingObservation(
            task_id=task.id,
            title=task.title,
            difficulty=task.difficulty,
            prompt=task.prompt,
            solution_file=task.solution_file,
            working_directory=str(self._workspace),
            files=sorted(task.files),
            tools=tools,
            message=self._intro(task, tools),
        )

    def close(self) -> None:
        self._cleanup()
        self._task = None

    # --- the agent's tools -------------------------------------------------------------------

    @tool
    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a text file (parent folders are created).

        Args:
            path: the file's path, relative to the working directory (absolute paths work too).
            content: the complete new content of the file.
        """
        self._begin()
        size = len(content.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise ValueError(f"content is {size} bytes; files are limited to {MAX_FILE_BYTES} bytes")
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        result = self._run(["/bin/sh", "-c", script, "write_file", path], stdin=content)
        return f"Wrote {size} bytes to {path}." if result.exit_code == 0 else result.render()

    @tool
    def read_file(self, path: str) -> str:
        """Return a text file's content (the first 64 KiB; the rest is cut with a marker).

        Args:
            path: the file's path, relative to the working directory (absolute paths work too).
        """
        self._begin()
        result = self._run(["cat", "--", path], max_output_bytes=READ_LIMIT_BYTES)
        if result.exit_code != 0:
            return result.render()
        return result.stdout if result.stdout else "(the file is empty)"

    @tool
    def list_files(self, path: str = ".") -> str:
        """List files and folders (three levels deep), one per line, with file sizes in bytes.

        Args:
            path: the folder to list, relative to the working directory (default: the working directory).
        """
        self._begin()
        script = (
            'find "$1" -mindepth 1 -maxdepth 3 \\( -name __pycache__ -prune \\) -o '
            "\\( -type d -printf '%P/\\n' \\) -o \\( -printf '%P  %s bytes\\n' \\) | LC_ALL=C sort"
        )
        result = self._run(["/bin/sh", "-c", script, "list_files", path])
        if result.exit_code == 0 and not result.stderr:
            return result.stdout.rstrip("\n") or "(no files)"
        return result.render()

    @tool
    def run_python(self, code: str, timeout_s: float | None = None) -> str:
        """Run Python code (given as text) in the working directory; returns stdout, stderr and the exit code.

        Args:
            code: the program; it runs as a script read from standard input.
            timeout_s: seconds before it is killed (at most, and by default, the sandbox's limit of 30).
        """
        self._begin()
        return self._run([str(self._bin / "python"), "-"], stdin=code, timeout_s=timeout_s).render()

    @tool
    def run_file(self, path: str, args: list[str] | None = None, timeout_s: float | None = None) -> str:
        """Run a Python file (`python PATH ARGS...`) in the working directory; returns stdout, stderr and the exit code.

        Args:
            path: the Python file, relative to the working directory.
            args: command-line arguments for it.
            timeout_s: seconds before it is killed (at most, and by default, the sandbox's limit of 30).
        """
        self._begin()
        return self._run([str(self._bin / "python"), path, *(args or [])], timeout_s=timeout_s).render()

    @tool
    def run_shell(self, command: str, timeout_s: float | None = None) -> str:
        """Run a bash command line in the working directory (`python` and `pytest` are on the PATH; no network).

        Args:
            command: the command line, e.g. "pytest -q test_mine.py".
            timeout_s: seconds before it is killed (at most, and by default, the sandbox's limit of 30).
        """
        self._begin()
        return self._run(command, timeout_s=timeout_s).render()

    @tool
    def submit(self) -> str:
        """Finish the episode: your solution file is graded afterwards (you will not see the result)."""
        self._begin()
        self.state.submitted = True
        self.episode_done = True
        solution = self._task.solution_file if self._task else "your solution"
        return f"Submitted. {solution} will be graded; the episode is over."

    # --- the grader's call (never reachable over MCP) -------------------------------------------

    @orchestrator
    def run_checks(
        self,
        files: dict[str, str],
        command: list[str],
        timeout_s: float = 60.0,
        collect: list[str] | None = None,
        stdin: str | None = None,
    ) -> dict[str, Any]:
        """Run a grader's checks against the solution, in a fresh directory the agent never saw.

        The directory gets a copy of the task's solution file (only that file: nothing else from
        the workspace, so no `conftest.py` or config of the agent's) and the grader's `files`,
        all read-only to the run; only its `out/` folder is writable. `command` runs there in a
        fresh process, as the grading user and under the sandbox's limits; `python`, `python3`
        and `pytest` as its first word mean the sandbox's interpreter. The directory is removed
        afterwards, with any process the run left behind.

        Args:
            files: relative path -> text, e.g. the hidden test files.
            command: the argument list to run.
            timeout_s: wall-clock limit of the run, in seconds.
            collect: files to read back after the run (e.g. `out/report.json`).
            stdin: text fed to the command's standard input (e.g. a key only the grader knows).

        Returns:
            `exit_code`, `timed_out`, `duration_s`, `stdout`, `stderr`, `solution_files`
            (name -> "copied", "missing", ...), and `collected` (name -> text, or None).
        """
        task, root, workspace = self._require_episode()
        if not command or not all(isinstance(word, str) for word in command):
            raise ValueError("command must be a non-empty list of strings")
        if not 0 < timeout_s <= MAX_CHECK_TIMEOUT_S:
            raise ValueError(f"timeout_s must be in (0, {MAX_CHECK_TIMEOUT_S:g}], got {timeout_s}")
        if sum(len(text.encode("utf-8")) for text in files.values()) > MAX_CHECK_FILES_BYTES:
            raise ValueError(f"files exceed {MAX_CHECK_FILES_BYTES} bytes")
        for name in [*files, *(collect or [])]:
            _check_relative(name)
        if task.solution_file in files or any(PurePosixPath(name).parts[0] == "out" for name in files):
            raise ValueError(f"files may not replace the solution file {task.solution_file!r} nor go in out/")
        _reap(self._marker, self._sandbox_uids)
        grading_marker = f"{self._marker}-grade"
        grader = self._grader_identity
        directory = root / f"grade-{secrets.token_hex(8)}"
        try:
            _make_readonly_dir(directory, grader)
            status, data = self._read_as(self._agent, workspace, task.solution_file, MAX_FILE_BYTES)
            if data is not None:
                _write_readonly(directory, task.solution_file, data, grader)
            for name, text in files.items():
                _write_readonly(directory, name, text.encode("utf-8"), grader)
            (directory / "out").mkdir(mode=0o700)
            _chown_tree(directory / "out", grader)
            argv = list(command)
            if argv[0] in ("python", "python3", "pytest"):
                argv[0] = str(self._bin / argv[0])
            env = self._command_env(directory / "out", grading_marker)
            env.update({"PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
            limits = SandboxLimits(
                timeout_s=timeout_s,
                max_output_bytes=64 * 1024,
                memory_bytes=self._settings.memory_bytes,
                max_processes=self._settings.max_processes,
                sandbox_user=grader.name,
            )
            result = run_command(argv, cwd=directory, limits=limits, env=env, stdin=stdin)
            collected = {name: self._read_as(grader, directory, name, COLLECT_LIMIT_BYTES)[1] for name in collect or []}
        finally:
            _reap(grading_marker, self._sandbox_uids)
            _remove_tree(directory)
        return {
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "duration_s": round(result.duration_s, 3),
            "stdout": result.stdout,
            "stderr": result.stderr,
            "solution_files": {task.solution_file: status},
            "collected": {k: v.decode("utf-8", "replace") if v is not None else None for k, v in collected.items()},
        }

    # --- hosting an agent program (orchestrator's `run_agent`, see openenv_sdk.agents) ---------

    def agent_exec(
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None
    ) -> CommandResult:
        """Run `command` as `run_shell` does (the sandbox user, the sandbox's limits, in the
        workspace, strays reaped afterwards), but with the agent's HOME, `env` added, and its own
        `timeout_s` (an agent program runs for longer than one tool command)."""
        self._check_agent_episode()
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        return self._run(command, stdin=stdin, timeout_s=timeout_s, extra_env=env, as_agent_program=True)

    def agent_home(self) -> str:
        self._check_agent_episode()
        assert self._home is not None
        return str(self._home)

    def agent_workdir(self) -> str:
        _, _, workspace = self._check_agent_episode()
        return str(workspace)

    def agent_instruction(self) -> str:
        task, _, _ = self._check_agent_episode()
        return self._task_text(task) + (
            "`python` and `pytest` are on the PATH; nothing is interactive and there is no network. When you are "
            f"done, stop: {task.solution_file} is graded as it then stands."
        )

    def _check_agent_episode(self) -> tuple[Task, Path, Path]:
        if self._task is None or self._root is None or self._workspace is None:
            raise ValueError("no episode: the orchestrator has not called reset yet")
        if self.episode_done:
            raise ValueError("the episode is over (submitted); nothing more runs until the next reset")
        return self._task, self._root, self._workspace

    # --- internals ---------------------------------------------------------------------------

    @property
    def _bin(self) -> Path:
        assert self._root is not None
        return self._root / "bin"

    def _task_text(self, task: Task) -> str:
        """The task, where to work and what is graded (the first lines of the agent's intro)."""
        files = ", ".join(sorted(task.files))
        return (
            f"{task.prompt.rstrip()}\n\n"
            f"Your working directory is {self._workspace}; it holds: {files}.\n"
            f"Only {task.solution_file} is graded: after the episode, hidden pytest tests import it in a fresh "
            f"process, without any other file from your working directory. You do not see the tests or the "
            f"result.\n"
        )

    def _intro(self, task: Task, tools: list[str]) -> str:
        s = self._settings
        return (
            self._task_text(task)
            + f"Tools: {', '.join(tools)}. Each command runs for at most {s.command_timeout_s:g} s and keeps "
            f"{s.max_output_bytes} bytes of output; `python` and `pytest` are on the PATH; there is no network. "
            f"Call submit when you are done."
        )

    def _require_episode(self) -> tuple[Task, Path, Path]:
        if self._task is None or self._root is None or self._workspace is None:
            raise RuntimeError("no episode: call reset() first")
        return self._task, self._root, self._workspace

    def _begin(self) -> None:
        """Checks before each tool: an episode is running and not over."""
        self._require_episode()
        if self.episode_done:
            raise RuntimeError("the episode is over (you submitted); nothing more can be done")
        self.state.tool_calls += 1

    def _make_session_dirs(self, task: Task) -> tuple[Path, Path, Path]:
        base = Path(os.environ.get(WORKDIR_ENV) or tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        as_root = os.geteuid() == 0
        if as_root:
            _check_traversable(base)
        root = Path(tempfile.mkdtemp(prefix="openenv-coding-", dir=base))
        try:
            os.chmod(root, 0o711 if as_root else 0o700)
            bin_dir = root / "bin"
            bin_dir.mkdir(mode=0o755)
            python = _python_for(self._agent.name)
            for name, args in (("python", ""), ("python3", ""), ("pytest", " -m pytest")):
                launcher = bin_dir / name
                launcher.write_text(f'#!/bin/sh\nexec {python.executable}{args} "$@"\n', encoding="utf-8")
                launcher.chmod(0o755)
            workspace = root / f"ws-{secrets.token_hex(6)}"
            workspace.mkdir(mode=0o700)
            for name, text in task.files.items():
                target = workspace / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            _chown_tree(workspace, self._agent)
            self._seal_workspace(workspace)
            home = root / f"home-{secrets.token_hex(6)}"  # an agent program's HOME (run_agent)
            home.mkdir(mode=0o700)
            self._seal_workspace(home)
        except BaseException:
            _remove_tree(root)
            raise
        return root, workspace, home

    def _ensure_workspace(self) -> tuple[Path, str]:
        """The workspace, recreated (empty) if the agent deleted it; and a note saying so."""
        _, _, workspace = self._require_episode()
        note = ""
        if self._ensure_dir(workspace):
            note = f"[note: the working directory {workspace} had been deleted; it was recreated empty]\n"
        return workspace, note

    def _ensure_dir(self, folder: Path) -> bool:
        """Make `folder` a sealed folder again if the agent removed or replaced it; True if it had to."""
        remade = False
        if os.path.islink(folder) or (os.path.lexists(folder) and not folder.is_dir()):
            folder.unlink()
        if not folder.is_dir():
            folder.mkdir(mode=0o700)
            remade = True
        self._seal_workspace(folder)
        return remade

    def _seal_workspace(self, workspace: Path) -> None:
        """As root, the workspace folder is root:<agent group> 0770: the agent works in it through
        its group but cannot chmod it shut, and root enters it as its owner (Popen changes
        directory before dropping privileges, and a container's root has no CAP_DAC_OVERRIDE).
        Without root it is the server user's, 0700 (restored if the agent changed it)."""
        owner, mode = ((0, self._agent.gid), 0o770) if self._agent.name is not None else (None, 0o700)
        info = workspace.stat()
        if owner is not None and (info.st_uid, info.st_gid) != owner:
            os.chown(workspace, *owner)
        if stat.S_IMODE(info.st_mode) != mode:
            os.chmod(workspace, mode)

    def _command_env(self, home: Path, marker: str) -> dict[str, str]:
        python = _python_for(self._agent.name)
        env = {
            "PATH": f"{self._bin}:{SYSTEM_PATH}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            MARKER_ENV: marker,
        }
        if python.pythonpath:
            env["PYTHONPATH"] = python.pythonpath
        return env

    def _limits(self, timeout_s: float | None, max_output_bytes: int | None = None) -> SandboxLimits:
        s = self._settings
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        return SandboxLimits(
            timeout_s=min(timeout_s or s.command_timeout_s, s.command_timeout_s),
            max_output_bytes=max_output_bytes or s.max_output_bytes,
            memory_bytes=s.memory_bytes,
            max_processes=s.max_processes,
            sandbox_user=self._agent.name,
        )

    def _run(
        self,
        command: str | list[str],
        *,
        stdin: str | None = None,
        timeout_s: float | None = None,
        max_output_bytes: int | None = None,
        extra_env: dict[str, str] | None = None,
        as_agent_program: bool = False,
    ) -> CommandResult:
        """Run one command in the workspace as the sandbox user. `as_agent_program` (run_agent):
        HOME is the agent's home, and `timeout_s` is not capped at the per-command limit."""
        limits = self._limits(timeout_s, max_output_bytes)
        workspace, note = self._ensure_workspace()
        home = workspace
        if as_agent_program:
            assert self._home is not None and timeout_s is not None
            limits = limits.model_copy(update={"timeout_s": timeout_s})
            self._ensure_dir(self._home)
            home = self._home
        env = self._command_env(home, self._marker)
        if extra_env:
            env = {**env, **extra_env, MARKER_ENV: self._marker}  # the marker finds strays: never replaced
        try:
            result = run_command(command, cwd=workspace, limits=limits, env=env, stdin=stdin)
        finally:
            _reap(self._marker, self._sandbox_uids)  # whatever escaped the command's session (setsid + double fork)
        if note:
            result = result.model_copy(update={"stderr": note + result.stderr})
        return result

    def _read_as(self, who: _Identity, folder: Path, name: str, limit: int) -> tuple[str, bytes | None]:
        """Read `folder/name` as `who` (its owner), not as the server: in a container root has no
        CAP_DAC_OVERRIDE, and reading as the owner never reads more than the owner could.
        Only a regular file is read (no symlink, FIFO, ...) of at most `limit` bytes."""
        _check_relative(name)
        python = _python_for(self._agent.name)
        result = run_command(
            [python.executable, "-I", "-c", _READER, name, str(limit)],
            cwd=folder,
            env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
            limits=SandboxLimits(
                timeout_s=30, max_output_bytes=2 * limit + 1024, max_processes=None, sandbox_user=who.name
            ),
        )
        if result.exit_code == 0:
            return "copied", base64.b64decode(result.stdout)
        if result.exit_code == 126:
            return "missing (its folder is gone)", None
        why = _READER_STATUS.get(result.exit_code, f"not read ({result.stderr.strip()[-200:]})")
        return why.format(detail=result.stderr.strip()[-200:], limit=limit), None

    def _cleanup(self) -> None:
        if self._marker:
            _reap(self._marker, self._sandbox_uids)
            _reap(f"{self._marker}-grade", self._sandbox_uids)
        if self._root is not None:
            _remove_tree(self._root)
        self._root = self._workspace = self._home = None


# --- helpers --------------------------------------------------------------------------------------


def _pick_task(task_id: str | None, difficulty: str | None, seed: int | None) -> Task:
    tasks = load_tasks()
    if task_id is not None:
        if task_id not in tasks:
            close = difflib.get_close_matches(str(task_id), list(tasks), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown task_id {task_id!r}.{hint} There are {len(tasks)} tasks (see tasks/).")
        return tasks[task_id]
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {list(DIFFICULTIES)}, got {difficulty!r}")
    pool = [t for t in tasks.values() if difficulty is None or t.difficulty == difficulty]
    return pool[random.Random(seed).randrange(len(pool))]


def _check_traversable(base: Path) -> None:
    """As root, every folder above the workspaces must let the sandbox user through."""
    for folder in [base.resolve(), *base.resolve().parents]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            raise RuntimeError(
                f"{folder} is not accessible to the sandbox user (no o+x), so workspaces under {base} cannot be "
                f"used; set {WORKDIR_ENV} to a folder such as /tmp"
            )


def _chown_tree(top: Path, who: _Identity) -> None:
    """Give `top` and everything in it to `who`, deepest first (once a folder is theirs, a root
    without CAP_DAC_OVERRIDE can no longer enter it)."""
    if who.name is None:
        return
    for folder, dirs, files in os.walk(top, topdown=False):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), who.uid, who.gid, follow_symlinks=False)
    os.chown(top, who.uid, who.gid)


def _remove_tree(top: Path) -> None:
    """Remove a tree that unprivileged users wrote to, whatever modes they left. As root without
    CAP_DAC_OVERRIDE (a container), each folder is taken over (CAP_CHOWN) before it is entered.
    Run it when no process of theirs is left (they are reaped first)."""
    as_root = os.geteuid() == 0
    stack = [(top, False)]
    while stack:
        path, emptied = stack.pop()
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        try:
            if not stat.S_ISDIR(info.st_mode):
                os.unlink(path)
            elif emptied:
                os.rmdir(path)
            else:
                if as_root and info.st_uid != 0:
                    os.chown(path, 0, 0, follow_symlinks=False)
                if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
                    os.chmod(path, 0o700)
                stack.append((path, True))
                stack.extend((Path(entry.path), False) for entry in os.scandir(path))
        except OSError:
            continue  # best effort: a leftover must not break the session


def _make_readonly_dir(path: Path, reader: _Identity) -> None:
    """A folder the grading user may read but not change: root:<its group> 0750 as root, else 0700."""
    path.mkdir(mode=0o700)
    if reader.name is not None:
        os.chown(path, 0, reader.gid)
        os.chmod(path, 0o750)


def _write_readonly(directory: Path, name: str, data: bytes, reader: _Identity) -> None:
    parts = _check_relative(name).parts
    folder = directory
    for part in parts[:-1]:
        folder = folder / part
        if not folder.is_dir():
            _make_readonly_dir(folder, reader)
    target = folder / parts[-1]
    target.write_bytes(data)
    if reader.name is not None:
        os.chown(target, 0, reader.gid)
        os.chmod(target, 0o440)
    else:
        os.chmod(target, 0o400)


_READER = """
import base64, os, stat, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except FileNotFoundError:
    sys.exit(3)
except OSError as e:
    sys.exit(f"{e.strerror}")
info = os.fstat(fd)
if not stat.S_ISREG(info.st_mode):
    sys.exit(5)
if info.st_size > int(sys.argv[2]):
    sys.exit(6)
chunks = []
while chunk := os.read(fd, 1 << 16):
    chunks.append(chunk)
sys.stdout.write(base64.b64encode(b"".join(chunks)[: int(sys.argv[2])]).decode())
"""
_READER_STATUS = {
    1: "not readable ({detail})",
    3: "missing",
    5: "not a regular file",
    6: "too large (over {limit} bytes)",
}


def _reap(marker: str, uids: frozenset[int] = frozenset(), *, rounds: int = 5) -> int:
    """SIGKILL the processes a session's commands left behind (e.g. escaped with setsid and a
    double fork); returns how many. They carry `marker` in their environment. Where that cannot
    be read (root without CAP_SYS_PTRACE, as in a container), a process of one of the sandbox
    users `uids` (never the server's own) counts as left behind when it is not part of a running
    command, i.e. its session's leader is not a child of this server."""
    needle = f"{MARKER_ENV}={marker}".encode()
    me = os.getpid()
    uids = uids - {os.getuid()}
    killed = 0
    for _ in range(rounds):
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(pid)
                continue
            except PermissionError:
                pass
            except OSError:
                continue
            ids = _proc_ids(pid)
            if ids is not None and ids[0] in uids and _proc_ids(ids[1], parent=True) != (None, me):
                found.append(pid)
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def _proc_ids(pid: int, *, parent: bool = False) -> tuple[int | None, int] | None:
    """(uid, session id) of a process; with `parent`, (None, parent pid). None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if parent:
            return None, int(fields[1])
        return os.stat(f"/proc/{pid}").st_uid, int(fields[3])
    except (OSError, IndexError, ValueError):
        return None
