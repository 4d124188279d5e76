"""Coding: write Python in a sandboxed workspace until the task's hidden tests would pass.

Each episode is one task from `tasks/` (a prompt and starting files, e.g. a stub
`solution.py`). The agent edits and runs code in its own workspace through the tools below.
Each session holds one `openenv_sdk.sandbox.Sandbox` (made at reset, closed at close and at the
next reset): every command an agent's tool runs is a bubblewrap sandbox of its own, as the
session's own uid, in fresh pid, mount, network, IPC and UTS namespaces. It sees the system,
the Python runtime and its session folder, nothing else of the host (not this folder, not
`hidden/`, not another session), has no network, and every process it starts ends with it.

The reward is computed host-side by `grader.CodingGrader`: after the episode it sends the
task's hidden pytest files (from `hidden/`, never in the image) to the orchestrator-only call
`run_checks`, which hands them to the SDK's `openenv_sdk.grading.pytest_run.run_hidden_tests`:
the hidden tests run in a trusted pytest process, as the server's user and outside any sandbox,
in a fresh private directory holding only the grader's files; it never imports the agent's code.
`from solution import f` in a test gets a proxy whose calls go over a pipe to a worker that
imports a copy of the solution file, in a fresh sandbox of its own (no network, only that copy
mounted). What comes back is each test's outcome (`HiddenTestRun`). Nothing the agent can reach
(tools, observations, state, the worker) holds a test, a report or a reward.

The orchestrator may instead run a whole agent program (a CLI agent) in the episode with the
orchestrator-only call `run_agent` (`openenv_sdk.agents.AgentHost`): it runs in the session's
sandbox like `run_shell`, in the workspace, with a HOME of its own, reaching its model endpoint
and nothing else of the network.

Session folder, one per session (`$OPENENV_CODING_WORKDIR`, default the system temp dir):

    openenv-coding-XXXXXXXX/   the sandbox's root: root-owned 0711 when the server is root
        bin/                   python / python3 / pytest launchers (read-only to the session)
        work/                  the agent's working directory (root:<session group> 0770)
        home/                  HOME of an agent program run by `run_agent` (same ownership)
"""

from __future__ import annotations

import os
import random
import secrets
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from openenv_sdk import Action, Environment, Observation, State, ToolErrorType, ToolFailure, orchestrator, tool
from openenv_sdk._suggest import did_you_mean
from openenv_sdk.agents import AgentHost
from openenv_sdk.grading.pytest_run import DEFAULT_RUN_TIMEOUT_S, MAX_SOLUTION_BYTES, check_solution_file, run_hidden_tests
from openenv_sdk.manifest import Manifest, load_manifest
from openenv_sdk.manifest import Sandbox as SandboxSettings
from openenv_sdk.regrade import WorkspaceSnapshots
from openenv_sdk.sandbox import CommandResult, Sandbox, SandboxLimits
from openenv_sdk.snapshots import SnapshotUnsupported, pack_folders, unpack_folders
from openenv_sdk.tasks import TaskRecord

__all__ = ["CodingEnvironment", "CodingObservation", "CodingState", "Task", "load_tasks"]

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"

WORKDIR_ENV = "OPENENV_CODING_WORKDIR"
"""Folder under which session folders are created (default: the system temp dir)."""

DIFFICULTIES = ("easy", "medium", "hard")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
MAX_FILE_BYTES = MAX_SOLUTION_BYTES
"""Largest file `write_file` writes: the largest solution file grading copies."""
READ_LIMIT_BYTES = 64 * 1024
"""Bytes `read_file` returns; the rest is cut with a marker."""


# --- tasks -----------------------------------------------------------------------------------


class Task(BaseModel):
    """One task, as stored in `tasks/<id>.yaml` (public: prompts and starting files only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9_]+$", description="Task id; also the file's name.")
    title: str = Field(min_length=1, description="A short title.")
    difficulty: Literal["easy", "medium", "hard"] = Field(description="easy, medium or hard.")
    category: str = Field(min_length=1, description="strings, lists, parsing, algorithms, ...")
    prompt: str = Field(min_length=1, description="What to implement, in which file.")
    solution_file: str = Field(default="solution.py", description="The one file that is graded (`<module>.py`).")
    files: dict[str, str] = Field(description="Starting files of the workspace, by relative path.")

    @field_validator("solution_file")
    @classmethod
    def _gradable(cls, name: str) -> str:
        return check_solution_file(name)  # run_checks' own rule: a top-level module file that shadows nothing

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
def manifest() -> Manifest:
    """This folder's `openenv.yaml`: its `sandbox:` and `network:` sections make each session's sandbox."""
    return load_manifest(HERE)


def sandbox_settings() -> SandboxSettings:
    """The manifest's `sandbox:` section (command limits and the sandbox user)."""
    return manifest().sandbox or SandboxSettings()


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


class CodingEnvironment(AgentHost, WorkspaceSnapshots, Environment[Action, CodingObservation, CodingState]):
    """Implement a Python function or class in a sandboxed workspace; hidden tests grade it host-side."""

    name = "coding"
    version = "0.1.0"

    def __init__(self) -> None:
        self._settings = sandbox_settings()
        self._task: Task | None = None
        self._sandbox: Sandbox | None = None

    # --- the orchestrator's verbs ------------------------------------------------------------

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        """Every task in `tasks/` (split `train`): prompt and starting files; the tests stay in `hidden/`."""
        return [
            TaskRecord(id=t.id, title=t.title, difficulty=t.difficulty, category=t.category, prompt=t.prompt,
                       solution_file=t.solution_file, files=t.files)
            for t in load_tasks().values()
        ]  # fmt: skip

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
        self._sandbox = self._new_session(task)
        self._task = task
        workspace = self._sandbox.workspace
        self.state = CodingState(
            episode_id=episode_id or f"coding-{task.id}-{secrets.token_hex(4)}",
            task_id=task.id,
            title=task.title,
            difficulty=task.difficulty,
            category=task.category,
            solution_file=task.solution_file,
            working_directory=str(workspace),
        )
        self.episode_done = False
        tools = list(type(self).tool_specs)
        return CodingObservation(
            task_id=task.id,
            title=task.title,
            difficulty=task.difficulty,
            prompt=task.prompt,
            solution_file=task.solution_file,
            working_directory=str(workspace),
            files=sorted(task.files),
            tools=tools,
            message=self._intro(task, tools),
        )

    def close(self) -> None:
        self._cleanup()

    # --- checkpoint and restore (the orchestrator's; see openenv_sdk.snapshots) ---------------

    def snapshot(self, folder: Path) -> dict[str, Any]:
        """The episode: its state, the workspace and HOME, copied once every process of the agent
        has ended (none outlives a command)."""
        if self._sandbox is None or self._task is None:
            raise SnapshotUnsupported("no episode to checkpoint: call reset first")
        self._sandbox.kill_all()
        pack_folders(self._sandbox.root, ("work", "home"), folder / "folders.tar")
        return {
            "task_id": self._task.id,
            "root": str(self._sandbox.root),
            "state": self.state.model_dump(mode="json"),
            "episode_done": self.episode_done,
        }

    def restore(self, data: dict[str, Any], folder: Path) -> None:
        """A new session (as `reset` makes it) holding a copy of the checkpoint's workspace and HOME."""
        task = load_tasks().get(str(data.get("task_id")))
        if task is None:
            raise SnapshotUnsupported(f"the checkpoint's task {data.get('task_id')!r} is not among this server's tasks")
        self._cleanup()
        sandbox = self._new_session(task)
        try:
            unpack_folders(folder / "folders.tar", sandbox, ("work", "home"))
        except BaseException:
            sandbox.close()
            raise
        self._sandbox, self._task = sandbox, task
        state = CodingState.model_validate(data["state"])
        if state.working_directory is not None:
            state.working_directory = state.working_directory.replace(str(data["root"]), str(sandbox.root), 1)
        self.state = state
        self.episode_done = bool(data.get("episode_done"))

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
            raise ToolFailure(f"content is {size} bytes; files are limited to {MAX_FILE_BYTES} bytes", error_type=ToolErrorType.INVALID_ARGS)
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
        pytest_args: list[str] | None = None,
        timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
        call_timeout_s: float = 10.0,
        test_timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Run a grader's pytest files against the solution file, without ever importing it here.

        `openenv_sdk.grading.pytest_run.run_hidden_tests` does it: it reads the solution file as
        the session's user (never through a symlink, at most 1 MiB), writes `files` into a fresh
        private directory of the server's (no file of the agent's there, an empty `pytest.ini`
        unless `files` has one) and runs `python -I -m pytest` there, as the server's user, with
        the remote plugin: a test's `from <solution module> import f` gets a proxy whose calls go
        to a worker that imports a copy of the solution in a fresh sandbox of its own (no
        network, nothing else mounted, this session's memory and process limits). Both
        directories are removed afterwards, with every process.

        Args:
            files: relative path -> text: the test files, and any conftest.py or data of the grader's.
            pytest_args: pytest's arguments after the fixed ones (e.g. the test files' names).
            timeout_s: wall-clock limit of the whole run, in seconds (then everything is killed).
            call_timeout_s: limit of one call into the solution, in seconds (the call then fails).
            test_timeout_s: a test that passes but took longer fails (default: `call_timeout_s`).

        Returns:
            `openenv_sdk.grading.pytest_run.HiddenTestRun` as a dict: `collected`, `outcomes`
            (test id -> passed, failed, error or skipped), `messages`, `collect_errors`,
            `solution_files` (name -> "copied", "missing", ...), `exit_code`, `timed_out`,
            `report_read`, `duration_s` and `output_tail`.
        """
        task, sandbox = self._require_episode()
        run = run_hidden_tests(
            sandbox,
            files,
            [task.solution_file],
            pytest_args=pytest_args or (),
            timeout_s=timeout_s,
            call_timeout_s=call_timeout_s,
            test_timeout_s=test_timeout_s,
            worker_limits=self._limits(None),
        )
        return run.model_dump()

    # --- hosting an agent program (orchestrator's `run_agent`, see openenv_sdk.agents) ---------

    def agent_exec(  # type: ignore[override]  # no memory_bytes: run_agent refuses a spec that needs it (agents/host.py)
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None
    ) -> CommandResult:
        """Run `command` as `run_shell` does (the session's sandbox and limits, in the workspace),
        but with the agent's HOME, `env` added, its launch's egress (its model endpoint only) and
        its own `timeout_s` (an agent program runs for longer than one tool command)."""
        self._check_agent_episode()
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        return self._run(command, stdin=stdin, timeout_s=timeout_s, extra_env=env, as_agent_program=True)

    def agent_home(self) -> str:
        _, sandbox = self._check_agent_episode()
        return str(sandbox.root / "home")

    def agent_workdir(self) -> str:
        _, sandbox = self._check_agent_episode()
        return str(sandbox.workspace)

    def agent_instruction(self) -> str:
        task, _ = self._check_agent_episode()
        return self._task_text(task) + (
            "`python` and `pytest` are on the PATH; nothing is interactive. When you are "
            f"done, stop: {task.solution_file} is graded as it then stands."
        )

    def _check_agent_episode(self) -> tuple[Task, Sandbox]:
        if self._task is None or self._sandbox is None:
            raise ValueError("no episode: the orchestrator has not called reset yet")
        if self.episode_done:
            raise ValueError("the episode is over (submitted); nothing more runs until the next reset")
        return self._task, self._sandbox

    # --- internals ---------------------------------------------------------------------------

    @property
    def _bin(self) -> Path:
        _, sandbox = self._require_episode()
        return sandbox.root / "bin"

    def _task_text(self, task: Task) -> str:
        """The task, where to work and what is graded (the first lines of the agent's intro)."""
        files = ", ".join(sorted(task.files))
        workspace = self._sandbox.workspace if self._sandbox is not None else "?"
        return (
            f"{task.prompt.rstrip()}\n\n"
            f"Your working directory is {workspace}; it holds: {files}.\n"
            f"Only {task.solution_file} is graded: after the episode, hidden pytest tests call it in a fresh "
            f"process, without any other file from your working directory. You do not see the tests or the "
            f"result.\n"
        )

    def _intro(self, task: Task, tools: list[str]) -> str:
        s = self._settings
        return (
            self._task_text(task)
            + f"Tools: {', '.join(tools)}. Each command runs for at most {s.command_timeout_s:g} s and keeps "
            f"{s.max_output_bytes} bytes of output; `python` and `pytest` are on the PATH; {_network_text(self._sandbox)}. "
            f"Call submit when you are done."
        )

    def _require_episode(self) -> tuple[Task, Sandbox]:
        if self._task is None or self._sandbox is None:
            raise ToolFailure("no episode: the orchestrator has not called reset yet")
        return self._task, self._sandbox

    def _begin(self) -> None:
        """Checks before each tool: an episode is running and not over."""
        self._require_episode()
        if self.episode_done:
            raise ToolFailure("the episode is over (you submitted); nothing more can be done")
        self.state.tool_calls += 1

    def _new_session(self, task: Task) -> Sandbox:
        """The session's sandbox: launchers in bin/, the task's files in work/, an empty home/."""
        sandbox = Sandbox.from_manifest(manifest(), name="coding", base_dir=os.environ.get(WORKDIR_ENV) or None)
        try:
            bin_dir = sandbox.make_dir("bin", writable=False)
            for name, args in (("python", ""), ("python3", ""), ("pytest", " -m pytest")):
                launcher = bin_dir / name
                launcher.write_text(f'#!/bin/sh\nexec {sandbox.python()}{args} "$@"\n', encoding="utf-8")
                launcher.chmod(0o755)
            for name, text in task.files.items():
                target = sandbox.workspace / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            for top in {_check_relative(name).parts[0] for name in task.files}:
                sandbox.give(sandbox.workspace / top)  # the files are the agent's; work/ itself stays root's
            sandbox.make_dir("home")
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def _limits(self, timeout_s: float | None, max_output_bytes: int | None = None) -> SandboxLimits:
        """The session sandbox's limits (the manifest's), with a tool's shorter timeout or its own output cap."""
        _, sandbox = self._require_episode()
        if timeout_s is not None and timeout_s <= 0:
            raise ToolFailure(f"timeout_s must be positive, got {timeout_s}", error_type=ToolErrorType.INVALID_ARGS)
        limits = sandbox.limits
        return limits.model_copy(update={
            "timeout_s": min(timeout_s or limits.timeout_s, limits.timeout_s),
            "max_output_bytes": max_output_bytes or limits.max_output_bytes,
        })  # fmt: skip

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
        """Run one command in the session's sandbox, in the workspace. `as_agent_program`
        (run_agent): HOME is the agent's home, the launch's egress is on, and `timeout_s` is not capped
        at the per-command limit."""
        _, sandbox = self._require_episode()
        limits = self._limits(timeout_s, max_output_bytes)
        note = ""
        if not sandbox.workspace.is_dir():
            note = f"[note: the working directory {sandbox.workspace} had been deleted; it was recreated empty]\n"
        sandbox.make_dir("work")  # again: recreated if gone, its owner and mode restored
        home = sandbox.workspace
        if as_agent_program:
            limits = limits.model_copy(update={"timeout_s": timeout_s})
            home = sandbox.make_dir("home")
        env = {
            "PATH": f"{sandbox.root / 'bin'}:{SYSTEM_PATH}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        result = sandbox.run(command, env=env, stdin=stdin, limits=limits, network=as_agent_program)
        if note:
            result = result.model_copy(update={"stderr": note + result.stderr})
        return result

    def _cleanup(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
        self._sandbox = None
        self._task = None


# --- helpers --------------------------------------------------------------------------------------


def _pick_task(task_id: str | None, difficulty: str | None, seed: int | None) -> Task:
    tasks = load_tasks()
    if task_id is not None:
        if task_id not in tasks:
            hint = did_you_mean(task_id, tasks)
            raise ValueError(f"unknown task_id {task_id!r}.{hint} There are {len(tasks)} tasks (see tasks/).")
        return tasks[task_id]
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {list(DIFFICULTIES)}, got {difficulty!r}")
    pool = [t for t in tasks.values() if difficulty is None or t.difficulty == difficulty]
    return pool[random.Random(seed).randrange(len(pool))]


def _network_text(sandbox: Sandbox | None) -> str:
    """What the agent is told of the network: none, or the manifest's `network.allow` names."""
    if sandbox is None or not sandbox.network.allow:
        return "there is no network"
    return f"the network reaches only {', '.join(sandbox.network.allow)} (through the HTTP(S) proxy set in the environment)"
