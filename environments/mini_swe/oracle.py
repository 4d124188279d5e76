"""mini_swe's reference solution, as a scripted policy (`oracle: oracle.py:act` in openenv.yaml).

It runs host-side, beside the grader: it sends the task's gold patch (`hidden/<task_id>/gold.patch`)
as an agent would, writing it with `write_file` and applying it with `git apply` through `run`,
then calls `submit`. `openenv validate --deep` checks that it scores 1.0 on every task; training
collects its episodes as worked examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PATCH_FILE = ".gold.patch"


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Write and apply the gold patch, then submit, in one turn; then stop."""
    if context.turn > 0:
        return "Applied the fix and submitted."
    patch = (HERE / "hidden" / context.task_id / "gold.patch").read_text(encoding="utf-8")
    return {
        "content": None,
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": PATCH_FILE, "content": patch}},
            {"name": "run", "arguments": {"command": f"git apply {PATCH_FILE} && rm {PATCH_FILE}"}},
            {"name": "submit", "arguments": {}},
        ],
    }
