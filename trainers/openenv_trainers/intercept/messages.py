"""OpenAI chat messages, as agents send them, in the one shape the chat template renders.

Agents differ in how they write the same conversation: content as a string or as a list of
parts, tool call arguments as a JSON string or an object, `developer` for `system`, tool
results named or only linked by `tool_call_id`, null fields. `normalize_messages` gives one
canonical form, so that two requests of one episode can be compared message by message and
rendered by the policy's chat template the same way every time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["normalize_messages", "normalize_tools"]

_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PART_TYPES:
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ValueError(f"{where}: content part of type {kind!r} is not text; only text parts can be trained on")
        return "".join(texts)
    raise ValueError(f"{where}: content must be a string or a list of parts, got {type(content).__name__}")


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw  # kept as the model wrote it: the template renders it verbatim
    return dict(raw) if isinstance(raw, Mapping) else raw


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The canonical form of a chat request's messages (see the module docstring).

    Each message becomes `{"role", "content"}` (content a string), plus `tool_calls`
    (`[{"type": "function", "function": {"name", "arguments": dict}}]`) on assistant messages
    that call tools, and `name` on tool results (from the message, else from the call that
    `tool_call_id` points to).

    Raises:
        ValueError: a message has no role, an unknown role, or non-text content.
    """
    names_by_call_id: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"{where} is not an object")
        role = message.get("role")
        if role == "developer":
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"{where}: unknown role {role!r}")
        item: dict[str, Any] = {"role": role, "content": _text_of(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function", call) if isinstance(call, Mapping) else {}
                name = str(function.get("name", ""))
                if isinstance(call, Mapping) and call.get("id"):
                    names_by_call_id[str(call["id"])] = name
                calls.append({"type": "function", "function": {"name": name, "arguments": _arguments(function.get("arguments"))}})
            item["tool_calls"] = calls
        if role == "tool":
            name = message.get("name") or names_by_call_id.get(str(message.get("tool_call_id", "")), "")
            item["name"] = str(name)
        out.append(item)
    return out


def normalize_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool schemas as `apply_chat_template(tools=...)` takes them (`{"type": "function", "function": ...}`)."""
    if not tools:
        return None
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        out.append(
            {
                "type": "function",
                "function": {
                    "name": function.get("name", ""),
                    "description": function.get("description", ""),
                    "parameters": function.get("parameters") or {"type": "object", "properties": {}},
                },
            }
        )
    return out
