"""Dataset rows that carry an environment task, for both TRL adapters.

TRL gives `environment_factory` environments the whole dataset row (`reset(**row)`), but gives a
`rollout_func` only the rows' prompts. So a row made by `task_row` carries its task twice: as
columns (for `reset(**row)`), and inside its prompt, as a JSON string under the first message's
`openenv_task` key (chat templates ignore unknown message keys; `split_task` removes it before
rendering).

    rows = [task_row(prompt(t), text=t) for t in texts]
    dataset = datasets.Dataset.from_list(rows)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TASK_KEY", "split_task", "task_prompt", "task_row"]

TASK_KEY = "openenv_task"


def task_prompt(messages: Sequence[Mapping[str, Any]], **task: Any) -> list[dict[str, Any]]:
    """A copy of `messages` whose first message carries `task` (JSON) under `TASK_KEY`.

    Raises:
        ValueError: no messages, or the task is not JSON-serialisable.
    """
    if not messages:
        raise ValueError("a prompt needs at least one message")
    try:
        encoded = json.dumps(task, sort_keys=True)
    except TypeError as e:
        raise ValueError(f"task fields must be JSON-serialisable: {e}") from e
    out = [dict(m) for m in messages]
    out[0][TASK_KEY] = encoded
    for message in out[1:]:
        message[TASK_KEY] = None  # one struct type per message list, as Arrow stores it
    return out


def split_task(messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The messages without the task key, and the task (None when the prompt carries none).

    Also drops keys whose value is None (Arrow fills missing struct fields with None).
    """
    task = None
    clean = []
    for message in messages:
        encoded = message.get(TASK_KEY)
        if encoded is not None and task is None:
            task = json.loads(encoded) if isinstance(encoded, str) else dict(encoded)
        clean.append({k: v for k, v in message.items() if k != TASK_KEY and v is not None})
    return clean, task


def task_row(messages: Sequence[Mapping[str, Any]], **task: Any) -> dict[str, Any]:
    """A dataset row: `prompt` (carrying the task) and the task's fields as columns."""
    if "prompt" in task:
        raise ValueError("a task field cannot be named 'prompt'")
    return {"prompt": task_prompt(messages, **task), **task}
