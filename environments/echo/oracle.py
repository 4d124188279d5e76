"""Echo's reference episode, as a scripted policy (`oracle: oracle.py:act` in openenv.yaml).

Echo has no grader, so nothing scores it; `openenv validate --deep` plays it under load (32
sessions at once), and training can collect its episodes: one `echo` call, then a final answer.
"""

from __future__ import annotations

from typing import Any


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Echo a greeting naming the task once, then stop."""
    if context.turn > 0:
        return "Done."
    return {"content": None, "tool_calls": [{"name": "echo", "arguments": {"message": f"hello {context.task_id}"}}]}
