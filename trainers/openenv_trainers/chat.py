"""Chat formatting for tool-calling episodes: the template, tool schemas, tool calls and results.

The policy sees the environment's MCP tools in its prompt (rendered by a tool-aware chat
template), answers with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, and
gets each tool's result back as a `tool` message. Parsing goes through TRL's `parse_response`
(with the response template TRL ships for the template), so a model TRL already knows is parsed
exactly as TRL's own trainers parse it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "TOOL_CHAT_TEMPLATE_NAME",
    "Message",
    "ToolCall",
    "parse_assistant",
    "tool_call_text",
    "tool_chat_template",
    "tool_result_text",
    "tool_schemas",
    "use_tool_chat_template",
]

Message = dict[str, Any]

TOOL_CHAT_TEMPLATE_NAME = "qwen2_5"
"""The ChatML tool-calling template (Qwen2.5's, as TRL ships it): tools in the system prompt,
`<tool_call>` blocks in assistant turns, `<tool_response>` blocks for results. It is
prefix-preserving, and TRL knows its response format, so `parse_response` parses it."""


@cache
def tool_chat_template() -> str:
    """The text of the tool-calling chat template (`TOOL_CHAT_TEMPLATE_NAME`), read from TRL."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{TOOL_CHAT_TEMPLATE_NAME}.jinja").read_text()


def use_tool_chat_template(tokenizer: Any) -> Any:
    """Give a ChatML tokenizer (`<|im_start|>`/`<|im_end|>`) the tool-calling template and the
    matching response parser, and check the two properties multi-turn training relies on.

    Returns:
        The same tokenizer.

    Raises:
        ValueError: the tokenizer has no `<|im_start|>`/`<|im_end|>` tokens, or the template
            fails TRL's tool-calling or prefix-preserving checks.
    """
    from trl.chat_template_utils import (
        add_response_schema,
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    vocab = tokenizer.get_vocab()
    missing = [t for t in ("<|im_start|>", "<|im_end|>") if t not in vocab]
    if missing:
        raise ValueError(f"the tool chat template is ChatML; this tokenizer has no {missing} token(s)")
    tokenizer.chat_template = tool_chat_template()
    tokenizer.response_template = None
    tokenizer.response_schema = None
    add_response_schema(tokenizer)
    if not supports_tool_calling(tokenizer):
        raise ValueError("the chat template does not render tool calls and tool results")
    if not is_chat_template_prefix_preserving(tokenizer):
        raise ValueError("the chat template is not prefix-preserving")
    return tokenizer


def tool_schemas(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI function schemas (what `apply_chat_template(tools=...)` takes) from MCP tools.

    Accepts the SDK's `ToolSchema` (from `/schema`), `mcp.types.Tool` (from `list_tools()`), or
    dicts with `name`, `description` and `input_schema`/`inputSchema`. The SDK's evaluation
    runner builds its requests with the same function (`openenv_sdk.evaluation.openai_tools`).
    """
    from openenv_sdk.evaluation import openai_tools

    return openai_tools(tools)


class ToolCall:
    """One tool call the policy made: its name and its arguments (a dict, or the raw text that did not parse)."""

    __slots__ = ("arguments", "name")

    def __init__(self, name: str, arguments: Any) -> None:
        self.name = name
        self.arguments = arguments

    def __repr__(self) -> str:
        return f"ToolCall({self.name!r}, {self.arguments!r})"

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> list[ToolCall]:
        """The tool calls of a parsed assistant message (empty when it made none)."""
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, Mapping) else {}
            arguments = function.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    pass
            calls.append(cls(str(function.get("name", "")), arguments))
        return calls


def tool_call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """An assistant turn that calls one tool, as the tool template renders it (for SFT data and tests)."""
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(dict(arguments))}}}\n</tool_call>'


def parse_assistant(
    tokenizer: Any, ids: Sequence[int], *, prefix: Sequence[int] | None = None, tools: list[Any] | None = None
) -> Message:
    """Parse one sampled assistant turn (its token ids, end-of-turn token included) into a message.

    A turn whose tool calls do not parse becomes plain text content (TRL's fallback), so a
    malformed call is the policy's mistake, seen in its reward, not an exception.
    """
    from trl.chat_template_utils import parse_response

    message = parse_response(tokenizer, list(ids), prefix=list(prefix) if prefix is not None else None, tools=tools)
    message.setdefault("role", "assistant")
    return message


def tool_result_text(result: Any) -> tuple[str, bool]:
    """The text a tool result shows the policy, and whether the tool failed.

    `result` is an MCP `CallToolResult` (from `call_tool`): its text parts are joined; structured
    content is shown as JSON when there is no text (`openenv_sdk.evaluation`'s own rule).
    """
    from openenv_sdk.evaluation import tool_result_text as sdk_tool_result_text

    return sdk_tool_result_text(result)
