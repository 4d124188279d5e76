"""An episode as the monitor reads it: the tool calls an agent made, what each got back, the reward."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Episode", "ToolCall", "tool_calls_of"]

# argument names under which tools take a path they write to (write_file, edit, create, ...)
PATH_ARGUMENTS = ("path", "file", "filename", "file_path", "target", "dest", "destination")


class ToolCall(BaseModel):
    """One tool call: its name and arguments as the agent sent them, and the text it got back."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    is_error: bool = False

    def texts(self) -> list[str]:
        """Every string among the arguments (commands, code, file contents, paths), nested ones too."""
        found: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, Mapping):
                for item in value.values():
                    walk(item)
            elif isinstance(value, list | tuple):
                for item in value:
                    walk(item)

        walk(self.arguments)
        return found

    def written_path(self) -> str | None:
        """The path a file-writing tool writes: a path argument beside content to write."""
        if not any(key in self.arguments for key in ("content", "contents", "text", "new_str", "patch", "data")):
            return None
        for key in PATH_ARGUMENTS:
            value = self.arguments.get(key)
            if isinstance(value, str):
                return value
        return None


class Episode(BaseModel):
    """What the monitor judges: the environment's name, the task, the tool calls in order, the reward."""

    env: str = ""
    task_id: str | None = None
    task: dict[str, Any] = Field(default_factory=dict, description="The task row, for evidence hooks that need it.")
    calls: list[ToolCall] = Field(default_factory=list)
    reward: float | None = None

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Mapping[str, Any]],
        *,
        reward: float | None = None,
        env: str = "",
        task_id: str | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> Episode:
        """An episode from OpenAI chat messages (what `openenv eval` records and the trainers keep)."""
        return cls(env=env, task_id=task_id, task=dict(task or {}), calls=tool_calls_of(messages), reward=reward)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:  # a model's malformed arguments are still text it sent
            return {"_raw": raw}
        return value if isinstance(value, dict) else {"_raw": raw}
    return {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) if isinstance(part, Mapping) else str(part) for part in content)
    return ""


def tool_calls_of(messages: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """The tool calls of a chat transcript, each with the output of the tool message that answers
    it (matched by `tool_call_id`, else by order)."""
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    unanswered: list[ToolCall] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            for raw in message.get("tool_calls") or []:
                function = raw.get("function") or {}
                call = ToolCall(name=str(function.get("name", "")), arguments=_arguments(function.get("arguments")))
                calls.append(call)
                unanswered.append(call)
                if raw.get("id"):
                    by_id[str(raw["id"])] = call
        elif role == "tool":
            answered = by_id.pop(str(message.get("tool_call_id")), None) if message.get("tool_call_id") else None
            if answered is None and unanswered:
                answered = unanswered[0]
            if answered is None:
                continue
            call = answered
            unanswered = [c for c in unanswered if c is not call]  # by identity: equal calls are not the same call
            call.output = _text(message.get("content"))
            call.is_error = bool(message.get("is_error", False))
    return calls
