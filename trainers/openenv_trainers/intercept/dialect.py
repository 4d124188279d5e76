"""One model call, whatever API the agent spoke: the internal form and the codec contract.

The interception server answers three wire dialects: OpenAI chat completions, the OpenAI
Responses API and Anthropic Messages. Each is a thin codec (`wire_chat`, `wire_responses`,
`wire_anthropic`) that turns its request into one `ModelCall` (chat-completions-shaped messages
and tools: the form `normalize_messages` and the chat template take) and turns one `Answer`
(an assistant message with its tool calls) back into its own response, streamed or not. The
trainer sees only `ModelCall`s and writes only `Answer`s, so the token accounting is the same
code for every dialect.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Answer", "Dialect", "ModelCall", "ReplyContext", "sse"]

FinishReason = Literal["stop", "tool_calls", "length"]


class ModelCall(BaseModel):
    """A model call in the internal form: OpenAI chat messages and function tools.

    This is also the chat-completions request body as it arrives (unknown fields are kept), so
    chat completions decode into it directly.
    """

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    n: int = Field(default=1, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)


@dataclass(frozen=True)
class ToolCallOut:
    """One tool call of an answer: its id (the agent echoes it back), name and JSON arguments."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """The trainer's answer to one call, before a dialect encodes it."""

    content: str | None
    tool_calls: tuple[ToolCallOut, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int

    def chat_message(self) -> dict[str, Any]:
        """The answer as an OpenAI chat `message`."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in self.tool_calls
            ]
        return out

    @property
    def arguments_objects(self) -> list[Any]:
        """Each call's arguments parsed (Anthropic sends objects); text that is not JSON stays text."""
        out = []
        for call in self.tool_calls:
            try:
                out.append(json.loads(call.arguments))
            except ValueError:
                out.append(call.arguments)
        return out


@dataclass(frozen=True)
class ReplyContext:
    """What a response carries besides the answer."""

    response_id: str
    created: int
    model: str
    request: Any
    """The dialect's own parsed request (some responses echo parts of it)."""


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event (a JSON payload; `event:` line when the dialect names its events)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n"


class Dialect(ABC):
    """A wire dialect: decode its request into a `ModelCall`; encode an `Answer` or an error."""

    name: str
    path: str
    """The endpoint under `/rollout/{id}`, e.g. `/v1/chat/completions`."""
    id_prefix: str

    @abstractmethod
    def parse(self, data: dict[str, Any]) -> Any:
        """The dialect's own pydantic model of the request body.

        Raises:
            pydantic.ValidationError: the body is not a valid request of this dialect.
        """

    @abstractmethod
    def decode(self, request: Any) -> ModelCall:
        """The parsed request in the internal form.

        Raises:
            ValueError: the request uses something the trainer cannot answer (named in the message).
        """

    @abstractmethod
    def encode(self, answer: Answer, ctx: ReplyContext) -> dict[str, Any]:
        """The non-streamed response body."""

    @abstractmethod
    def stream(self, answer: Answer, ctx: ReplyContext) -> AsyncIterator[str]:
        """The streamed response: server-sent events, as the dialect's SDKs read them."""

    @abstractmethod
    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """An error body in the dialect's shape (`kind`: OpenAI's error types, e.g. `authentication_error`)."""
