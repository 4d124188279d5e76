"""A scripted Wordle policy whose success depends on the task, for `openenv eval --profile`:
task id % 3 == 0 always wins, == 1 never does, == 2 wins on even attempts (pass rate 0.5)."""

from __future__ import annotations

from typing import Any

from tests.evaluation.policy_server import answer, miss


def wins(task_id: int, attempt: int) -> bool:
    return task_id % 3 == 0 or (task_id % 3 == 2 and attempt % 2 == 0)


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    if context.turn > 0:
        return "Done."
    word = answer(context.task_id) if wins(int(context.task_id), context.attempt) else miss(context.task_id)
    return {"content": None, "tool_calls": [{"name": "guess", "arguments": {"word": word}}]}
