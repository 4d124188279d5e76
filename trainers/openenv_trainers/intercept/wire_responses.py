"""The OpenAI Responses API (`POST /v1/responses`), stateless, as agents like Codex CLI speak it.

A request's `instructions` become the system message, its `input` items the conversation:
`message` items (`developer` read as `system`), `function_call` items joined to the assistant
message before them (as chat completions hold them), `function_call_output` items as tool
results. `reasoning` items carry no trainable text and are dropped (the policy never produced
one). The server keeps no state: `previous_response_id` is refused; agents send the whole
conversation (`store: false`) as Codex does.

The answer is a `response` whose `output` is a `message` item (when there is text) and one
`function_call` item per call; streamed, the event sequence OpenAI sends (`response.created`,
`response.output_item.added`, `response.output_text.delta`, ..., `response.completed`), each
with its `sequence_number`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .dialect import Answer, Dialect, ModelCall, ReplyContext, sse

__all__ = ["ResponsesDialect", "ResponsesRequest"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextPart(_Loose):
    type: Literal["input_text", "output_text", "text"]
    text: str


class OtherPart(_Loose):
    type: str


class MessageItem(_Loose):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[TextPart | OtherPart]


class FunctionCallItem(_Loose):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(_Loose):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[TextPart | OtherPart]


class ReasoningItem(_Loose):
    type: Literal["reasoning"]


class OtherItem(_Loose):
    type: str


InputItem = FunctionCallItem | FunctionCallOutputItem | ReasoningItem | MessageItem | OtherItem


class FunctionTool(_Loose):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class OtherTool(_Loose):
    type: str


class ResponsesRequest(_Loose):
    model: str | None = None
    input: str | list[InputItem] = Field(union_mode="left_to_right")
    instructions: str | None = None
    tools: list[FunctionTool | OtherTool] | None = None
    stream: bool = False
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    previous_response_id: str | None = None


def _text(content: str | list[TextPart | OtherPart], where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if not isinstance(part, TextPart):
            raise ValueError(f"{where}: content part of type {part.type!r} is not text; only text parts can be trained on")
        texts.append(part.text)
    return "".join(texts)


class ResponsesDialect(Dialect):
    name = "responses"
    path = "/v1/responses"
    id_prefix = "resp"

    def parse(self, data: dict[str, Any]) -> ResponsesRequest:
        return ResponsesRequest.model_validate(data)

    def decode(self, request: ResponsesRequest) -> ModelCall:
        if request.previous_response_id:
            raise ValueError(
                "previous_response_id is not supported: the server keeps no state; send the whole conversation (store: false)"
            )
        messages: list[dict[str, Any]] = []
        if request.instructions:
            messages.append({"role": "system", "content": request.instructions})
        items = [MessageItem(role="user", content=request.input)] if isinstance(request.input, str) else request.input
        for i, item in enumerate(items):
            where = f"input[{i}]"
            if isinstance(item, MessageItem):
                messages.append({"role": item.role, "content": _text(item.content, where)})
            elif isinstance(item, FunctionCallItem):
                call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
                last = messages[-1] if messages else None
                if last is not None and last["role"] == "assistant":
                    last.setdefault("tool_calls", []).append(call)
                else:
                    messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif isinstance(item, FunctionCallOutputItem):
                messages.append({"role": "tool", "tool_call_id": item.call_id, "content": _text(item.output, where)})
            elif isinstance(item, ReasoningItem):
                continue
            else:
                raise ValueError(f"{where}: input items of type {item.type!r} are not supported")
        tools = None
        if request.tools:
            tools = []
            for tool in request.tools:
                if not isinstance(tool, FunctionTool):
                    raise ValueError(f"tools of type {tool.type!r} are not supported; only function tools")
                tools.append(
                    {
                        "type": "function",
                        "function": {"name": tool.name, "description": tool.description or "", "parameters": tool.parameters},
                    }
                )
        if not messages:
            raise ValueError("the request has no input")
        return ModelCall(
            model=request.model,
            messages=messages,
            tools=tools,
            stream=request.stream,
            max_tokens=request.max_output_tokens,
            temperature=request.temperature,
        )

    def _items(self, answer: Answer, ctx: ReplyContext) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if answer.content:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{ctx.response_id[5:]}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": answer.content, "annotations": [], "logprobs": []}],
                }
            )
        for i, call in enumerate(answer.tool_calls):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{ctx.response_id[5:]}_{i}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        return items

    def _response(self, answer: Answer, ctx: ReplyContext, *, output: list[dict[str, Any]], done: bool) -> dict[str, Any]:
        cut = answer.finish_reason == "length"
        request: ResponsesRequest = ctx.request
        return {
            "id": ctx.response_id,
            "object": "response",
            "created_at": ctx.created,
            "status": ("incomplete" if cut else "completed") if done else "in_progress",
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut and done else None,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "model": ctx.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": None,
            "store": False,
            "temperature": request.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [t.model_dump() for t in request.tools or []],
            "top_p": None,
            "truncation": "disabled",
            "metadata": {},
            "usage": {
                "input_tokens": answer.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": answer.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": answer.prompt_tokens + answer.completion_tokens,
            }
            if done
            else None,
        }

    def encode(self, answer: Answer, ctx: ReplyContext) -> dict[str, Any]:
        return self._response(answer, ctx, output=self._items(answer, ctx), done=True)

    async def stream(self, answer: Answer, ctx: ReplyContext) -> AsyncIterator[str]:
        seq = 0

        def event(kind: str, **data: Any) -> str:
            nonlocal seq
            seq += 1
            return sse({"type": kind, "sequence_number": seq - 1, **data}, kind)

        yield event("response.created", response=self._response(answer, ctx, output=[], done=False))
        yield event("response.in_progress", response=self._response(answer, ctx, output=[], done=False))
        items = self._items(answer, ctx)
        for index, item in enumerate(items):
            if item["type"] == "message":
                part = item["content"][0]
                yield event(
                    "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
                )
                at = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield event("response.content_part.added", **at, part={**part, "text": ""})
                yield event("response.output_text.delta", **at, delta=part["text"], logprobs=[])
                yield event("response.output_text.done", **at, text=part["text"], logprobs=[])
                yield event("response.content_part.done", **at, part=part)
            else:
                yield event(
                    "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "arguments": ""}
                )
                at = {"item_id": item["id"], "output_index": index}
                yield event("response.function_call_arguments.delta", **at, delta=item["arguments"])
                yield event("response.function_call_arguments.done", **at, name=item["name"], arguments=item["arguments"])
            yield event("response.output_item.done", output_index=index, item=item)
        final = self._response(answer, ctx, output=items, done=True)
        yield event("response.incomplete" if final["status"] == "incomplete" else "response.completed", response=final)

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "code": status}}
