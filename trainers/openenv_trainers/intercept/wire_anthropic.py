"""Anthropic Messages (`POST /v1/messages`), as Claude Code and the `anthropic` SDK speak it.

`system` (a string or text blocks) becomes the system message; a user turn's `tool_result`
blocks become tool results (in their order, before the turn's text, which becomes a user
message when there is any); an assistant turn's text blocks its content and its `tool_use`
blocks its tool calls. `thinking` blocks carry nothing the policy produced here and are dropped;
images and documents are refused (only text can be trained on).

The answer is a `message` with a `text` block (when there is text) and one `tool_use` block per
call; streamed, the events Anthropic sends: `message_start`, per block `content_block_start`,
`content_block_delta` (`text_delta` / `input_json_delta`), `content_block_stop`, then
`message_delta` with the stop reason and `message_stop`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .dialect import Answer, Dialect, ModelCall, ReplyContext, sse

__all__ = ["AnthropicDialect", "MessagesRequest"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextBlock(_Loose):
    type: Literal["text"]
    text: str


class ToolUseBlock(_Loose):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any


class ToolResultBlock(_Loose):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock | _Loose] | None = None
    is_error: bool = False


class ThinkingBlock(_Loose):
    type: Literal["thinking", "redacted_thinking"]


class OtherBlock(_Loose):
    type: str


Block = TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | OtherBlock


class AnthropicMessage(_Loose):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class AnthropicTool(_Loose):
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None


class MessagesRequest(_Loose):
    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[AnthropicTool] | None = None
    max_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0)


_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_ERROR_TYPES = {
    "invalid_request_error": "invalid_request_error",
    "authentication_error": "authentication_error",
    "permission_error": "permission_error",
    "not_found_error": "not_found_error",
    "timeout_error": "api_error",
    "server_error": "api_error",
}


def _blocks_text(blocks: list[Any], where: str) -> str:
    texts = []
    for block in blocks:
        if not isinstance(block, TextBlock):
            kind = getattr(block, "type", None) or (block.model_extra or {}).get("type")
            raise ValueError(f"{where}: content block of type {kind!r} is not text; only text can be trained on")
        texts.append(block.text)
    return "".join(texts)


class AnthropicDialect(Dialect):
    name = "anthropic"
    path = "/v1/messages"
    id_prefix = "msg"

    def parse(self, data: dict[str, Any]) -> MessagesRequest:
        return MessagesRequest.model_validate(data)

    def decode(self, request: MessagesRequest) -> ModelCall:
        messages: list[dict[str, Any]] = []
        if request.system:
            system = request.system if isinstance(request.system, str) else "".join(b.text for b in request.system)
            messages.append({"role": "system", "content": system})
        for i, message in enumerate(request.messages):
            where = f"messages[{i}]"
            blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else message.content
            texts: list[str] = []
            calls: list[dict[str, Any]] = []
            results: list[dict[str, Any]] = []
            for j, block in enumerate(blocks):
                if isinstance(block, TextBlock):
                    texts.append(block.text)
                elif isinstance(block, ToolUseBlock) and message.role == "assistant":
                    calls.append({"id": block.id, "type": "function", "function": {"name": block.name, "arguments": block.input}})
                elif isinstance(block, ToolResultBlock) and message.role == "user":
                    content = (
                        block.content
                        if isinstance(block.content, str) or block.content is None
                        else _blocks_text(block.content, f"{where}.content[{j}]")
                    )
                    results.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content or ""})
                elif isinstance(block, ThinkingBlock):
                    continue
                else:
                    raise ValueError(f"{where}.content[{j}]: a {block.type!r} block in a {message.role} turn is not supported")
            if message.role == "assistant":
                item: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
                if calls:
                    item["tool_calls"] = calls
                messages.append(item)
            else:
                messages.extend(results)
                if texts or not results:
                    messages.append({"role": "user", "content": "".join(texts)})
        tools = None
        if request.tools:
            tools = []
            for tool in request.tools:
                if tool.type not in (None, "custom"):
                    raise ValueError(f"server tools ({tool.type!r}) are not supported; only client tools with an input_schema")
                parameters = tool.input_schema or {"type": "object", "properties": {}}
                tools.append(
                    {
                        "type": "function",
                        "function": {"name": tool.name, "description": tool.description or "", "parameters": parameters},
                    }
                )
        return ModelCall(
            model=request.model,
            messages=messages,
            tools=tools,
            stream=request.stream,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
        )

    def _blocks(self, answer: Answer) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if answer.content:
            blocks.append({"type": "text", "text": answer.content})
        for call, arguments in zip(answer.tool_calls, answer.arguments_objects, strict=True):
            # Anthropic's input is an object; arguments the policy wrote that are not one are
            # passed under `_raw`, so the agent reports the malformed call instead of crashing.
            value = arguments if isinstance(arguments, dict) else {"_raw": arguments}
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": value})
        return blocks

    def _message(self, answer: Answer, ctx: ReplyContext, content: list[dict[str, Any]], *, done: bool) -> dict[str, Any]:
        return {
            "id": ctx.response_id,
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": content,
            "stop_reason": _STOP[answer.finish_reason] if done else None,
            "stop_sequence": None,
            "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens if done else 0},
        }

    def encode(self, answer: Answer, ctx: ReplyContext) -> dict[str, Any]:
        return self._message(answer, ctx, self._blocks(answer), done=True)

    async def stream(self, answer: Answer, ctx: ReplyContext) -> AsyncIterator[str]:
        def event(kind: str, **data: Any) -> str:
            return sse({"type": kind, **data}, kind)

        yield event("message_start", message=self._message(answer, ctx, [], done=False))
        for index, block in enumerate(self._blocks(answer)):
            if block["type"] == "text":
                yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                yield event("content_block_delta", index=index, delta={"type": "text_delta", "text": block["text"]})
            else:
                yield event("content_block_start", index=index, content_block={**block, "input": {}})
                partial = json.dumps(block["input"])
                yield event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": partial})
            yield event("content_block_stop", index=index)
        yield event(
            "message_delta",
            delta={"stop_reason": _STOP[answer.finish_reason], "stop_sequence": None},
            usage={"output_tokens": answer.completion_tokens},
        )
        yield event("message_stop")

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": _ERROR_TYPES.get(kind, "api_error"), "message": message}}
