"""The three dialects of the interception server, spoken by the official SDK clients.

One scripted conversation with tool calls (a scripted policy that produces tokens) runs through
OpenAI chat completions, the OpenAI Responses API and Anthropic Messages, each streamed and not,
with the `openai` and `anthropic` packages as the clients against the real server on a real
port. The training rows the trainer records (tokens, masks, logprobs) must be identical in all
six, and hold the very tokens the policy produced.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openenv_trainers.chat import use_tool_chat_template
from openenv_trainers.episode import Segment
from openenv_trainers.generation.base import SamplingParams
from openenv_trainers.intercept import InterceptionServer
from openenv_trainers.intercept.episode import AgentEpisodeConfig, ConversationRecorder
from openenv_trainers.intercept.scripted import ScriptedBackend, assistant_turn

from .conftest import REPO

DATA = REPO / "trainers" / "tests" / "data"
SYSTEM = "You are a careful shell agent."
TASK = "What does notes.txt say?"
BASH = {
    "name": "bash",
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}
TURNS = [
    assistant_turn("Let me look first.", [("bash", {"command": "ls"}), ("bash", {"command": "pwd"})]),
    assistant_turn("", [("bash", {"command": "cat notes.txt"})]),
    "notes.txt says: hello from the sandbox",
]
OUTPUTS = {"ls": "notes.txt\nother.txt", "pwd": "/work", "cat notes.txt": "hello from the sandbox"}
"""What the client's (fake) shell prints for each command."""


def smollm2_tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer (shipped with the tests) with the tool-calling template."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    text = gzip.decompress((DATA / "smollm2-135m-instruct-tokenizer.json.gz").read_bytes()).decode()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(text),
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        unk_token="<|endoftext|>",
        pad_token="<|im_end|>",
    )
    return use_tool_chat_template(tokenizer)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def server() -> Iterator[InterceptionServer]:
    with InterceptionServer(request_timeout_s=60.0) as srv:
        yield srv


# --- the clients: each runs the whole conversation the way its SDK's users write it -------------


def chat_client(base_url: str, key: str, stream: bool) -> list[str]:
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    tools: Any = [{"type": "function", "function": BASH}]
    seen = []
    while True:
        if stream:
            with client.chat.completions.stream(model="policy", messages=messages, tools=tools) as s:
                message = s.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(model="policy", messages=messages, tools=tools).choices[0].message
        seen.append(message.content or "")
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        if not message.tool_calls:
            return seen
        for call in message.tool_calls:
            command = json.loads(call.function.arguments)["command"]  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": OUTPUTS[command]})


def responses_client(base_url: str, key: str, stream: bool) -> list[str]:
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
    items: list[Any] = [{"role": "user", "content": TASK}]
    tools: Any = [{"type": "function", "strict": False, **BASH}]
    seen = []
    while True:
        if stream:
            with client.responses.stream(model="policy", instructions=SYSTEM, input=items, tools=tools, store=False) as s:
                response = s.get_final_response()
        else:
            response = client.responses.create(model="policy", instructions=SYSTEM, input=items, tools=tools, store=False)
        seen.append(response.output_text)
        items += [item.model_dump(exclude_none=True) for item in response.output]
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return seen
        for call in calls:
            command = json.loads(call.arguments)["command"]
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": OUTPUTS[command]})


def anthropic_client(base_url: str, key: str, stream: bool) -> list[str]:
    client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": TASK}]
    tools: Any = [{"name": BASH["name"], "description": BASH["description"], "input_schema": BASH["parameters"]}]
    seen = []
    while True:
        kw: Any = {"model": "policy", "system": SYSTEM, "messages": messages, "tools": tools, "max_tokens": 512}
        if stream:
            with client.messages.stream(**kw) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kw)
        seen.append("".join(b.text for b in message.content if b.type == "text"))
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        uses = [b for b in message.content if b.type == "tool_use"]
        if message.stop_reason != "tool_use":
            assert not uses
            return seen
        results = [{"type": "tool_result", "tool_use_id": b.id, "content": OUTPUTS[b.input["command"]]} for b in uses]  # type: ignore[index]
        messages.append({"role": "user", "content": results})


CLIENTS: dict[str, Callable[[str, str, bool], list[str]]] = {
    "chat": chat_client,
    "responses": responses_client,
    "anthropic": anthropic_client,
}


def run_conversation(
    server: InterceptionServer, tokenizer: Any, dialect: str, stream: bool
) -> tuple[list[Segment], ScriptedBackend, list[str], list[str]]:
    """The conversation through one dialect: the rows, the policy, what the client read, the dialects seen."""
    backend = ScriptedBackend(tokenizer, TURNS)
    recorder = ConversationRecorder(backend, tokenizer, AgentEpisodeConfig(sampling=SamplingParams(max_tokens=200)))
    dialects: list[str] = []

    async def go() -> list[str]:
        rollout = server.open_rollout()
        base = rollout.anthropic_base_url() if dialect == "anthropic" else rollout.base_url()
        client = asyncio.create_task(asyncio.to_thread(CLIENTS[dialect], base, rollout.secret, stream))
        try:
            while not client.done():
                take = asyncio.ensure_future(rollout.next_request())
                done, _ = await asyncio.wait({take, client}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
                assert done, "neither a model call nor the client's end within 60 s"
                if take in done:
                    request = take.result()
                    assert request is not None and request.body.stream == stream
                    dialects.append(request.dialect)
                    await recorder.answer(request)
                else:
                    take.cancel()
            return client.result()
        finally:
            rollout.close()

    seen = asyncio.run(go())
    return recorder.segments(), backend, seen, dialects


def _row(segment: Segment) -> tuple[Any, ...]:
    logprobs = [None if math.isnan(x) else x for x in segment.completion_logprobs]
    return (segment.prompt_ids, segment.completion_ids, segment.completion_mask, logprobs, segment.model_calls)


def test_every_dialect_streamed_or_not_yields_the_same_rows(server: InterceptionServer, tokenizer: Any) -> None:
    rows = {}
    for dialect in CLIENTS:
        for stream in (False, True):
            segments, backend, seen, dialects = run_conversation(server, tokenizer, dialect, stream)
            where = f"{dialect} stream={stream}"
            assert dialects == [dialect] * 3, where
            assert seen == ["Let me look first.", "", "notes.txt says: hello from the sandbox"], where
            assert len(segments) == 1, f"{where}: the conversation must extend one row, got {len(segments)}"
            (segment,) = segments
            # The sampled tokens, with the sampler's logprobs, in order, and nothing else under mask 1.
            sampled = [t for t, m in zip(segment.completion_ids, segment.completion_mask, strict=True) if m]
            sampled_lp = [x for x, m in zip(segment.completion_logprobs, segment.completion_mask, strict=True) if m]
            assert sampled == [t for ids in backend.produced for t in ids], where
            assert sampled_lp == [x for lps in backend.produced_logprobs for x in lps], where
            assert all(math.isnan(x) for x, m in zip(segment.completion_logprobs, segment.completion_mask, strict=True) if not m)
            # The row is the whole conversation as the chat template renders it, tool results masked out.
            text = tokenizer.decode(segment.prompt_ids + segment.completion_ids, skip_special_tokens=False)
            assert text.startswith(f"<|im_start|>system\n{SYSTEM}") and TASK in text
            assert text.count("<tool_response>") == 3 and "hello from the sandbox" in text
            unmasked = tokenizer.decode(
                [t for t, m in zip(segment.completion_ids, segment.completion_mask, strict=True) if not m]
            )
            assert "hello from the sandbox" in unmasked and "/work" in unmasked
            rows[where] = _row(segment)
    first = next(iter(rows.values()))
    for where, row in rows.items():
        assert row == first, f"{where}'s row differs from chat's"


def test_the_sdk_clients_authenticate_with_their_own_headers(server: InterceptionServer) -> None:
    rollout = server.open_rollout()
    try:
        with pytest.raises(anthropic.AuthenticationError, match="not this rollout"):
            anthropic_client(rollout.anthropic_base_url(), "wrong", False)
        with pytest.raises(openai.AuthenticationError, match="not this rollout"):
            responses_client(rollout.base_url(), "wrong", True)
        assert rollout.requests == []  # nothing reached the trainer

        def answer() -> None:
            request = rollout.next_request_blocking(30)
            assert request is not None
            request.respond({"content": "hi"})

        # `x-api-key` is what `anthropic.Anthropic(api_key=...)` sends; Bearer is `auth_token=`.
        for kw in ({"api_key": rollout.secret}, {"auth_token": rollout.secret}):
            threading.Thread(target=answer).start()
            message = anthropic.Anthropic(base_url=rollout.anthropic_base_url(), max_retries=0, **kw).messages.create(
                model="policy", max_tokens=10, messages=[{"role": "user", "content": "hello"}]
            )
            assert message.content[0].text == "hi" and message.stop_reason == "end_turn"  # type: ignore[union-attr]
    finally:
        rollout.close()
    # A closed rollout: 410, each dialect's error shape, and the SDKs are told not to retry.
    for path, body, shape in (
        ("/v1/messages", {"model": "p", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, "type"),
        ("/v1/responses", {"input": "x"}, "error"),
    ):
        response = httpx.post(rollout.anthropic_base_url() + path, json=body, headers={"x-api-key": rollout.secret}, timeout=10)
        assert response.status_code == 410 and response.headers["x-should-retry"] == "false"
        assert shape in response.json()
        assert response.json()["error"]["type"] == "not_found_error"


def test_requests_a_dialect_cannot_train_on_are_refused_clearly(server: InterceptionServer) -> None:
    rollout = server.open_rollout()
    headers = {"x-api-key": rollout.secret}
    base = rollout.anthropic_base_url()
    try:
        cases = [
            ("/v1/responses", {"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
            ("/v1/responses", {"input": [{"type": "web_search_call", "id": "w"}]}, "web_search_call"),
            ("/v1/responses", {"input": "x", "tools": [{"type": "web_search"}]}, "function tools"),
            (
                "/v1/responses",
                {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
                "input_image",
            ),
            ("/v1/messages", {"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
            (
                "/v1/messages",
                {"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
                "image",
            ),
            (
                "/v1/messages",
                {
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "x"}],
                    "tools": [{"type": "web_search_20250305", "name": "w"}],
                },
                "server tools",
            ),
        ]
        for path, body, needle in cases:
            response = httpx.post(base + path, json=body, headers=headers, timeout=10)
            assert response.status_code == 400, (path, body, response.text)
            assert needle in response.text, (needle, response.text)
        assert rollout.requests == []
    finally:
        rollout.close()


def test_a_cut_answer_reads_as_cut_in_every_dialect(server: InterceptionServer) -> None:
    rollout = server.open_rollout()

    def answer(n: int) -> None:
        for _ in range(n):
            request = rollout.next_request_blocking(30)
            assert request is not None
            request.respond({"content": "partial"}, finish_reason="length")

    try:
        threading.Thread(target=answer, args=(4,)).start()
        chat = openai.OpenAI(base_url=rollout.base_url(), api_key=rollout.secret, max_retries=0)
        assert (
            chat.chat.completions.create(model="p", messages=[{"role": "user", "content": "x"}]).choices[0].finish_reason
            == "length"
        )
        response = chat.responses.create(model="p", input="x")
        assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"  # type: ignore[union-attr]
        # Streamed, OpenAI ends a cut response with `response.incomplete` (not `response.completed`).
        events = list(chat.responses.create(model="p", input="x", stream=True))
        assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        client = anthropic.Anthropic(base_url=rollout.anthropic_base_url(), api_key=rollout.secret, max_retries=0)
        assert (
            client.messages.create(model="p", max_tokens=5, messages=[{"role": "user", "content": "x"}]).stop_reason
            == "max_tokens"
        )
    finally:
        rollout.close()
