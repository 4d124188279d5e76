"""A scripted OpenAI-compatible chat model for the adapters' tests (no torch: it runs in every
trainer's venv): it plays the echo task by calling the `echo` tool, then answers "Done.".

It reads the text from the user's "Call the echo tool with the exact text: X" and calls
`echo(message=X)`, except that a text starting with "typo" is sent with its last letter dropped,
so an episode's grade can be partial. A turn after a tool result answers plainly. Tools given
with `tools=` get a structured `tool_calls` answer; tools described in the system message (the
Hermes `<tools>` block, as text-in trainers render them) get the call as text, in a
`<tool_call>` block. Every request body is kept in `requests`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

__all__ = ["ECHO_ASK", "ChatServer", "ScriptedChat", "TinyModelReply", "echo_prompt", "said_for", "scripted_reply", "tool_call_text"]

ECHO_ASK = "Call the echo tool with the exact text: "


def echo_prompt(text: str) -> str:
    return ECHO_ASK + text


def said_for(text: str) -> str:
    """What the scripted model sends to `echo` for `text`."""
    return text[:-1] if text.startswith("typo") else text


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """A tool call as Hermes/Qwen models write it in text."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def scripted_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The scripted model's assistant message for a conversation."""
    last = messages[-1]
    names = {t["function"]["name"] for t in tools or []}
    in_text = not tools and any('"name": "echo"' in _text(m.get("content")) for m in messages if m.get("role") == "system")
    if last.get("role") == "user" and ("echo" in names or in_text):
        match = re.search(re.escape(ECHO_ASK) + r"(.+)", _text(last.get("content")))
        if match:
            said = said_for(match.group(1).strip())
            if in_text:
                return {"role": "assistant", "content": tool_call_text("echo", {"message": said})}
            call = {
                "id": f"call_{len(messages)}",
                "type": "function",
                "function": {"name": "echo", "arguments": json.dumps({"message": said})},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": "Done."}


class ChatServer:
    """An OpenAI chat-completions endpoint (`/v1/chat/completions`, plain or streamed, and
    `/v1/models`) whose answers come from `reply(messages, tools)`; keeps every request body in
    `requests` and every answer in `replies`."""

    def __init__(self, reply: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], dict[str, Any]], *, model: str = "scripted") -> None:
        self.reply = reply
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self.app.get("/v1/models")(self._models)

    async def _chat(self, request: Request) -> Any:
        body = await request.json()
        self.requests.append(body)
        message = await asyncio.to_thread(self.reply, body["messages"], body.get("tools"))
        self.replies.append(message)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        head = {"id": f"chatcmpl-{len(self.requests)}", "created": int(time.time()), "model": body.get("model") or self.model}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage})

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return "data: " + json.dumps({**head, "object": "chat.completion.chunk", "choices": [choice], **extra}) + "\n\n"

        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        events = [chunk(delta), chunk({}, finish)]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append("data: " + json.dumps({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}) + "\n\n")
        events.append("data: [DONE]\n\n")
        return StreamingResponse(iter(events), media_type="text/event-stream")

    async def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "tests"}]}


class ScriptedChat(ChatServer):
    """The scripted model (see the module docstring)."""

    def __init__(self, *, model: str = "scripted") -> None:
        super().__init__(scripted_reply, model=model)


class TinyModelReply:
    """Answers with the tiny tool-calling model (`openenv_trainers.tiny_model`): the conversation
    and tools rendered by its chat template, a turn sampled in process, parsed into an assistant
    message (tool calls included) as TRL parses it."""

    def __init__(self, model_dir: Path, *, max_tokens: int = 48) -> None:
        # Imported here, not in `__call__`: the server answers on a worker thread, and a module
        # imported there while the test's thread imports the same ones can deadlock.
        from openenv_trainers.chat import parse_assistant
        from openenv_trainers.generation import SamplingParams, TransformersBackend
        from openenv_trainers.intercept import normalize_messages, normalize_tools
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._parse, self._params = parse_assistant, SamplingParams
        self._messages, self._tools = normalize_messages, normalize_tools
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.backend = TransformersBackend(model, pad_token_id=self.tokenizer.pad_token_id)
        self.max_tokens = max_tokens
        self.turns = 0

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        tools = self._tools(tools)
        ids = self.tokenizer.apply_chat_template(
            self._messages(messages), tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        self.turns += 1
        params = self._params(max_tokens=self.max_tokens, stop_token_ids=(self.tokenizer.eos_token_id,), seed=self.turns)
        (completion,) = self.backend.generate([ids], params)
        parsed = self._parse(self.tokenizer, completion.token_ids, prefix=ids, tools=tools)
        calls = [
            {
                "id": f"call_{self.turns}_{i}",
                "type": "function",
                "function": {"name": c["function"]["name"], "arguments": json.dumps(c["function"].get("arguments") or {})},
            }
            for i, c in enumerate(parsed.get("tool_calls") or [])
        ]
        return {"role": "assistant", "content": parsed.get("content") or None, **({"tool_calls": calls} if calls else {})}
