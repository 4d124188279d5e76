"""OpenAI chat completions (`POST /v1/chat/completions`): the internal form itself, on the wire.

Streamed answers are `chat.completion.chunk` events ending with `data: [DONE]`, as OpenAI sends
them (the whole answer in one delta: role, content, every tool call with its arguments), then
the finish reason with the usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .dialect import Answer, Dialect, ModelCall, ReplyContext, sse

__all__ = ["ChatDialect"]


class ChatDialect(Dialect):
    name = "chat"
    path = "/v1/chat/completions"
    id_prefix = "chatcmpl"

    def parse(self, data: dict[str, Any]) -> ModelCall:
        return ModelCall.model_validate(data)

    def decode(self, request: ModelCall) -> ModelCall:
        if request.n != 1:
            raise ValueError("n > 1 is not supported: each model call is one sample of the policy")
        return request

    def encode(self, answer: Answer, ctx: ReplyContext) -> dict[str, Any]:
        return {
            "id": ctx.response_id,
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{"index": 0, "message": answer.chat_message(), "finish_reason": answer.finish_reason, "logprobs": None}],
            "usage": _usage(answer),
        }

    async def stream(self, answer: Answer, ctx: ReplyContext) -> AsyncIterator[str]:
        base = {"id": ctx.response_id, "object": "chat.completion.chunk", "created": ctx.created, "model": ctx.model}

        def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
            return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **more})

        delta: dict[str, Any] = {"role": "assistant", "content": answer.content or ""}
        if answer.tool_calls:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(answer.chat_message()["tool_calls"])]
        yield chunk(delta)
        yield chunk({}, answer.finish_reason, usage=_usage(answer))
        yield "data: [DONE]\n\n"

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "code": status}}


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }
