"""Terminal: shell tasks in the spirit of Terminal-Bench.

The agent works in a Linux shell to finish one task: find and count files, process text with
awk and sed, fix a broken config file, work with git (commit, resolve a merge conflict, revert,
cherry-pick), write small scripts, set permissions, pack and unpack archives. Tasks live in
`tasks/<task_id>/` (`task.yaml`, optional `files/` copied into the workspace, optional
`setup.sh` run there); their checks and reference solutions live in `hidden/`, which never
enters the image: the host-side grader (`grader.TerminalGrader`) sends a task's check at
grading time through the orchestrator-only `run_checks` call.

Tools: `bash(command, timeout_s=None)`, `read_file(path)`, `write_file(path, content)`, and
`submit()`. Every command goes through `openenv_sdk.sandbox.run_command` (time, output, memory
and process limits; the sandbox user when the server is root).

How the shell persists between calls: each call is a fresh `bash` that restores, before the
command, what the previous call left (the working directory, exported and plain shell
variables, and functions), and saves it again when it exits (an `EXIT` trap). A command that is
killed (timeout, output flood) saves nothing, so the shell is as it was before it. Not kept:
`set` options, traps, aliases, and background processes (a command's processes end with it).
If the working directory was deleted, the next call says so and starts in the workspace root.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import pwd
import random
import secrets
import shutil
import signal
import stat
import string
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from openenv_sdk import Action, Environment, Observation, State, orchestrator, tool
from openenv_sdk.agents import AgentHost
from openenv_sdk.manifest import Sandbox, load_manifest
from openenv_sdk.sandbox import CommandResult, SandboxLimits, run_command

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
"""Environment variable: the folder under which sessions' workspaces are made (default: the temp dir)."""

SESSION_MARKER = "OPENENV_TERMINAL_SESSION"
"""Set in every command's environment, so that processes that escape their command can be found."""

MAX_COMMAND_BYTES = 100_000
"""Longest command the `bash` tool takes (one argument of `execve` holds at most 128 KiB)."""

SETUP_TIMEOUT_S = 60.0
COPY_TIMEOUT_S = 60.0
MAX_CHECK_OUTPUT_BYTES = 64 * 1024
CAPABILITIES_HINT = (
    "A server running as root needs the capabilities CHOWN, SETUID, SETGID and KILL to hand workspaces "
    "to the sandbox user and run its commands (a container started with --cap-drop ALL must add them back)."
)
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
      __oe_*|OPENENV_TERMINAL_SESSION) ;;
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
SHLVL|SRANDOM|UID|_|OPENENV_TERMINAL_SESSION) ;;
        *) builtin declare -p -- "$__oe_n" 2>/dev/null ;;
      esac
    done
    builtin declare -f
  } > "$__oe_state/shell.new" && builtin command -p mv -f -- "$__oe_state/shell.new" "$__oe_state/shell"
}
builtin trap __oe_save EXIT
builtin eval "$__oe_cmd"
""".replace("NAMES", _NAMES)

READ_FILE = 'builtin command -p cat -- "$1"'
WRITE_FILE = (
    'case $1 in */*) builtin command -p mkdir -p -- "${1%/*}" || builtin exit 1 ;; esac\n'
    'builtin command -p cat > "$1"'
)


# --- tasks -------------------------------------------------------------------------------


class TerminalTask(BaseModel):
    """One task: what the agent is asked, and how its workspace starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="The folder name under `tasks/`.")
    title: str = Field(min_length=1, description="A few words.")
    category: Literal["files", "text", "config", "git", "scripting", "permissions", "archives"]
    difficulty: Literal["easy", "medium", "hard"]
    prompt: str = Field(min_length=1, description="What the agent is asked to do, as it reads it.")

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


# --- the sandbox user and the places sessions live -------------------------------------


@functools.cache
def sandbox_settings() -> Sandbox:
    """The manifest's `sandbox:` section (its defaults when the section is absent)."""
    return load_manifest(HERE).sandbox or Sandbox()


@functools.cache
def sandbox_account() -> tuple[str, int, int] | None:
    """`(name, uid, gid)` of the user commands run as when the server is root, else None.

    The manifest's `sandbox.user`, or `nobody` when that user does not exist on this machine.

    Raises:
        RuntimeError: the server is root and neither user exists (commands would run as root).
    """
    if os.geteuid() != 0:
        return None
    for name in dict.fromkeys([sandbox_settings().user, "nobody"]):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return name, entry.pw_uid, entry.pw_gid
    raise RuntimeError(
        f"the server runs as root but neither the sandbox user {sandbox_settings().user!r} nor 'nobody' "
        f"exists: agent commands would run as root. Create the user (useradd {sandbox_settings().user})."
    )


_parent_lock = threading.Lock()
_parent: Path | None = None


def _new_private_dir(prefix: str) -> Path:
    """A fresh folder (0700) in this process's folder of session and grading folders.

    That folder is root-owned and not listable (0711) when the server is root, so a command can
    reach its own session's folder but find no other. It exists while it holds something.
    """
    global _parent
    with _parent_lock:
        if _parent is None or not _parent.is_dir():
            base = os.environ.get(WORKDIR_BASE_ENV) or tempfile.gettempdir()
            Path(base).mkdir(parents=True, exist_ok=True)
            _parent = Path(tempfile.mkdtemp(prefix="openenv-terminal-", dir=base))
            _parent.chmod(0o711 if os.geteuid() == 0 else 0o700)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=_parent))


def _release_private_dir(path: Path) -> None:
    """Remove a folder made by `_new_private_dir`, and the parent folder once it is empty."""
    global _parent
    _remove_tree(path)
    with _parent_lock:
        if _parent is not None:
            with contextlib.suppress(OSError):  # not empty: other sessions live there
                _parent.rmdir()
                _parent = None


def _force_rmtree(path: Path) -> None:
    """Remove a tree, adding owner permissions (never taking any away) where a removal fails."""

    def add_owner_rwx(target: str) -> None:
        with contextlib.suppress(OSError):
            info = os.lstat(target)
            if stat.S_ISDIR(info.st_mode):
                os.chmod(target, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)

    def retry(function: Any, failed: str, _exc: BaseException) -> None:
        add_owner_rwx(os.path.dirname(failed))
        add_owner_rwx(failed)
        if function in (os.rmdir, os.unlink, os.remove):
            with contextlib.suppress(OSError):
                function(failed)

    for _ in range(2):  # a folder that could not be opened the first time is, once its mode is fixed
        if path.is_symlink() or path.is_file():
            path.unlink(missing_ok=True)
        elif not path.exists():
            return
        elif sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=retry)
        else:
            shutil.rmtree(path, onerror=lambda f, p, e: retry(f, p, e[1]))


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    """`chown -hR`: symlinks themselves, never what they point to.

    Raises:
        RuntimeError: the server may not chown (a container without CAP_CHOWN).
    """
    try:
        os.lchown(path, uid, gid)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), uid, gid)
    except PermissionError as e:
        raise RuntimeError(f"cannot give {path} to the sandbox user: {e}. {CAPABILITIES_HINT}") from e


_EMPTY_AS_AGENT = 'chmod -R u+rwX -- "$1" 2>/dev/null; find "$1" -mindepth 1 -delete 2>/dev/null; chmod 755 -- "$1"; true'


def _remove_tree(path: Path) -> None:
    """Remove a folder the agent wrote in, whatever it did to the permissions inside.

    Root removes it at once where it may override file permissions; where it may not (a
    container without CAP_DAC_OVERRIDE), the folders the sandbox user owns are first emptied
    with that user's own rights.
    """
    _force_rmtree(path)
    account = sandbox_account()
    if not path.exists() or account is None:
        return
    owned = [p for p in (path, *path.iterdir()) if p.is_dir() and not p.is_symlink() and p.lstat().st_uid == account[1]]
    limits = SandboxLimits(timeout_s=COPY_TIMEOUT_S, sandbox_user=account[0], max_processes=None)
    for folder in owned:
        run_command(["/bin/sh", "-c", _EMPTY_AS_AGENT, "sh", str(folder)], cwd="/", limits=limits)
    _force_rmtree(path)


# --- processes that outlive their command --------------------------------------------------


def _marker_of(pid: int) -> str | None:
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    prefix = SESSION_MARKER.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def _processes_of(uid: int, *, undumpable: bool = False) -> dict[int, tuple[int, int]]:
    """Live (not zombie) processes whose real uid is `uid`: pid -> (parent pid, session id).

    `undumpable`: also look at the processes /proc shows as root's, as it does for a process that
    made itself not dumpable (costly where root runs many processes, cheap in a container).
    """
    me = os.getpid()
    owners = (uid, 0) if undumpable else (uid,)
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid not in owners:
                continue
            status = Path(entry.path, "status").read_text()
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
        if uid_line.split()[1:2] == [str(uid)] and fields[0] not in ("Z", "X"):
            found[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return found


def reap_strays(marker: str) -> list[int]:
    """Kill the processes a session's commands left behind, including those that left their
    command's process session (`setsid cmd &`), which `run_command` alone cannot see.

    With a dedicated sandbox user (the server is root and the user is not `nobody`: the image's
    case), every process of that user is a stray unless it belongs to a command in flight, that
    is, to the process session of one of this server's children. Otherwise (`nobody`, which
    other software may use too, or no root) a stray is a process of the commands' user that
    carries this session's marker in its environment.

    Returns:
        The pids signalled.
    """
    account = sandbox_account()
    dedicated = account is not None and account[0] != "nobody"
    processes = _processes_of(account[1] if account else os.getuid(), undumpable=dedicated)
    if dedicated:
        me = os.getpid()
        in_flight = {sid for ppid, sid in processes.values() if ppid == me}
        victims = [pid for pid, (_, sid) in processes.items() if sid not in in_flight]
    else:
        victims = []
        for pid in processes:
            with contextlib.suppress(OSError):
                if _marker_of(pid) == marker:
                    victims.append(pid)
    killed = []
    for pid in victims:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


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


class TerminalEnvironment(AgentHost, Environment[Action, TerminalObservation, TerminalState]):
    """Finish a task in a Linux shell (files, text, git, scripts, config, archives); checked host-side."""

    name = "terminal"
    version = "0.1.0"

    def __init__(self) -> None:
        self._session_dir: Path | None = None
        self._marker = secrets.token_hex(16)
        self._task: TerminalTask | None = None
        self._state = TerminalState()

    # --- the orchestrator's verbs ------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **task: Any,
    ) -> TerminalObservation:
        """Start an episode on `task_id` (or the task a seed picks) in a fresh workspace.

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
            close = difflib.get_close_matches(task_id, list(tasks), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown task_id {task_id!r}.{hint} There are {len(tasks)} tasks (see tasks/).")
        chosen = tasks[task_id]
        self._discard_workspace()
        self._task = chosen
        self.episode_done = False
        self._session_dir = self._make_session_dir()
        work = self._session_dir / "work"
        files = chosen.folder / "files"
        if files.is_dir():
            shutil.copytree(files, work, symlinks=True, dirs_exist_ok=True)
        account = sandbox_account()
        if account is not None:
            for part in ("work", "home", "state", "tmp"):
                _chown_tree(self._session_dir / part, account[1], account[2])
        setup = chosen.setup_script
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
                raise RuntimeError(f"setup of task {task_id!r} failed:\n{result.render()}")
        self._state = TerminalState(
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
        self._discard_workspace()

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
            raise ValueError(
                f"the command is {len(command.encode())} bytes; the limit is {MAX_COMMAND_BYTES}. "
                f"Write long content with write_file."
            )
        if "\0" in command:
            raise ValueError("the command contains a NUL character")
        limit_s = sandbox_settings().command_timeout_s
        if timeout_s is not None:
            if not timeout_s > 0:
                raise ValueError(f"timeout_s must be positive, got {timeout_s}")
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
            raise ValueError(f"cannot read {path!r}: {result.stderr.strip() or result.render()}")
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
            raise ValueError(f"cannot write {path!r}: {result.stderr.strip() or result.render()}")
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
        """Run a check on a copy of the workspace, in a fresh folder the agent never saw.

        `files` (name -> text) are written to a folder named by `$CHECK_DIR`, read-only to the
        check when the server is root; the copy of the workspace is the check's working
        directory. Whatever the agent left running is killed first.

        Returns:
            `exit_code`, `timed_out`, `passed` and `failed` (the check's `PASS: `/`FAIL: ` lines),
            `output` (its last 8 KiB), `duration_s`.

        Raises:
            ValueError: no episode, or a file name that is not a plain relative path.
        """
        if self._session_dir is None or self._task is None:
            raise ValueError("no episode to check: call reset first")
        for name in files:
            parts = Path(name).parts
            if not parts or Path(name).is_absolute() or ".." in parts:
                raise ValueError(f"check file names must be relative paths inside the check folder, got {name!r}")
        if not 0 < timeout_s <= 600:
            raise ValueError(f"timeout_s must be in (0, 600], got {timeout_s}")
        reap_strays(self._marker)
        grade = _new_private_dir("grade-")
        try:
            return self._run_checks_in(grade, files, command, timeout_s)
        finally:
            reap_strays(self._marker)
            _release_private_dir(grade)

    def _run_checks_in(self, grade: Path, files: dict[str, str], command: str, timeout_s: float) -> dict[str, Any]:
        check_dir, work, home, tmp = grade / "check", grade / "work", grade / "home", grade / "tmp"
        for folder in (check_dir, work, home, tmp):
            folder.mkdir()
        for name, text in files.items():
            target = check_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (home / ".gitconfig").write_text(GITCONFIG, encoding="utf-8")
        account = sandbox_account()
        if account is not None:
            for folder in (work, home, tmp):  # the check dir stays root's: readable, not writable
                _chown_tree(folder, account[1], account[2])
            for root, _dirs, names in os.walk(check_dir):
                os.chmod(root, 0o755)
                for name in names:
                    os.chmod(os.path.join(root, name), 0o644)
            grade.chmod(0o711)
        limits = self._limits(COPY_TIMEOUT_S)
        env = {"PATH": PATH, "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(tmp), SESSION_MARKER: self._marker}
        source = self._session_dir / "work" if self._session_dir else None
        if source is not None and source.is_dir():
            copied = run_command(
                ["/bin/cp", "-a", "--", f"{source}/.", f"{work}/"], cwd=work, limits=limits, env=env
            )
            if copied.exit_code != 0:
                return {
                    "exit_code": copied.exit_code,
                    "timed_out": copied.timed_out,
                    "passed": [],
                    "failed": ["copy the workspace"],
                    "output": copied.render()[-8192:],
                    "duration_s": copied.duration_s,
                }
        limits = limits.model_copy(update={"timeout_s": timeout_s, "max_output_bytes": MAX_CHECK_OUTPUT_BYTES})
        result = run_command(
            command,
            cwd=work,
            limits=limits,
            env={**env, "CHECK_DIR": str(check_dir), "WORKSPACE": str(work), "TERM": "dumb"},
        )
        lines = result.stdout.splitlines()
        return {
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "passed": [line[6:] for line in lines if line.startswith("PASS: ")],
            "failed": [line[6:] for line in lines if line.startswith("FAIL: ")],
            "output": result.render()[-8192:],
            "duration_s": round(result.duration_s, 3),
        }

    # --- internals ---------------------------------------------------------------------

    # --- hosting an agent program (orchestrator's `run_agent`, see openenv_sdk.agents) ---

    def agent_exec(
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None
    ) -> CommandResult:
        self._check_playing()
        return self._run(command, stdin=stdin, timeout_s=timeout_s, extra_env=env, wrapped=False)

    def agent_home(self) -> str:
        self._check_playing()
        assert self._session_dir is not None
        return str(self._session_dir / "home")

    def agent_workdir(self) -> str:
        self._check_playing()
        assert self._session_dir is not None
        return str(self._session_dir / "work")

    def agent_instruction(self) -> str:
        self._check_playing()
        assert self._task is not None and self._session_dir is not None
        return (
            f"{self._task.prompt.strip()}\n\nYour working directory is {self._session_dir / 'work'}: "
            f"when you are done, the files there are checked. Nothing is interactive and there is no network."
        )

    def _check_playing(self) -> None:
        if self._session_dir is None:
            raise ValueError("no episode: the orchestrator has not called reset yet")
        if self.episode_done:
            raise ValueError("the episode is over (submitted); nothing more runs until the next reset")

    def _limits(self, timeout_s: float | None = None) -> SandboxLimits:
        """The manifest's limits; `timeout_s` defaults to its command timeout."""
        settings = sandbox_settings()
        account = sandbox_account()
        return SandboxLimits(
            timeout_s=settings.command_timeout_s if timeout_s is None else timeout_s,
            max_output_bytes=settings.max_output_bytes,
            memory_bytes=settings.memory_bytes,
            max_processes=settings.max_processes,
            sandbox_user=account[0] if account else None,
        )

    def _run(
        self,
        command: str,
        *,
        args: list[str] | None = None,
        stdin: str | None = None,
        timeout_s: float | None = None,
        extra_env: dict[str, str] | None = None,
        wrapped: bool = True,
    ) -> CommandResult:
        """Run one command in the session's shell (or, `wrapped=False`, plainly in the workspace root)."""
        assert self._session_dir is not None
        work = self._ensure_layout()
        state_dir = self._session_dir / "state"
        account = sandbox_account()
        env = {
            "PATH": PATH,
            "HOME": str(self._session_dir / "home"),
            "USER": account[0] if account else _current_user(),
            "LOGNAME": account[0] if account else _current_user(),
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": str(self._session_dir / "tmp"),
            "GIT_EDITOR": "true",
            "PAGER": "cat",
            SESSION_MARKER: self._marker,
            **(extra_env or {}),
        }
        if wrapped:
            env.update({"__OE_ROOT": str(work), "__OE_STATE": str(state_dir)})
            argv: str | list[str] = ["/bin/bash", "-c", WRAPPER, "bash", command, *(args or [])]
        else:
            argv = command
        limits = self._limits(timeout_s)
        try:
            return run_command(argv, cwd=work, limits=limits, env=env, stdin=stdin)
        except subprocess.SubprocessError as e:  # the drop to the sandbox user failed
            raise RuntimeError(f"cannot start the command as the sandbox user: {e}. {CAPABILITIES_HINT}") from e
        finally:
            reap_strays(self._marker)

    def _make_session_dir(self) -> Path:
        session = _new_private_dir("s-")
        session.chmod(0o755 if os.geteuid() == 0 else 0o700)
        for part in ("work", "home", "state", "tmp"):
            (session / part).mkdir()
        (session / "home" / ".gitconfig").write_text(GITCONFIG, encoding="utf-8")
        return session

    def _ensure_layout(self) -> Path:
        """The workspace root, remade (empty) if the agent removed it; likewise home, state, tmp."""
        assert self._session_dir is not None
        account = sandbox_account()
        for part in ("work", "home", "state", "tmp"):
            folder = self._session_dir / part
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()
            if not folder.exists():
                folder.mkdir()
                if account is not None:
                    os.lchown(folder, account[1], account[2])
        return self._session_dir / "work"

    def _discard_workspace(self) -> None:
        reap_strays(self._marker)
        session, self._session_dir = self._session_dir, None
        if session is not None:
            _release_private_dir(session)

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


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
