"""The terminal environment's host-side grader: 1.0 when the task's hidden check passes, else 0.0.

It runs with the client or trainer, never in the container. After the episode it reads the
task's check from `hidden/<task_id>/` on this machine (with the shared `hidden/lib.sh`) and
sends it through the orchestrator-only call `run_checks`, which runs it on a copy of the
workspace in a fresh folder the agent never saw. The check's `PASS:`/`FAIL:` lines and its
output are the evidence.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from openenv_sdk.rubric import Grader, reward

__all__ = ["HIDDEN_DIR", "TerminalGrader", "check_files"]

HIDDEN_DIR = Path(__file__).resolve().parent / "hidden"
CHECK_COMMAND = 'bash "$CHECK_DIR/check.sh"'
NOT_SENT = frozenset({"solution.sh", "null.sh"})
"""Files of a task's hidden folder that stay on the host: the reference and null solutions."""


def check_files(task_id: str, hidden_dir: Path = HIDDEN_DIR) -> dict[str, str]:
    """What the grader sends for `task_id`: `lib.sh`, `check.sh` and the task's other check files.

    Raises:
        FileNotFoundError: the task has no `check.sh` (or `hidden/` is not on this machine).
    """
    folder = hidden_dir / task_id
    if not (folder / "check.sh").is_file():
        raise FileNotFoundError(
            f"{folder / 'check.sh'} does not exist: the grader needs the environment's hidden/ folder "
            f"(it is never in the image; grade from a checkout of the environment)"
        )
    files = {"lib.sh": (hidden_dir / "lib.sh").read_text(encoding="utf-8")}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in NOT_SENT:
            files[path.relative_to(folder).as_posix()] = path.read_text(encoding="utf-8")
    return files


class TerminalGrader(Grader):
    """1.0 when every condition of the task's hidden check holds on the final workspace, else 0.0."""

    def __init__(self, *, hidden_dir: Path | str = HIDDEN_DIR, timeout_s: float = 60.0) -> None:
        """Args:
        hidden_dir: where the checks are (default: this environment's `hidden/`).
        timeout_s: the longest a check may run, in seconds.
        """
        self.hidden_dir = Path(hidden_dir)
        self.timeout_s = timeout_s

    @reward(weight=1.0)
    async def check_passes(self, state: dict[str, Any], env: Any) -> tuple[float, dict[str, Any]]:
        task_id = state.get("task_id")
        if not task_id:
            return 0.0, {"error": "the episode has no task (was reset called?)"}
        files = check_files(task_id, self.hidden_dir)
        result = env.call("run_checks", files=files, command=CHECK_COMMAND, timeout_s=self.timeout_s)
        if inspect.isawaitable(result):
            result = await result
        passed = result["exit_code"] == 0 and not result["timed_out"]
        evidence = {
            "task_id": task_id,
            "exit_code": result["exit_code"],
            "timed_out": result["timed_out"],
            "passed": result["passed"],
            "failed": result["failed"],
            "output": result["output"],
        }
        return (1.0 if passed else 0.0), evidence
