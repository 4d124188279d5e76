"""Terminal: shell tasks in the spirit of Terminal-Bench.

The agent works in a Linux shell to finish one task: find and count files, process text with
awk and sed, fix a broken config file, work with git (commit, resolve a merge conflict, revert,
cherry-pick), write small scripts, set permissions, pack and unpack archives. Tasks live in
`tasks/<task_id>/` (`task.yaml`, optional `files/` copied into the workspace, optional
`setup.sh` run there); their checks and reference solutions live in `hidden/`, which never
enters the image: the host-side grader (`grader.TerminalGrader`) sends a task's check at
grading time through the orchestrator-only `run_checks` call.

Tools: `bash(command, timeout_s=None)`, `read_file(path)`, `write_file(path, content)`, and
`submit()`.

Isolation: each episode holds one `openenv_sdk.sandbox.Sandbox`, made in `reset` and closed in
`close` (and on the next `reset`). Every command the agent causes (the tools, the task's
`setup.sh`, an agent program started by `run_agent`) runs through `Sandbox.run`: as the
session's own uid, in fresh pid, mount, network, IPC and UTS namespaces, seeing the system,
the Python runtime and its session folder only (`work/` the workspace, `home/`, `state/` where
the shell is saved, `tmp/` mounted as `/tmp`), under the manifest's limits. Every process a
command started ends with it. `run_checks` runs the check in a second, fresh sandbox (another
uid) on a copy of the workspace, with the check files, its home and its tools in a folder beside
it mounted for the check alone; the agent never sees them. The agent's programs a check runs go
through `openenv_sdk.grading.program_runs` (a sandbox command of their own each), and its git
through `openenv_sdk.grading.trusted_git` (none of the repository's config, hooks or filters).

How the shell persists between calls: each call is a fresh `bash` that restores, before the
command, what the previous call left (the working directory, exported and plain shell
variables, and functions), and saves it again when it exits (an `EXIT` trap). A command that is
killed (timeout, output flood) saves nothing, so the shell is as it was before it. Not kept:
`set` options, traps, aliases, and background processes (a command's processes end with it).
If the working directory was deleted, the next call says so and starts in the workspace root.
"""

from __future__ import annotations

import functools
import os
import random
import secrets
import shlex
import shutil
import string
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field

from openenv_sdk import Action, Environment, Observation, State, ToolErrorType, ToolFailure, orchestrator, tool
from openenv_sdk._suggest import did_you_mean
from openenv_sdk.agents import AgentHost
from openenv_sdk.grading import program_runs, trusted_git
from openenv_sdk.grading.program_runs import ProgramRunServer
from openenv_sdk.manifest import Manifest, load_manifest
from openenv_sdk.manifest import Sandbox as SandboxSettings
from openenv_sdk.regrade import WorkspaceSnapshots
from openenv_sdk.sandbox import (
    CommandResult,
    Mount,
    Sandbox,
    SandboxLimits,
    isolation_mode,
    remove_tree,
    run_command,
)
from openenv_sdk.snapshots import SnapshotUnsupported, pack_folders, rewrite_text, unpack_folders
from openenv_sdk.tasks import TaskRecord
from openenv_sdk.terminal_task import TASK_ENV_NAMES, TASK_ID_PATTERN, TASK_IMAGE_ENV, TerminalTaskSpec

__all__ = [
    "WORKDIR_BASE_ENV",
    "TerminalEnvironment",
    "TerminalObservation",
    "TerminalState",
    "TerminalTask",
    "load_tasks",
    "task_ids",
]

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"

WORKDIR_BASE_ENV = "OPENENV_TERMINAL_WORKDIR"
"""Environment variable: the folder under which sessions' folders are made (default `/var/tmp`)."""

DEFAULT_WORKDIR_BASE = "/var/tmp"
"""Outside `/tmp`, so that a session's own `tmp/` can be mounted on `/tmp` without hiding it."""

MAX_COMMAND_BYTES = 100_000
"""Longest command the `bash` tool takes (one argument of `execve` holds at most 128 KiB)."""

SDK_DIR = Path(program_runs.__file__).resolve().parents[1]
"""The SDK's package, read-only in the grading sandbox (the pytest plugin of Harbor checks)."""
PROGRAM_TIMEOUT_S = 60.0
"""The longest one agent program run by a check may take (the check's own limit bounds it too)."""
SETUP_TIMEOUT_S = 60.0
COPY_TIMEOUT_S = 60.0
MAX_CHECK_OUTPUT_BYTES = 64 * 1024
FIXED_GIT_DATE = "2024-01-15T12:00:00+00:00"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

GITCONFIG = """\
[user]
\tname = Agent
\temail = agent@example.com
[init]
\tdefaultBranch = main
[advice]
\tdetachedHead = false
"""

# What the check's environment sets so that nothing the agent left in the workspace runs during
# grading unless the check itself runs it: git hooks, fsmonitor, pager, editor and signing
# programs (given on the command line's level, above any repository's config), replace refs
# (which could make `git log` show commits that are not there), system config; no BASH_ENV/ENV;
# Python does not import from the working directory.
GIT_OVERRIDES = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.pager": "cat",
    "core.editor": "true",
    "sequence.editor": "true",
    "core.sshCommand": "false",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "gpg.program": "false",
    "credential.helper": "",
}
CHECK_SAFETY_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES)),
    **{f"GIT_CONFIG_KEY_{i}": key for i, key in enumerate(GIT_OVERRIDES)},
    **{f"GIT_CONFIG_VALUE_{i}": value for i, value in enumerate(GIT_OVERRIDES.values())},
    "PAGER": "cat",
    "PYTHONSAFEPATH": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}

# The shell around every command. `$1` is the command; the rest of the arguments are its `$@`.
# __OE_ROOT (the workspace root) and __OE_STATE (where the shell is saved) come in the environment.
# Restoring: unset the exported variables bash was given, source the saved shell (variables,
# functions, `__oe_cwd`), cd there. Saving (on exit): one file, renamed into place. Builtins only
# (`builtin ...`, `${!a@}` for variable names), so the agent's functions cannot get in the way.
_NAMES = " ".join(f"${{!{c}@}}" for c in string.ascii_letters + "_")
WRAPPER = r"""
__oe_cmd=$1
shift
__oe_root=$__OE_ROOT
__oe_state=$__OE_STATE
builtin unset __OE_ROOT __OE_STATE
__oe_cwd=$__oe_root
if [ -f "$__oe_state/shell" ]; then
  for __oe_n in NAMES; do
    case $__oe_n in
      __oe_*) ;;
      *) [[ ${__oe_n@a} == *x* ]] && builtin unset "$__oe_n" ;;
    esac
  done
  . "$__oe_state/shell" 2>/dev/null
fi
if ! builtin cd -- "$__oe_cwd" 2>/dev/null; then
  builtin printf '[note: the working directory %s no longer exists; now in the workspace root %s]\n' \
    "$__oe_cwd" "$__oe_root" >&2
  builtin cd -- "$__oe_root" || builtin exit 126
fi
__oe_save() {
  builtin local IFS=$' \t\n' __oe_n
  {
    builtin printf '__oe_cwd=%q\n' "$PWD"
    for __oe_n in NAMES; do
      case $__oe_n in
        __oe_*|BASH*|COMP_*|DIRSTACK|EPOCHREALTIME|EPOCHSECONDS|EUID|FUNCNAME|GROUPS|HISTCMD|HOSTNAME|\
HOSTTYPE|IFS|LINENO|MACHTYPE|OPTERR|OPTIND|OSTYPE|PIPESTATUS|PPID|PS4|PWD|RANDOM|SECONDS|SHELLOPTS|\
SHLVL|SRANDOM|UID|_) ;;
        *) builtin declare -p -- "$__oe_n" 2>/dev/null ;;
      esac
    done
    builtin declare -f
  } > "$__oe_state/shell.new" && builtin command -p mv -f -- "$__oe_state/shell.new" "$__oe_state/shell"
}
builtin trap __oe_save EXIT
builtin eval "$__oe_cmd"
""".replace("NAMES", _NAMES)

SNAPSHOT_FOLDERS = ("work", "home", "state", "tmp")
"""The session's folders a checkpoint keeps: the workspace, HOME, the shell's saved state, temp."""

READ_FILE = 'builtin command -p cat -- "$1"'
WRITE_FILE = (
    'case $1 in */*) builtin command -p mkdir -p -- "${1%/*}" || builtin exit 1 ;; esac\n'
    'builtin command -p cat > "$1"'
)


# --- tasks -------------------------------------------------------------------------------


class TerminalTask(TerminalTaskSpec):
    """One task: its `task.yaml` (`openenv_sdk.terminal_task`, the format `openenv harbor import`
    writes) and the folder it was read from."""

    id: str = Field(pattern=TASK_ID_PATTERN, description="The folder name under `tasks/`.")

    @property
    def folder(self) -> Path:
        return TASKS_DIR / self.id

    @property
    def setup_script(self) -> str | None:
        path = self.folder / "setup.sh"
        return path.read_text(encoding="utf-8") if path.is_file() else None


@functools.cache
def load_tasks() -> dict[str, TerminalTask]:
    """Every task in `tasks/`, by id (sorted)."""
    tasks: dict[str, TerminalTask] = {}
    for folder in sorted(p for p in TASKS_DIR.iterdir() if p.is_dir()):
        data = yaml.safe_load((folder / "task.yaml").read_text(encoding="utf-8"))
        tasks[folder.name] = TerminalTask.model_validate({"id": folder.name, **data})
    return tasks


def task_ids() -> list[str]:
    """The task ids, sorted; a seed picks among them in this order."""
    return list(load_tasks())


# --- sandboxes ---------------------------------------------------------------------------


@functools.cache
def manifest() -> Manifest:
    """This folder's `openenv.yaml`: its `sandbox:` and `network:` sections make every sandbox."""
    return load_manifest(HERE)


def sandbox_settings() -> SandboxSettings:
    """The manifest's `sandbox:` section (its defaults when the section is absent)."""
    return manifest().sandbox or SandboxSettings()


def _new_sandbox(name: str, *, phase: Literal["agent", "grading"] = "agent") -> Sandbox:
    """A sandbox as the manifest says (for the agent's phase, or the check's), its folder under
    `WORKDIR_BASE_ENV`'s folder."""
    wanted = os.environ.get(WORKDIR_BASE_ENV) or DEFAULT_WORKDIR_BASE
    usable = os.path.isdir(wanted) and os.access(wanted, os.W_OK | os.X_OK)
    base = wanted if usable else None  # None: the system's temp dir
    return Sandbox.from_manifest(manifest(), phase=phase, name=name, base_dir=base)


def _shows_tmp(sandbox: Sandbox) -> bool:
    """Whether the session's `tmp/` can be mounted on `/tmp` (namespaces, and the session's folder
    is not itself under `/tmp`, which the mount would hide)."""
    return sandbox.namespaced and not sandbox.root.is_relative_to("/tmp")


def _account_files(sandbox: Sandbox, home: Path) -> list[Mount]:
    """`/etc/passwd` and `/etc/group` with the session's uid named (`id -un`, `whoami` and tools
    that look the user up work), mounted over the system's; none where the uid has a name."""
    if not sandbox.namespaced or not sandbox.privileged:
        return []
    name = sandbox.user
    etc = sandbox.make_dir("etc", writable=False)
    mounts = []
    for file, line in (
        ("passwd", f"{name}:x:{sandbox.uid}:{sandbox.gid}:{name}:{home}:/bin/bash"),
        ("group", f"{name}:x:{sandbox.gid}:"),
    ):
        system = Path("/etc", file).read_text(encoding="utf-8", errors="replace").splitlines()
        kept = [entry for entry in system if entry.split(":", 1)[0] != name]
        (etc / file).write_text("\n".join([*kept, line]) + "\n", encoding="utf-8")
        os.chmod(etc / file, 0o644)
        mounts.append(Mount(source=etc / file, target=Path("/etc", file)))
    return mounts


def _give_contents(sandbox: Sandbox, folder: Path) -> None:
    """Hand what the server wrote in `folder` to the sandbox user (the folder itself stays root's)."""
    for entry in folder.iterdir():
        sandbox.give(entry)


# --- the environment ---------------------------------------------------------------------


class TerminalObservation(Observation):
    """What the agent is told at the start of an episode."""

    task_id: str = ""
    title: str = ""
    prompt: str = ""
    workdir: str = Field(default="", description="The workspace: where the shell starts and what is checked.")
    instructions: str = Field(default="", description="The tools and how the shell behaves.")


class TerminalState(State):
    """The episode, as the orchestrator sees it (never the check or the reward)."""

    task_id: str | None = None
    category: str | None = None
    difficulty: str | None = None
    workdir: str | None = None
    commands: int = Field(default=0, description="Tool calls run in the shell this episode.")
    submitted: bool = False


class TerminalEnvironment(AgentHost, WorkspaceSnapshots, Environment[Action, TerminalObservation, TerminalState]):
    """Finish a task in a Linux shell (files, text, git, scripts, config, archives); checked host-side."""

    name = "terminal"
    version = "0.1.0"

    def __init__(self) -> None:
        """Raises:
        IsolationUnavailable: bubblewrap cannot run here and the operator did not opt out.
        """
        isolation_mode()  # refuse at once, with what is missing, rather than at the first reset
        self._sandbox: Sandbox | None = None
        self._mounts: list[Mount] = []
        self._tmpdir = "/tmp"
        self._task: TerminalTask | None = None
        self._task_env: dict[str, str] = {}
        self.state = TerminalState()

    # --- the orchestrator's verbs ------------------------------------------------------

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        """Every task in `tasks/` (split `train`): the prompt the agent reads; the checks stay in `hidden/`."""
        return [
            TaskRecord(id=t.id, title=t.title, category=t.category, difficulty=t.difficulty, prompt=t.prompt)
            for t in load_tasks().values()
        ]

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **task: Any,
    ) -> TerminalObservation:
        """Start an episode on `task_id` (or the task a seed picks) in a fresh sandbox.

        Raises:
            ValueError: unknown task id, or unknown task fields.
            RuntimeError: the task's setup failed.
        """
        if task:
            raise ValueError(f"unknown reset field(s) {sorted(task)}; this environment takes task_id and seed")
        tasks = load_tasks()
        if task_id is None:
            task_id = random.Random(seed).choice(list(tasks))
        if not isinstance(task_id, str):
            raise ValueError(f"task_id must be a string such as {next(iter(tasks))!r}, got {task_id!r}")
        if task_id not in tasks:
            hint = did_you_mean(task_id, tasks)
            raise ValueError(f"unknown task_id {task_id!r}.{hint} There are {len(tasks)} tasks (see tasks/).")
        chosen = tasks[task_id]
        if chosen.image and os.environ.get(TASK_IMAGE_ENV) != chosen.id:
            raise ValueError(
                f"task {task_id!r} brings its own image: serve the image that `openenv harbor build "
                f"<environment folder> {task_id}` makes (this server is not in it)"
            )
        self._close_sandbox()
        self._task = chosen
        self._task_env = _image_env() if chosen.image else {}
        self.episode_done = False
        self._sandbox = _new_sandbox("terminal")
        try:
            self._prepare(chosen)
        except BaseException:
            self._close_sandbox()
            raise
        work = Path(chosen.workdir) if chosen.workdir else self._sandbox.workspace
        self.state = TerminalState(
            episode_id=episode_id or f"terminal-{task_id}-{secrets.token_hex(4)}",
            task_id=task_id,
            category=chosen.category,
            difficulty=chosen.difficulty,
            workdir=str(work),
        )
        return TerminalObservation(
            task_id=task_id,
            title=chosen.title,
            prompt=chosen.prompt.strip(),
            workdir=str(work),
            instructions=self._instructions(work),
        )

    def close(self) -> None:
        self._close_sandbox()

    def _prepare(self, task: TerminalTask) -> None:
        """The session's folders, its files, and the task's setup (run as the agent would)."""
        self._prepare_folders(task)
        sandbox = self._sandbox
        assert sandbox is not None
        if task.image and task.workdir:
            _copy_image_workdir(sandbox, Path(task.workdir))
        files = task.folder / "files"
        if files.is_dir():
            shutil.copytree(files, sandbox.workspace, symlinks=True, dirs_exist_ok=True)
            sandbox.make_dir("work")  # copytree gave it the mode of `files/`
            _give_contents(sandbox, sandbox.workspace)
        setup = task.setup_script
        if setup is not None:
            result = self._run(
                "bash -e -s",
                stdin=setup,
                timeout_s=SETUP_TIMEOUT_S,
                extra_env={
                    "GIT_AUTHOR_DATE": FIXED_GIT_DATE,
                    "GIT_COMMITTER_DATE": FIXED_GIT_DATE,
                    "GIT_AUTHOR_NAME": "Dev",
                    "GIT_AUTHOR_EMAIL": "dev@example.com",
                    "GIT_COMMITTER_NAME": "Dev",
                    "GIT_COMMITTER_EMAIL": "dev@example.com",
                },
                wrapped=False,
            )
            if result.exit_code != 0:
                raise RuntimeError(f"setup of task {task.id!r} failed:\n{result.render()}")

    def _prepare_folders(self, task: TerminalTask) -> None:
        """The session's folders (home, shell state, temp) and the mounts its commands get."""
        sandbox = self._sandbox
        assert sandbox is not None
        home = sandbox.make_dir("home")
        sandbox.make_dir("state")
        tmp = sandbox.make_dir("tmp")
        (home / ".gitconfig").write_text(GITCONFIG, encoding="utf-8")
        _give_contents(sandbox, home)
        self._mounts = _account_files(sandbox, home) + _image_mounts(task)
        if task.workdir:
            self._mounts.append(Mount(source=sandbox.workspace, target=Path(task.workdir), writable=True))
        if _shows_tmp(sandbox):
            self._mounts.append(Mount(source=tmp, target=Path("/tmp"), writable=True))
            self._tmpdir = "/tmp"
        else:
            self._tmpdir = str(tmp)

    # --- checkpoint and restore (the orchestrator's; see openenv_sdk.snapshots) ---------------

    def snapshot(self, folder: Path) -> dict[str, Any]:
        """The episode: its state, and the session's folders (workspace, home, the shell's saved
        state, temp), copied once every process of the agent has ended (none outlives a command)."""
        if self._sandbox is None or self._task is None:
            raise SnapshotUnsupported("no episode to checkpoint: call reset first")
        self._sandbox.kill_all()
        root = self._sandbox.root
        pack_folders(root, SNAPSHOT_FOLDERS, folder / "folders.tar")
        return {
            "task_id": self._task.id,
            "root": str(root),
            "state": self.state.model_dump(mode="json"),
            "episode_done": self.episode_done,
        }

    def restore(self, data: dict[str, Any], folder: Path) -> None:
        """A new sandbox holding a copy of the checkpoint's folders; the shell's saved state (its
        working directory, variables) names the new session's folder where it named the old."""
        task = load_tasks().get(str(data.get("task_id")))
        if task is None:
            raise SnapshotUnsupported(f"the checkpoint's task {data.get('task_id')!r} is not among this server's tasks")
        if task.image and os.environ.get(TASK_IMAGE_ENV) != task.id:
            raise SnapshotUnsupported(f"task {task.id!r} brings its own image: restore it on a server of that image")
        self._close_sandbox()
        self._task = task
        self._task_env = _image_env() if task.image else {}
        self._sandbox = _new_sandbox("terminal")
        try:
            self._prepare_folders(task)
            old_root, new_root = str(data["root"]), str(self._sandbox.root)
            unpack_folders(folder / "folders.tar", self._sandbox, SNAPSHOT_FOLDERS)
            rewrite_text(self._sandbox.root / "state" / "shell", old_root, new_root)
        except BaseException:
            self._close_sandbox()
            raise
        state = TerminalState.model_validate(data["state"])
        if state.workdir is not None:
            state.workdir = state.workdir.replace(old_root, new_root, 1)
        self.state = state
        self.episode_done = bool(data.get("episode_done"))

    # --- the agent's tools -------------------------------------------------------------

    @tool
    def bash(self, command: str, timeout_s: float | None = None) -> str:
        """Run a command with bash in the task's workspace and return its output and exit code.

        The working directory, variables (exported or not) and functions carry over to the next
        call; background processes do not (they end with the command).

        Args:
            command: the command line (several lines are fine; heredocs work).
            timeout_s: stop the command after this many seconds (at most the server's limit, 30 s by default).
        """
        self._check_playing()
        if len(command.encode()) > MAX_COMMAND_BYTES:
            raise ToolFailure(
                f"the command is {len(command.encode())} bytes; the limit is {MAX_COMMAND_BYTES}. "
                f"Write long content with write_file.",
                error_type=ToolErrorType.INVALID_ARGS,
            )
        if "\0" in command:
            raise ToolFailure("the command contains a NUL character", error_type=ToolErrorType.INVALID_ARGS)
        limit_s = sandbox_settings().command_timeout_s
        if timeout_s is not None:
            if not timeout_s > 0:
                raise ToolFailure(f"timeout_s must be positive, got {timeout_s}", error_type=ToolErrorType.INVALID_ARGS)
            limit_s = min(timeout_s, limit_s)
        self.state.commands += 1
        return self._run(command, timeout_s=limit_s).render()

    @tool
    def read_file(self, path: str) -> str:
        """Return the text of a file (relative paths start at the shell's working directory).

        Args:
            path: the file to read.
        """
        self._check_playing()
        self.state.commands += 1
        result = self._run(READ_FILE, args=[path])
        if result.exit_code != 0:
            raise ToolFailure(f"cannot read {path!r}: {result.stderr.strip() or result.render()}")
        return result.stdout

    @tool
    def write_file(self, path: str, content: str) -> str:
        """Write text to a file, replacing it; missing parent folders are made.

        Args:
            path: the file to write (relative paths start at the shell's working directory).
            content: the whole new content.
        """
        self._check_playing()
        self.state.commands += 1
        result = self._run(WRITE_FILE, args=[path], stdin=content)
        if result.exit_code != 0:
            raise ToolFailure(f"cannot write {path!r}: {result.stderr.strip() or result.render()}")
        return f"wrote {len(content.encode())} bytes to {path}"

    @tool
    def submit(self) -> str:
        """Say the task is done. The episode ends; the workspace is then checked."""
        self._check_playing()
        self.state.submitted = True
        self.episode_done = True
        return "Submitted. The episode is over."

    # --- the grader's calls (never reachable over MCP) -----------------------------------

    @orchestrator
    def run_checks(self, files: dict[str, str], command: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Run a check on a copy of the workspace, in a fresh sandbox the agent never saw.

        The grading sandbox has a uid of its own. `files` (name -> text) are written to a folder
        named by `$CHECK_DIR`, mounted read-only; the copy of the workspace (`$WORKSPACE`) is the
        check's working directory. The agent's programs the check runs (`run_agent` in lib.sh)
        run through a `ProgramRunServer`, each a sandbox command of its own that sees only the
        workspace copy and `$SCRATCH`; `git` in the check is `trusted_git`. The verdict is the
        check's exit code; its `PASS: `/`FAIL: ` lines are evidence only.

        Returns:
            `exit_code`, `timed_out`, `passed` and `failed` (the check's `PASS: `/`FAIL: ` lines),
            `output` (its last 8 KiB), `duration_s`.

        Raises:
            ValueError: no episode, or a file name that is not a plain relative path.
        """
        if self._sandbox is None or self._task is None:
            raise ValueError("no episode to check: call reset first")
        for name in files:
            parts = Path(name).parts
            if not parts or Path(name).is_absolute() or ".." in parts:
                raise ValueError(f"check file names must be relative paths inside the check folder, got {name!r}")
        if not 0 < timeout_s <= 600:
            raise ValueError(f"timeout_s must be in (0, 600], got {timeout_s}")
        # Nothing of the agent runs now (each command's processes end with it); made sure of, as
        # the copy must see the workspace as it was left.
        self._sandbox.kill_all()
        with _new_sandbox("terminal-grade", phase="grading") as grader:
            return self._run_checks_in(grader, files, command, timeout_s)

    def _run_checks_in(self, grader: Sandbox, files: dict[str, str], command: str, timeout_s: float) -> dict[str, Any]:
        # The grading sandbox's own folder holds only what the agent's programs may see (the copy
        # of the workspace, a scratch folder): the check's files, home, temp folder and tools are
        # in a folder beside it, mounted for the check's command alone.
        private = Path(tempfile.mkdtemp(prefix="openenv-terminal-check-", dir=grader.root.parent))
        try:
            os.chmod(private, 0o711)
            return self._check_with(grader, private, files, command, timeout_s)
        finally:
            remove_tree(private)

    def _check_with(
        self, grader: Sandbox, private: Path, files: dict[str, str], command: str, timeout_s: float
    ) -> dict[str, Any]:
        assert self._sandbox is not None and self._task is not None
        task = self._task
        check_dir = _private_dir(grader, private, "check", writable=False)
        for name, text in files.items():
            target = check_dir / name
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            target.chmod(0o644)
        home, tmp = _private_dir(grader, private, "home"), _private_dir(grader, private, "tmp")
        (home / ".gitconfig").write_text(GITCONFIG, encoding="utf-8")
        _give_contents(grader, home)
        # The copy is made by the server (cp -a: modes, symlinks and hard links kept, nothing
        # followed), then handed to the grading uid. The agent's processes are gone by now.
        copy_limits = SandboxLimits(timeout_s=COPY_TIMEOUT_S, sandbox_user=None, memory_bytes=None, max_processes=None)
        copied = run_command(
            ["/bin/cp", "-a", "--", f"{self._sandbox.workspace}/.", f"{grader.workspace}/"], cwd="/", limits=copy_limits
        )
        if copied.exit_code != 0:
            return _check_result(copied, failed=["copy the workspace"])
        grader.make_dir("work")  # `cp -a` gave it the session's owner and mode
        _give_contents(grader, grader.workspace)
        workspace = Path(task.workdir) if task.workdir else grader.workspace
        scratch = grader.make_dir("scratch")
        tools = _grading_tools(grader, private)
        mounts = [
            Mount(source=check_dir, writable=False),
            Mount(source=tools, writable=False),
            Mount(source=home, writable=True),
            Mount(source=tmp, writable=True),
            Mount(source=SDK_DIR, writable=False),
            *_image_mounts(task),
        ]
        if task.workdir:
            mounts.append(Mount(source=grader.workspace, target=workspace, writable=True))
        env = {
            "PATH": f"{tools / 'bin'}:{PATH}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": str(tmp),
            "CHECK_DIR": str(check_dir),
            "WORKSPACE": str(workspace),
            "SCRATCH": str(scratch),
            "PYTHON": sys.executable,
            "RUN_PROGRAM": str(tools / "run_program.py"),
            "TRUSTED_GIT": str(tools / "trusted_git.py"),
            "OPENENV_RUN_SOCKET": str(tools / "run.sock"),
            "OPENENV_RUN_CLIENT": str(tools / "run_program.py"),
            "OPENENV_TRUSTED_GIT": str(tools / "trusted_git.py"),
            **CHECK_SAFETY_ENV,
        }
        if task.harbor:
            # Harbor's verifier layout; its pytest tests run with the server's Python and the
            # plugin that keeps the agent's code out of the verifier's process.
            if (check_dir / "tests").is_dir():
                mounts.append(Mount(source=check_dir / "tests", target=Path("/tests"), writable=False))
            mounts.append(Mount(source=_private_dir(grader, private, "logs"), target=Path("/logs"), writable=True))
            env["OPENENV_AGENT_DIR"] = str(workspace)
            env["PYTEST_ADDOPTS"] = "-p openenv_sdk.grading.pytest_sandboxed"
        # The agent's programs that the check runs (`run_agent`) run through this server, each as
        # a new command of the grading sandbox (a pid namespace of its own, no network) that sees
        # the copy of the workspace and the scratch folder, never the private folder.
        programs = ProgramRunServer(
            tools / "run.sock",
            sandbox=grader,
            folders=[
                Mount(source=grader.workspace, target=workspace, writable=True),
                Mount(source=scratch, writable=True),
                # the image's folders after (the first is HOME), but for one holding the workspace
                *[m for m in _image_mounts(task) if not workspace.is_relative_to(m.source)],
            ],
            max_timeout_s=PROGRAM_TIMEOUT_S,
        )
        with programs.start():
            result = grader.run(
                command,
                cwd=grader.workspace,
                env=env,
                timeout_s=timeout_s,
                max_output_bytes=MAX_CHECK_OUTPUT_BYTES,
                mounts=mounts,
            )
        return _check_result(result)

    # --- hosting an agent program (orchestrator's `run_agent`, see openenv_sdk.agents) ---

    def agent_exec(
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None, memory_bytes: int | None = None
    ) -> CommandResult:
        """In the episode's sandbox; `network=True` gives it its launch's egress only (the model
        endpoint, relayed in; `openenv_sdk.agents.host`), never the host's network. `memory_bytes`
        (the agent spec's): the per-process address space in place of the manifest's (node
        reserves GiBs it never touches); the session's cgroup still bounds what is used."""
        self._check_playing()
        limits = self._sandbox.limits.model_copy(update={"memory_bytes": memory_bytes}) if memory_bytes is not None and self._sandbox else None
        return self._run(
            command,
            stdin=stdin,
            timeout_s=timeout_s,
            extra_env=env,
            wrapped=False,
            network=True,
            mounts=_agents_dir_mounts(env),
            limits=limits,
        )

    def agent_home(self) -> str:
        self._check_playing()
        assert self._sandbox is not None
        return str(self._sandbox.root / "home")

    def agent_workdir(self) -> str:
        self._check_playing()
        assert self._sandbox is not None
        return self._workdir()

    def agent_instruction(self) -> str:
        self._check_playing()
        assert self._task is not None and self._sandbox is not None
        return (
            f"{self._task.prompt.strip()}\n\nYour working directory is {self._workdir()}: "
            f"when you are done, the files there are checked. Nothing is interactive and there is no network."
        )

    # --- internals ---------------------------------------------------------------------

    def _workdir(self) -> str:
        """The workspace as the agent sees it: the task's `workdir`, else its own path."""
        assert self._sandbox is not None
        return (self._task.workdir if self._task else None) or str(self._sandbox.workspace)

    def _check_playing(self) -> None:
        if self._sandbox is None:
            raise ToolFailure("no episode: the orchestrator has not called reset yet")
        if self.episode_done:
            raise ToolFailure("the episode is over (submitted); nothing more runs until the next reset")

    def _run(
        self,
        command: str,
        *,
        args: list[str] | None = None,
        stdin: str | None = None,
        timeout_s: float | None = None,
        extra_env: dict[str, str] | None = None,
        wrapped: bool = True,
        network: bool = False,
        mounts: list[Mount] | None = None,
        limits: SandboxLimits | None = None,
    ) -> CommandResult:
        """Run one command in the session's shell (or, `wrapped=False`, plainly in the workspace root)."""
        sandbox = self._sandbox
        assert sandbox is not None
        name = sandbox.user
        env = {
            "PATH": PATH,
            "HOME": str(sandbox.root / "home"),
            "USER": name,
            "LOGNAME": name,
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": self._tmpdir,
            "GIT_EDITOR": "true",
            "PAGER": "cat",
            **self._task_env,
            **(extra_env or {}),
        }
        if wrapped:
            env.update({"__OE_ROOT": self._workdir(), "__OE_STATE": str(sandbox.root / "state")})
            argv: str | list[str] = ["/bin/bash", "-c", WRAPPER, "bash", command, *(args or [])]
        else:
            argv = command
        return sandbox.run(
            argv, cwd=sandbox.workspace,
            env=env,
            stdin=stdin,
            timeout_s=timeout_s,
            mounts=[*self._mounts, *(mounts or [])],
            network=network,
            limits=limits,
        )

    def _close_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        self._mounts = []
        if sandbox is not None:
            sandbox.close()

    def _instructions(self, work: Path) -> str:
        settings = sandbox_settings()
        return (
            f"You are in a Linux shell (bash; git and python3 are installed; no network). Your working "
            f"directory is {work}, the workspace: when you are done, the files there are checked.\n"
            f"Tools:\n"
            f"- bash(command, timeout_s=None): run a command. The working directory, variables and functions "
            f"carry over between calls; background processes do not. Each call may take at most "
            f"{settings.command_timeout_s:g} s; output beyond {settings.max_output_bytes} bytes per stream is cut.\n"
            f"- read_file(path) and write_file(path, content): read or replace a whole text file.\n"
            f"- submit(): say you are done (the episode ends).\n"
            f"Nothing is interactive: stdin is empty, and git uses no editor or pager."
        )


IMAGE_TOP_SKIPPED = frozenset({"proc", "sys", "dev", "tmp", "run", "var", "root", "boot", "env", "lost+found",
                               "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"})  # fmt: skip
"""Top-level folders of a task's own image not shown by `_image_mounts`: the system (bound already),
the server's own (`/env`, `/root`, `/run`), the kernel's, and `/var` (its `tmp/` holds the sessions)."""
IMAGE_VAR_DIRS = ("lib", "www", "log", "opt", "cache", "spool", "mail", "backups")


def _image_mounts(task: TerminalTask) -> list[Mount]:
    """In a task's own image: what its Dockerfile may have put beside the system (`/opt`, `/srv`,
    `/home`, `/data`, `/var/lib`, ...), read-only, for the agent's commands, the check and the
    programs it runs; the workspace is mounted over its `workdir`."""
    if not task.image:
        return []
    folders = [p for p in sorted(Path("/").iterdir()) if p.name not in IMAGE_TOP_SKIPPED]
    folders += [Path("/var", name) for name in IMAGE_VAR_DIRS]
    return [Mount(source=p) for p in folders if p.is_dir() and not p.is_symlink()]


def _image_env() -> dict[str, str]:
    """In a task's own image: the ENV its Dockerfile and compose file set, for the agent's shell
    (never the session's own HOME, USER or TMPDIR)."""
    names = [n for n in os.environ.get(TASK_ENV_NAMES, "").split(",") if n]
    kept = set(names) - {"HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD"}
    return {n: os.environ[n] for n in names if n in kept and n in os.environ}


def _copy_image_workdir(sandbox: Sandbox, workdir: Path) -> None:
    """A task with its own image: its workspace starts as the image's `workdir`, as the task's
    Dockerfile left it (copied by the server, `cp -a`, then handed to the session's uid)."""
    if not workdir.is_dir():
        return
    limits = SandboxLimits(timeout_s=COPY_TIMEOUT_S, sandbox_user=None, memory_bytes=None, max_processes=None)
    copied = run_command(["/bin/cp", "-a", "--", f"{workdir}/.", f"{sandbox.workspace}/"], cwd="/", limits=limits)
    if copied.exit_code != 0:
        raise RuntimeError(f"copying the image's {workdir} into the workspace failed:\n{copied.render()}")
    sandbox.make_dir("work")
    _give_contents(sandbox, sandbox.workspace)


def _agents_dir_mounts(env: dict[str, str]) -> list[Mount]:
    """The orchestrator's pre-installed agents folder (`OPENENV_AGENTS_DIR`), read-only in the sandbox.

    Read-only so that no episode's agent can change the program a later episode runs: install
    the agent there on the host first (the spec's install command finds it and does nothing).
    Without `OPENENV_AGENTS_DIR` each episode installs it into the sandbox's own `/tmp`.
    """
    folder = env.get("OPENENV_AGENTS_DIR")
    if not folder or not os.path.isabs(folder) or not os.path.isdir(folder):
        return []
    return [Mount(source=Path(folder), writable=False)]


def _private_dir(grader: Sandbox, private: Path, name: str, *, writable: bool = True) -> Path:
    """A folder of the check's own (outside the grading sandbox's folder): the grading uid's, or
    root's and read-only."""
    folder = private / name
    folder.mkdir(mode=0o755)
    if writable:
        grader.give(folder)
        folder.chmod(0o700)
    return folder


def _grading_tools(grader: Sandbox, private: Path) -> Path:
    """A read-only folder of the grading sandbox with the client of the program-run server, the
    trusted git script, and `bin/git` (first on the check's PATH) that runs it: any `git` a check
    runs reads none of the configuration, hooks, attributes or filters the agent wrote."""
    tools = _private_dir(grader, private, "tools", writable=False)
    for module in (program_runs.CLIENT_SCRIPT, Path(trusted_git.__file__)):
        (tools / module.name).write_text(module.read_text(encoding="utf-8"), encoding="utf-8")
        (tools / module.name).chmod(0o644)
    (tools / "bin").mkdir(mode=0o755, exist_ok=True)
    shim = tools / "bin" / "git"
    script = f"{shlex.quote(sys.executable)} -I -S {shlex.quote(str(tools / 'trusted_git.py'))}"
    shim.write_text(f'#!/bin/sh\nexec {script} "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return tools


def _check_result(result: CommandResult, *, failed: list[str] | None = None) -> dict[str, Any]:
    """What `run_checks` answers: the exit code decides; the `PASS:`/`FAIL:` lines are evidence."""
    lines = result.stdout.splitlines()
    return {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "passed": [line[6:] for line in lines if line.startswith("PASS: ")] if failed is None else [],
        "failed": failed if failed is not None else [line[6:] for line in lines if line.startswith("FAIL: ")],
        "output": result.render()[-8192:],
        "duration_s": round(result.duration_s, 3),
    }
