"""The terminal environment's reference solution, as a scripted policy (`oracle: oracle.py:act`).

It runs host-side, beside the grader: it replays the task's `hidden/<task_id>/solution.sh`
through the agent's `bash` tool, one call per block (blocks are separated by `# ---` lines, as
the environment's replay tests run them), then stops. `openenv validate --deep` checks that it
scores 1.0 on every task; training collects its episodes as worked examples.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BLOCK_SEPARATOR = re.compile(r"(?m)^# ---[ \t]*$")


def solution_blocks(task_id: str) -> list[str]:
    """The task's reference solution as the shell blocks the `bash` tool runs, in order."""
    path = HERE / "hidden" / task_id / "solution.sh"
    return [block.strip("\n") for block in BLOCK_SEPARATOR.split(path.read_text(encoding="utf-8")) if block.strip()]


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Run every block of the reference solution in one turn; then stop."""
    if context.turn > 0:
        return "Done."
    calls = [{"name": "bash", "arguments": {"command": block}} for block in solution_blocks(context.task_id)]
    return {"content": None, "tool_calls": calls} if calls else "Done."
