"""Changed graders for `openenv regrade --grader`: the same environments, stricter rules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from openenv_sdk.rubric import Grader, reward

_spec = importlib.util.spec_from_file_location(
    "_regrade_terminal_grader", Path(__file__).resolve().parents[2] / "environments" / "terminal" / "grader.py"
)
assert _spec is not None and _spec.loader is not None
_terminal = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_terminal)
CHECK_COMMAND, TerminalGrader, check_files = _terminal.CHECK_COMMAND, _terminal.TerminalGrader, _terminal.check_files

__all__ = ["CountLogsStrict", "SolvedOnly"]


class SolvedOnly(Grader):
    """Wordle: 1.0 for solving, nothing for speed or greens."""

    @reward(weight=1.0)
    def solved(self, state: dict[str, Any]) -> float:
        return float(state["solved"])


class CountLogsStrict(TerminalGrader):  # type: ignore[misc, valid-type]
    """Terminal: the task's own check, and for count_log_files also a file the agent never writes
    (so a solved count_log_files scores 0): the check reads the restored workspace again."""

    @reward(weight=1.0)
    async def check_passes(self, state: dict[str, Any], env: Any) -> tuple[float, dict[str, Any]]:
        files = check_files(state["task_id"], self.hidden_dir)
        command = CHECK_COMMAND
        if state["task_id"] == "count_log_files":
            command = f"test -f REVIEWED && {CHECK_COMMAND}"
        result = await env.call("run_checks", files=files, command=command, timeout_s=self.timeout_s)
        passed = result["exit_code"] == 0 and not result["timed_out"]
        return (1.0 if passed else 0.0), {"exit_code": result["exit_code"]}
