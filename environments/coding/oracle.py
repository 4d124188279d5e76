"""The coding environment's reference solution, as a scripted policy (`oracle: oracle.py:act`).

It runs host-side, beside the grader: it writes the task's reference solution
(`hidden/<task_id>/reference.py`, the file the expected test ids were collected against) to the
task's solution file with `write_file`, then calls `submit`. `openenv validate --deep` checks
that it scores 1.0 on every task; training collects its episodes as worked examples.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _hidden_dir() -> Path:
    # the grader's own override (OPENENV_CODING_HIDDEN_DIR), so both read the same hidden data
    return Path(os.environ.get("OPENENV_CODING_HIDDEN_DIR") or HERE / "hidden")


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Write the reference solution and submit, in one turn; then stop."""
    if context.turn > 0:
        return "Submitted the reference solution."
    reference = (_hidden_dir() / context.task_id / "reference.py").read_text(encoding="utf-8")
    solution_file = context.task.get("solution_file") or "solution.py"
    return {
        "content": None,
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": solution_file, "content": reference}},
            {"name": "submit", "arguments": {}},
        ],
    }
