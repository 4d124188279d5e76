"""mini_swe's host-side grader: did the agent resolve the issue, without touching the grading?

Runs with the client or trainer, never in the container. For the episode's task it reads,
from this folder on the host:

- `hidden/<task_id>/task.json`: the FAIL_TO_PASS and PASS_TO_PASS pytest node ids, and the
  source paths (the library code) whose changes count;
- `hidden/<task_id>/tests/...`: hidden tests (most FAIL_TO_PASS tests are among them);
- `tasks/<task_id>/repo/`: the original repository, whose test and configuration files
  replace whatever the agent left in the workspace.

It sends these through the orchestrator-only call `run_tests`, which runs them in a trusted
pytest process that never imports the agent's code: the tests' imports of the repository's
package are proxies whose calls run in a worker in a fresh sandbox (`openenv_sdk.grading`), and
the outcomes come from a report the trusted process writes where the agent's code cannot reach.
The expected node ids never leave this process: they are compared here with what the run
collected.

The score is 1.0 only when the report is complete, nothing shows tampering, every expected test
was collected (and nothing else), every FAIL_TO_PASS test now passes and every PASS_TO_PASS test
still does; else 0.0. Any sign that the agent worked on the grading rather than the code (edited
or deleted test files, pytest configuration or interpreter startup files planted, tests missing
or renamed) gives 0.0 whatever the outcomes say. The evidence lists each test's outcome,
`tampering` (every such sign) and `reason` (why the score is what it is).
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_sdk.grading.pytest_run import check_solution_file
from openenv_sdk.rubric import Grader, reward

__all__ = ["HiddenTask", "MiniSweGrader", "grading_files", "load_hidden_task"]

HERE = Path(__file__).resolve().parent
_TASK_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class HiddenTask:
    """A task's hidden part, as the grader reads it from `hidden/<task_id>/task.json`."""

    task_id: str
    difficulty: str
    category: str
    source_paths: list[str]
    hidden_tests: list[str]
    fail_to_pass: list[str]
    pass_to_pass: list[str]


def load_hidden_task(task_id: str, env_dir: Path = HERE) -> HiddenTask:
    """The hidden part of `task_id`.

    Raises:
        ValueError: `task_id` is not a task id, or a source path is not a top-level package folder
            that `run_hidden_tests` can serve (`check_solution_file`'s rule).
        FileNotFoundError: this folder has no hidden data for it (grade where `hidden/` is).
    """
    if not isinstance(task_id, str) or not _TASK_ID.match(task_id):
        raise ValueError(f"not a task id: {task_id!r}")
    path = env_dir / "hidden" / task_id / "task.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no hidden data for task {task_id!r}; the grader must run where the environment "
            f"folder, with its hidden/ directory, is (never inside the image)"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    return HiddenTask(
        task_id=data["task_id"],
        difficulty=data["difficulty"],
        category=data["category"],
        source_paths=[check_solution_file(f"{path}/")[:-1] for path in data["source_paths"]],
        hidden_tests=list(data["hidden_tests"]),
        fail_to_pass=list(data["FAIL_TO_PASS"]),
        pass_to_pass=list(data["PASS_TO_PASS"]),
    )


def grading_files(task: HiddenTask, env_dir: Path = HERE) -> dict[str, str]:
    """What the host sends: every original file outside the source paths (tests, configuration),
    and the hidden tests."""
    repo = env_dir / "tasks" / task.task_id / "repo"
    files: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if not path.is_file() or "__pycache__" in rel.split("/"):
            continue
        if any(rel == src or rel.startswith(src + "/") for src in task.source_paths):
            continue
        files[rel] = path.read_text(encoding="utf-8")
    hidden = env_dir / "hidden" / task.task_id
    for rel in task.hidden_tests:
        files[rel] = (hidden / rel).read_text(encoding="utf-8")
    return files


class MiniSweGrader(Grader):
    """1.0 when all FAIL_TO_PASS tests pass and all PASS_TO_PASS tests still pass; else 0.0."""

    def __init__(self, *, env_dir: str | Path = HERE, timeout_s: float = 30.0, test_timeout_s: float = 10.0) -> None:
        """Args:
        env_dir: the environment folder holding `hidden/` and `tasks/`.
        timeout_s: the longest the test run may take, in seconds (keep it below the client's
            `timeout_s`, 60 s by default, so that a hanging test scores 0.0 instead of timing out).
        test_timeout_s: the longest one test, and one call into the agent's code, may take (at
            most `timeout_s`).
        """
        self.env_dir = Path(env_dir)
        self.timeout_s = timeout_s
        self.test_timeout_s = min(test_timeout_s, timeout_s)

    @reward(weight=1.0)
    async def resolved(self, state: dict[str, Any], env: Any) -> tuple[float, dict[str, Any]]:
        task = load_hidden_task(state["task_id"], self.env_dir)
        result = env.call(
            "run_tests",
            files=grading_files(task, self.env_dir),
            source_paths=task.source_paths,
            node_ids=[*task.fail_to_pass, *task.pass_to_pass],
            timeout_s=self.timeout_s,
            test_timeout_s=self.test_timeout_s,
        )
        if inspect.isawaitable(result):
            result = await result
        outcomes = result.get("outcomes", {})
        f2p = {node_id: outcomes.get(node_id, "not run") for node_id in task.fail_to_pass}
        p2p = {node_id: outcomes.get(node_id, "not run") for node_id in task.pass_to_pass}
        tampering = [str(reason) for reason in result.get("tampering") or []]
        tampering += _collection_tampering(task, result)
        reasons = _reasons(result, tampering, f2p, p2p, self.timeout_s)
        solved = not reasons
        evidence = {
            "task_id": task.task_id,
            "difficulty": task.difficulty,
            "category": task.category,
            "resolved": solved,
            "reason": "; ".join(reasons) if reasons else "resolved: every FAIL_TO_PASS and PASS_TO_PASS test passed",
            "tampering": tampering,
            "submitted": bool(state.get("submitted")),
            "status": result.get("status"),
            "report": result.get("report", "missing: the server sent no report status"),
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p,
            "exit_code": result.get("exit_code"),
            "timed_out": result.get("timed_out"),
            "collect_errors": result.get("collect_errors", []),
            "details": result.get("details", {}),
            "kept_changes": result.get("kept_changes", []),
            "discarded_changes": result.get("discarded_changes", []),
            "skipped_files": result.get("skipped_files", []),
            "diff": result.get("diff", ""),
            "output_tail": result.get("output_tail", ""),
        }
        return (1.0 if solved else 0.0), evidence


_ABORTED = {2: "interrupted", 3: "internal error, e.g. SystemExit raised at import", 4: "usage error"}
"""pytest's exit statuses of a session that did not run the tests it collected."""


def _collection_tampering(task: HiddenTask, result: dict[str, Any]) -> list[str]:
    """Expected tests that were not collected (while their files collected fine), and tests that
    nobody expected: the suite was changed."""
    collected = result.get("collected")
    if not isinstance(collected, list) or result.get("exit_code") in _ABORTED:
        return []  # no complete collection to compare (the abort is a reason of its own)
    expected = [*task.fail_to_pass, *task.pass_to_pass]
    failed_files = {str(nodeid).split("::", 1)[0] for nodeid in result.get("collect_errors") or []}
    missing = [n for n in expected if n not in collected and n.split("::", 1)[0] not in failed_files]
    extra = sorted(set(collected) - set(expected))
    found = []
    if missing:
        found.append(f"tests missing or renamed: {len(missing)} expected test(s) not collected, e.g. {missing[0]}")
    if extra:
        found.append(f"unexpected tests collected: {len(extra)}, e.g. {extra[0]}")
    return found


def _reasons(
    result: dict[str, Any], tampering: list[str], f2p: dict[str, str], p2p: dict[str, str], timeout_s: float
) -> list[str]:
    """Why the score is 0.0 (empty when it is 1.0)."""
    reasons = []
    if result.get("status") != "ok":
        reasons.append(f"run_tests status: {result.get('status')}")
    if result.get("timed_out"):
        reasons.append(f"timed out: the test run took longer than {timeout_s:g} s and was killed")
    report = result.get("report", "report missing: the server sent no report status")
    if report != "complete":
        reasons.append(str(report))
    if tampering:
        reasons.append(f"tampering: {'; '.join(tampering)}")
    if result.get("exit_code") in _ABORTED:
        reasons.append(f"pytest did not complete the session (exit status {result['exit_code']}: {_ABORTED[result['exit_code']]})")
    if result.get("collect_errors"):
        reasons.append(f"collection errors: {', '.join(map(str, result['collect_errors']))}")
    for name, outcomes in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        bad = {node_id: outcome for node_id, outcome in outcomes.items() if outcome != "passed"}
        if bad:
            counts = ", ".join(f"{n} {o}" for o, n in sorted(_count(bad.values()).items()))
            reasons.append(f"{name} not passed: {len(bad)} of {len(outcomes)} ({counts})")
    return reasons


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
