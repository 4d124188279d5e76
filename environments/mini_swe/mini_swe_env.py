"""mini_swe: fix a real bug in a small Python repository, in the style of SWE-Gym.

Each task is a tiny package with a test suite (`tasks/<task_id>/repo/`) and a bug report
(`tasks/<task_id>/task.json`). The agent reads, searches, edits and runs code in its own
workspace through tools, and calls `submit()` when done. Nothing here knows the answer: the
hidden FAIL_TO_PASS tests and the gold patch live in `hidden/`, which never enters the image;
the host-side grader (`grader.MiniSweGrader`) sends the tests at grading time through the
orchestrator-only call `run_tests`, which runs them in a trusted process that never imports the
agent's code: the repository's package is served to the tests by a worker in a fresh sandbox.

Each episode holds one `openenv_sdk.sandbox.Sandbox` (see `mini_swe_sandbox`): every agent
command and every file tool (`mini_swe_fsops`, run as the sandbox user) runs in it, with its own
uid and namespaces, and nothing it starts outlives its command. The orchestrator may instead run
a whole agent program (a CLI agent) in the episode with the orchestrator-only call `run_agent`
(`openenv_sdk.agents.AgentHost`): it runs like the `run` tool, reaching its model endpoint and
nothing else of the network (`openenv_sdk.sandbox.Egress`), in the repository, with the session's `home/` as HOME, and is graded the same way.
"""

from __future__ import annotations

import functools
import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mini_swe_sandbox import (
    SessionDirs,
    TreeTooLarge,
    check_relative_path,
    diff_trees,
    host,
    read_tree,
    workspace_tampering,
)
from pydantic import Field

from openenv_sdk import Action, Environment, Observation, State, ToolErrorType, ToolFailure, orchestrator, tool
from openenv_sdk._suggest import did_you_mean
from openenv_sdk.agents import AgentHost
from openenv_sdk.grading.pytest_run import MAX_RUN_TIMEOUT_S, HiddenTestRun, check_solution_file, run_hidden_tests
from openenv_sdk.regrade import WorkspaceSnapshots
from openenv_sdk.sandbox import CommandResult
from openenv_sdk.snapshots import SnapshotUnsupported, pack_folders, unpack_folders
from openenv_sdk.tasks import TaskRecord

__all__ = ["MiniSweEnvironment", "MiniSweObservation", "MiniSweState", "TaskInfo", "task_ids", "tasks"]

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"
_FSOPS_SOURCE = (HERE / "mini_swe_fsops.py").read_text(encoding="utf-8")
_FSOPS_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
GRADING_INI = "[pytest]\naddopts =\npython_files = test_*.py *_test.py\n"
"""The only pytest configuration a grading run reads; the repository's is never read."""
_AGENT_KILL_AFTER_OUTPUT_BYTES = 64 * 1024 * 1024
"""An agent program runs for minutes and logs: it is killed past this much output (a tool
command, shown to the model, past 64 times its kept output)."""


@dataclass(frozen=True)
class TaskInfo:
    """A task's public part: the repository and the bug report."""

    task_id: str
    repo: str
    title: str
    issue: str
    repo_path: Path
    split: str = "train"
    """`train`, or `demo` for the README's example (never picked by a seed)."""


@functools.cache
def tasks() -> dict[str, TaskInfo]:
    """Every task in `tasks/`, by id."""
    found = {}
    for meta in sorted(TASKS_DIR.glob("*/task.json")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        found[data["task_id"]] = TaskInfo(
            task_id=data["task_id"],
            repo=data["repo"],
            title=data["title"],
            issue=data["issue"],
            repo_path=meta.parent / "repo",
            split=data.get("split", "train"),
        )
    return found


def task_ids(split: str | None = None) -> list[str]:
    """Every task id, or those of one split (`train`, `demo`)."""
    return sorted(t.task_id for t in tasks().values() if split is None or t.split == split)


def pick_task(task_id: str | None, seed: int | None) -> TaskInfo:
    """`task_id` when given; else the seed picks a training task (the same one for the same seed)."""
    known = tasks()
    if task_id is not None:
        if task_id not in known:
            hint = did_you_mean(task_id, known)
            raise ValueError(f"unknown task_id {task_id!r}.{hint} Known: {', '.join(task_ids())}")
        return known[task_id]
    return known[random.Random(seed).choice(task_ids("train"))]


class MiniSweObservation(Observation):
    """What the agent is told at the start of an episode."""

    task_id: str = Field(default="", description="The task.")
    title: str = Field(default="", description="The issue's title.")
    issue: str = Field(default="", description="The bug report.")
    workdir: str = Field(default="", description="The repository: the working directory of every tool.")
    tools: list[str] = Field(default_factory=list, description="The tools' names.")
    prompt: str = Field(default="", description="All of the above as one text for the agent.")


class MiniSweState(State):
    """The episode as the orchestrator sees it (never the answer)."""

    task_id: str | None = Field(default=None, description="The task being solved.")
    repo: str | None = Field(default=None, description="The repository's name.")
    submitted: bool = Field(default=False, description="Whether the agent called submit().")


class MiniSweEnvironment(AgentHost, WorkspaceSnapshots, Environment[Action, MiniSweObservation, MiniSweState]):
    """Fix a real bug in a small Python repository from its bug report; hidden tests judge the fix host-side."""

    name = "mini_swe"
    version = "0.1.0"

    def __init__(self) -> None:
        self._dirs: SessionDirs | None = None
        self._task: TaskInfo | None = None

    # --- the orchestrator's verbs -----------------------------------------------------------

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        """Every task in `tasks/`, in its split (`train`, or `demo`): the bug report; the tests stay in `hidden/`."""
        return [
            TaskRecord(id=t.task_id, split=t.split, repo=t.repo, title=t.title, issue=t.issue)
            for t in (tasks()[task_id] for task_id in task_ids())
        ]

    def reset(  # type: ignore[override]  # narrower on purpose: the server refuses other fields (server/_wire.accepted_kwargs)
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None
    ) -> MiniSweObservation:
        """Start an episode on `task_id` (or one picked by `seed`) in a fresh workspace."""
        self._discard_workspace()
        info = pick_task(task_id, seed)
        self._dirs = host().new_session(info.repo_path)
        self._task = info
        self.state = MiniSweState(
            episode_id=episode_id or f"{info.task_id}-{uuid.uuid4().hex[:12]}", task_id=info.task_id, repo=info.repo
        )
        self.episode_done = False
        return MiniSweObservation(
            task_id=info.task_id,
            title=info.title,
            issue=info.issue,
            workdir=str(self._dirs.repo),
            tools=list(type(self).tool_specs),
            prompt=self._prompt(info, self._dirs),
        )

    def close(self) -> None:
        self._discard_workspace()

    # --- checkpoint and restore (the orchestrator's; see openenv_sdk.snapshots) ---------------

    def snapshot(self, folder: Path) -> dict[str, Any]:
        """The episode: its state, the repository and HOME, copied once every process of the
        agent has ended (none outlives a command)."""
        if self._dirs is None or self._task is None:
            raise SnapshotUnsupported("no episode to checkpoint: call reset first")
        self._dirs.sandbox.kill_all()
        pack_folders(self._dirs.root, ("repo", "home"), folder / "folders.tar")
        return {
            "task_id": self._task.task_id,
            "root": str(self._dirs.root),
            "state": self.state.model_dump(mode="json"),
            "episode_done": self.episode_done,
        }

    def restore(self, data: dict[str, Any], folder: Path) -> None:
        """A new sandbox holding a copy of the checkpoint's repository and HOME."""
        task = tasks().get(str(data.get("task_id")))
        if task is None:
            raise SnapshotUnsupported(f"the checkpoint's task {data.get('task_id')!r} is not among this server's tasks")
        self._discard_workspace()
        dirs = host().empty_session()
        try:
            unpack_folders(folder / "folders.tar", dirs.sandbox, ("repo", "home"))
            for top in (dirs.repo, dirs.home):  # the repository's top too: git refuses a checkout its user does not own
                dirs.sandbox.give(top)
        except BaseException:
            host().remove_session(dirs)
            raise
        self._dirs, self._task = dirs, task
        self.state = MiniSweState.model_validate(data["state"])
        self.episode_done = bool(data.get("episode_done"))

    # --- the workspace kept for regrading (`openenv eval --keep-state`, `openenv regrade`) -------
    #
    # `WorkspaceSnapshots` gives the orchestrator-only `snapshot_workspace` / `restore_workspace`;
    # what `run_tests` reads is the repository (HOME never reaches the grading), so that is what
    # is kept, and a restored repository goes to the new session's uid as `new_session`'s did.

    def snapshot_folder(self) -> Path:
        if self._dirs is None:
            raise ValueError("no episode: call reset first")
        return self._dirs.repo

    def snapshot_quiesce(self) -> None:
        if self._dirs is not None:
            self._dirs.sandbox.kill_all()

    def snapshot_give(self, path: Path) -> None:
        if self._dirs is not None:
            self._dirs.sandbox.give(path)

    # --- the agent's tools ------------------------------------------------------------------

    @tool
    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Show a text file with line numbers (at most 400 lines per call).

        Args:
            path: the file, relative to the repository root.
            start_line: the first line to show (1-based).
            end_line: the last line to show; default: to the end (or 400 lines).
        """
        return self._fs("read_file", path=path, start_line=start_line, end_line=end_line)

    @tool
    def list_files(self, path: str = ".") -> str:
        """List files and directories under a directory, recursively (skips .git and caches).

        Args:
            path: the directory, relative to the repository root.
        """
        return self._fs("list_files", path=path)

    @tool
    def search(self, pattern: str, path: str = ".", regex: bool = False, ignore_case: bool = False) -> str:
        """Find lines containing a text (or matching a regular expression) in the repository.

        Answers one `path:line: text` per match (at most 200).

        Args:
            pattern: the text to look for (a Python regular expression when `regex` is true).
            path: a file or directory to search, relative to the repository root.
            regex: treat `pattern` as a regular expression.
            ignore_case: match regardless of case.
        """
        return self._fs("search", pattern=pattern, path=path, regex=regex, ignore_case=ignore_case)

    @tool
    def edit_file(self, path: str, old_str: str, new_str: str) -> str:
        """Replace one exact snippet of a file with new text.

        `old_str` must occur exactly once in the file, whitespace and indentation included;
        include enough surrounding lines to make it unique. Answers the edited region.

        Args:
            path: the file, relative to the repository root.
            old_str: the exact text to replace.
            new_str: the text to put in its place (may be empty to delete).
        """
        return self._fs("edit_file", path=path, old_str=old_str, new_str=new_str)

    @tool
    def write_file(self, path: str, content: str) -> str:
        """Create a file, or overwrite one, with the given content (parent directories are made).

        Args:
            path: the file, relative to the repository root.
            content: the whole new content of the file.
        """
        return self._fs("write_file", path=path, content=content)

    @tool
    def run(self, command: str, timeout_s: float | None = None) -> str:
        """Run a shell command (bash) in the repository, e.g. `python -m pytest -q`.

        Answers its output, errors and exit code. The command is killed at its time limit, and
        long output is cut. Nothing started by the command outlives it.

        Args:
            command: the command line.
            timeout_s: seconds before it is killed; default and maximum: the environment's limit.
        """
        dirs = self._workspace()
        limit = host().settings.command_timeout_s
        if timeout_s is not None and not timeout_s > 0:
            raise ToolFailure(f"timeout_s must be positive, got {timeout_s}", error_type=ToolErrorType.INVALID_ARGS)
        result = host().run(command, dirs, timeout_s=min(timeout_s or limit, limit))
        self._check_workspace_alive(result)
        return result.render()

    @tool
    def submit(self) -> str:
        """Finish the task: your changes to the repository are final and will be evaluated.

        Ends the episode; no tool works afterwards.
        """
        self._workspace()
        self.state.submitted = True
        self.episode_done = True
        return "Submitted. The episode is over; your changes will now be evaluated."

    # --- for the host-side grader (never reachable over MCP) -------------------------------

    @orchestrator
    def run_tests(
        self,
        files: dict[str, str],
        source_paths: list[str],
        node_ids: list[str],
        timeout_s: float = 30.0,
        test_timeout_s: float = 10.0,
    ) -> dict[str, Any]:
        """Run pytest `node_ids` from `files` against the agent's library code, which never runs
        in the process that runs the tests.

        The SDK's `openenv_sdk.grading.pytest_run.run_hidden_tests` runs them: `files` (the
        host's: the original tests and configuration, and the hidden tests) and a trusted
        `pytest.ini` go into a fresh private directory of the server's, where pytest runs in a
        trusted process. The tests' imports of the repository's package (the top-level
        `source_paths`) are proxies: each call goes to a worker that imports a read-only copy of
        the workspace's `source_paths` (read as the session's user; `.py` and data files only,
        no `conftest.py`, no symlink) in a fresh sandbox of its own, with no network and nothing
        else mounted; two of the package's objects compare with the package's own `__eq__`
        (`remote_equality`). The outcomes come from a report that the trusted process writes
        into its private directory. The node ids never leave this call: the caller compares
        them with `collected`.

        Args:
            files: relative path -> text, from the host.
            source_paths: the library code's top-level package folders (e.g. `["intervals"]`).
            node_ids: the tests to report (their files are the ones run).
            timeout_s: limit of the whole run, in seconds.
            test_timeout_s: limit of each test and of each call into the agent's code, in seconds.

        Returns:
            `status` (`ok`, `no_episode`, `workspace_missing`, `too_large`), `outcomes`
            (node id -> `passed`, `failed`, `error`, `skipped` or `not run`), `report`
            (`complete`, or why not: `report missing: ...`), `tampering` (every sign that the
            agent worked on the grading instead of the code: edited or deleted test files,
            pytest configuration, startup files), `collected` (the test ids the run collected;
            None without a report), `exit_code` (pytest's), `timed_out`, `collect_errors`,
            `output_tail` (the run's output), `details` (the failures' messages), and the
            agent's changes to the repository: `kept_changes` (graded), `discarded_changes`
            (replaced by the host's files, not library code, or left behind), `skipped_files` (what of the
            source paths was never copied: symlinks, FIFOs, `conftest.py`, files that are neither
            `.py` nor data) and a unified `diff`.
        """
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ValueError("files must map relative paths to text")
        files = {check_relative_path(path, "file"): text for path, text in files.items()}
        sources = [check_solution_file(f"{check_relative_path(path, 'source path')}/")[:-1] for path in source_paths]
        ids = [str(node_id) for node_id in node_ids]
        if not 0 < timeout_s <= MAX_RUN_TIMEOUT_S:
            raise ValueError(f"timeout_s must be in (0, {MAX_RUN_TIMEOUT_S:g}], got {timeout_s}")
        if not 0 < test_timeout_s <= timeout_s:
            raise ValueError(f"test_timeout_s must be in (0, timeout_s], got {test_timeout_s}")
        answer: dict[str, Any] = {
            "status": "ok",
            "outcomes": {node_id: "not run" for node_id in ids},
            "report": "not run",
            "tampering": [],
            "collected": None,
            "exit_code": None,
            "timed_out": False,
            "collect_errors": [],
            "output_tail": "",
            "details": {},
            "kept_changes": [],
            "discarded_changes": [],
            "skipped_files": [],
            "diff": "",
        }
        if self._dirs is None or self._task is None:
            return {**answer, "status": "no_episode"}
        dirs = self._dirs
        if not dirs.repo.is_dir():
            return {**answer, "status": "workspace_missing"}
        owner = dirs.uid if dirs.sandbox.privileged else None
        test_files = sorted({node_id.split("::", 1)[0] for node_id in ids})
        try:
            current, _ = read_tree(dirs.repo, owner_uid=owner)
        except TreeTooLarge as e:
            return {**answer, "status": "too_large", "output_tail": str(e)}
        run = run_hidden_tests(
            dirs.sandbox,
            {**files, "pytest.ini": GRADING_INI},
            [f"{source}/" for source in sources],
            pytest_args=["-rN", *test_files],
            timeout_s=timeout_s,
            call_timeout_s=test_timeout_s,
            test_timeout_s=test_timeout_s,
            remote_equality=True,  # a library's value types compare as themselves (a Version as a Version)
            workdir=dirs.repo,
        )
        too_large = [f"{name} {status}" for name, status in run.solution_files.items() if status.startswith("too large")]
        if too_large:
            return {**answer, "status": "too_large", "output_tail": "; ".join(too_large)}
        pristine, _ = read_tree(self._task.repo_path)
        changes, diff = diff_trees(pristine, current)
        status = f"[timed out after {run.duration_s:.1f} s; killed]" if run.timed_out else f"[exit code {run.exit_code}]"

        def graded(path: str) -> bool:  # copied for the worker (not the host's, not left behind)
            return _under(path, sources) and path not in files and path not in run.skipped_files

        return {
            **answer,
            "outcomes": {node_id: run.outcomes.get(node_id, "not run") for node_id in ids},
            "report": "complete" if run.report_read else _missing_report(run),
            "tampering": workspace_tampering(current, pristine, files),
            "collected": run.collected if run.report_read else None,
            "exit_code": run.exit_code if run.report_read else None,
            "timed_out": run.timed_out,
            "collect_errors": sorted(run.collect_errors),
            "output_tail": f"{run.output_tail}\n{status}".lstrip("\n"),
            "details": {node_id: run.messages[node_id][-600:] for node_id in ids if node_id in run.messages},
            "kept_changes": [change for change in changes if graded(change[2:])],
            "discarded_changes": [change for change in changes if not graded(change[2:])],
            "skipped_files": sorted(
                [*run.skipped_files, *(name for name, copied in run.solution_files.items() if copied != "copied")]
            ),
            "diff": diff,
        }

    # --- hosting an agent program (orchestrator's `run_agent`, see openenv_sdk.agents) ---------

    def agent_exec(  # type: ignore[override]  # no memory_bytes: run_agent refuses a spec that needs it (agents/host.py)
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None
    ) -> CommandResult:
        """Run `command` as the `run` tool does (the session's sandbox and limits, in the
        repository, HOME the session's home), with `env` added, its own `timeout_s` (an agent
        program runs for longer than one tool command) and its launch's egress (its model
        endpoint only). Nothing it started outlives it."""
        dirs = self._agent_dirs()
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        return host().run(
            command,
            dirs,
            timeout_s=timeout_s,
            stdin=stdin,
            kill_after_output_bytes=_AGENT_KILL_AFTER_OUTPUT_BYTES,
            extra_env=env,
            network=True,
        )

    def agent_home(self) -> str:
        return str(self._agent_dirs().home)

    def agent_workdir(self) -> str:
        return str(self._agent_dirs().repo)

    def agent_instruction(self) -> str:
        dirs = self._agent_dirs()
        assert self._task is not None
        return (
            self._task_text(self._task, dirs, "your working directory")
            + "\n\nNothing is interactive. When you are done, stop: the repository is "
            "graded as it then stands."
        )

    def _agent_dirs(self) -> SessionDirs:
        if self._dirs is None or self._task is None:
            raise ValueError("no episode: the orchestrator has not called reset yet")
        if self.episode_done:
            raise ValueError("the episode is over (submitted); nothing more runs until the next reset")
        return self._dirs

    # --- internals --------------------------------------------------------------------------

    def _workspace(self) -> SessionDirs:
        if self._dirs is None:
            raise ToolFailure("No episode is running: the orchestrator has not called reset.")
        if self.episode_done:
            raise ToolFailure("The episode is over (submit() was called); no more tool calls are possible.")
        return self._dirs

    def _check_workspace_alive(self, result: Any) -> None:
        if (
            result.exit_code == 126
            and "does not exist" in result.stderr
            and self._dirs
            and not self._dirs.repo.is_dir()
        ):
            raise ToolFailure(
                "The repository directory was deleted, so this episode cannot go on. "
                "Submit (the result will be graded as it is) or ask the orchestrator for a new episode."
            )

    def _fs(self, op: str, **args: Any) -> str:
        dirs = self._workspace()
        sandbox = host()
        request = json.dumps({"op": op, "root": str(dirs.repo), "args": args})
        result = sandbox.run(
            [sandbox.python, "-I", "-S", "-c", _FSOPS_SOURCE],
            dirs,
            stdin=request,
            max_output_bytes=_FSOPS_MAX_OUTPUT_BYTES,
            timeout_s=min(30.0, sandbox.settings.command_timeout_s),
        )
        self._check_workspace_alive(result)
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            answer = None
        if result.exit_code != 0 or not isinstance(answer, dict):
            raise ToolFailure(f"{op} could not run: {result.render()[-1500:]}")
        if not answer.get("ok"):
            raise ToolFailure(str(answer.get("error")))
        return str(answer["text"])

    def _discard_workspace(self) -> None:
        dirs, self._dirs = self._dirs, None
        self._task = None
        if dirs is not None:
            host().remove_session(dirs)

    def _prompt(self, info: TaskInfo, dirs: SessionDirs) -> str:
        sandbox = host()
        lines = []
        for spec in type(self).tool_specs.values():
            schema = spec.input_schema
            params = []
            for name, prop in schema.get("properties", {}).items():
                params.append(name if name in schema.get("required", []) else f"{name}={prop.get('default')!r}")
            summary = spec.description.split("\n")[0]
            lines.append(f"- {spec.name}({', '.join(params)}): {summary}")
        where = "the working directory of every tool; give paths relative to it"
        return (
            self._task_text(info, dirs, where)
            + f" Commands time out after {sandbox.settings.command_timeout_s:g} s.\n\n"
            + "Tools:\n"
            + "\n".join(lines)
            + "\n\nCall submit() when you are done."
        )

    def _task_text(self, info: TaskInfo, dirs: SessionDirs, where: str) -> str:
        """The issue, where the repository is, and what is checked (the start of the prompt)."""
        git = (
            " The repository is a git repository with one commit, so `git diff` shows your changes."
            if host().has_git
            else ""
        )
        return (
            f"You are fixing a bug in the Python repository `{info.repo}`, checked out at {dirs.repo} "
            f"({where}).\n\n"
            f"Issue: {info.title}\n\n{info.issue}\n\n"
            f"Change the library code so that the issue is resolved. Hidden tests will check the fix, and the "
            f"repository's existing tests must keep passing. Do not edit or delete the existing test files and do "
            f"not add pytest configuration (conftest.py, pytest.ini, ...): the graded run uses the original tests, "
            f"and a change to them scores 0. Run the tests with `python -m pytest -q`.{git}"
        )


def _missing_report(run: HiddenTestRun) -> str:
    """Why the trusted run left no report to read."""
    if run.timed_out:
        return f"report missing: the test run was killed at its time limit ({run.duration_s:.1f} s)"
    return f"report missing: the test run ended without one (exit code {run.exit_code})"


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)
