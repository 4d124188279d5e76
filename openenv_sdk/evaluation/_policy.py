"""Policies: what answers each assistant turn of an episode.

    ChatPolicy      any OpenAI-compatible `POST {base_url}/chat/completions` (vLLM, SGLang, a provider)
    ScriptedPolicy  a local Python function `(messages, tools) -> message`

Both satisfy `Policy`. A turn is an OpenAI assistant message (`content`, `tool_calls`), plus the
turn's token ids and logprobs when the policy has them: a scripted policy returns them in its
message (`token_ids`, `logprobs`, `prompt_token_ids`), and a server sends them when asked
(`logprobs=True`; `token_ids=True` sends vLLM's `return_token_ids`).

Every request to a chat endpoint carries `X-OpenEnv-Task` and `X-OpenEnv-Episode` headers (the
task id and the episode's key): providers ignore them; a proxy or a scripted test policy can
route by them.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

from .._chat import post_chat_completion
from ..errors import RequestTimeout, ServerError, TransportError

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "ChatPolicy",
    "Policy",
    "PolicyTurn",
    "ScriptedPolicy",
    "TurnContext",
    "load_policy",
]

DEFAULT_REQUEST_TIMEOUT_S = 300.0
# What an assistant message may carry back into the conversation: providers refuse some of the
# other fields their answers hold (`refusal`, `annotations`, `reasoning_content`, ...).
_MESSAGE_KEYS = ("role", "content", "tool_calls")


@dataclass(frozen=True)
class TurnContext:
    """Which episode and turn a policy is answering."""

    key: str
    """The episode's key (`{task_id}#{attempt}`)."""
    task_id: str
    attempt: int
    turn: int
    """0-based index of this assistant turn."""
    task: Mapping[str, Any] = field(default_factory=dict)
    """The task's public fields, as the Task API served them."""


@dataclass
class PolicyTurn:
    """One assistant turn."""

    message: dict[str, Any]
    """An OpenAI assistant message: `role`, `content`, and `tool_calls` when it calls tools."""
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class Policy(Protocol):
    """Answers assistant turns. `ChatPolicy` and `ScriptedPolicy` are the two shipped."""

    name: str
    """How the policy is named in results (`model` for a chat endpoint, `scripted:...` otherwise)."""

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> PolicyTurn:
        """The next assistant turn of the conversation `messages`, with `tools` (OpenAI function
        schemas) offered.

        Raises:
            openenv_sdk.errors.TransportError: the policy cannot be reached (`RequestTimeout`
                when it does not answer in time); the episode is recorded as an error.
            openenv_sdk.errors.ServerError: the policy answered with an error or no completion.
        """
        ...

    async def aclose(self) -> None:
        """Release connections. Safe to call twice."""
        ...


def assistant_message(raw: Mapping[str, Any], *, turn: int) -> dict[str, Any]:
    """An assistant message as it goes back into the conversation: role, content, and tool calls
    in OpenAI's shape (`arguments` as a JSON string; an id made up when the answer has none)."""
    message: dict[str, Any] = {"role": "assistant", "content": raw.get("content")}
    if isinstance(message["content"], list):  # content parts: keep their text
        message["content"] = "".join(str(p.get("text", "")) for p in message["content"] if isinstance(p, Mapping))
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or []):
        function = call.get("function", call) if isinstance(call, Mapping) else {}
        arguments = function.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": str(call.get("id") or f"call_{turn}_{i}"),
                "type": "function",
                "function": {"name": str(function.get("name", "")), "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
    return {k: message[k] for k in _MESSAGE_KEYS if k in message}


class ChatPolicy:
    """A model behind an OpenAI-compatible chat completions endpoint.

    Args:
        base_url: the API root, e.g. `http://localhost:8000/v1` or `https://api.openai.com/v1`.
        model: the model id, sent as `model`.
        api_key: sent as `Authorization: Bearer`; None sends no header.
        params: extra request fields (`temperature`, `max_tokens`, `seed`, ...).
        logprobs: ask for the sampled tokens' logprobs (`logprobs: true`).
        token_ids: ask for token ids with vLLM's `return_token_ids: true` (other servers may
            refuse the field: leave it off for them).
        timeout_s: the most one request may take, in seconds.
        max_retries: further tries after a transport error, a timeout, HTTP 429 or 5xx.
        backoff_s: the wait before the first retry, in seconds; doubled at each retry.
        transport: an httpx transport (e.g. `httpx.ASGITransport(app)` for an in-process server).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        params: Mapping[str, Any] | None = None,
        logprobs: bool = False,
        token_ids: bool = False,
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.name = model
        self.model = model
        self.params = dict(params or {})
        self.logprobs, self.token_ids = logprobs, token_ids
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, transport=transport, timeout=timeout_s)

    def __repr__(self) -> str:
        return f"ChatPolicy(model={self.model!r}, url={self.url!r})"

    async def check(self, timeout_s: float = 10.0) -> None:
        """Fail fast when the endpoint cannot be reached or refuses the key (`GET /models`).

        A server without `/models` (some proxies) passes: only a connection failure, a timeout,
        or HTTP 401/403 fail.

        Raises:
            TransportError: nothing answers at `base_url` (`RequestTimeout`: not in time).
            ServerError: HTTP 401 or 403 (code `HTTP_401`/`HTTP_403`).
        """
        url = self.base_url + "/models"
        try:
            response = await self._http.get(url, timeout=timeout_s)
        except httpx.TimeoutException as e:
            raise RequestTimeout(f"GET {url}: no answer within {timeout_s:g} s") from e
        except httpx.HTTPError as e:
            raise TransportError(f"GET {url} failed: {type(e).__name__}: {e}") from e
        if response.status_code in (401, 403):
            raise ServerError(
                f"GET {url} answered HTTP {response.status_code}: {response.text[:200]}", code=f"HTTP_{response.status_code}"
            )

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> PolicyTurn:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.params}
        if tools:
            body["tools"] = tools
        if self.logprobs:
            body["logprobs"] = True
        if self.token_ids:
            body["return_token_ids"] = True
        headers = {"X-OpenEnv-Task": context.task_id, "X-OpenEnv-Episode": context.key}
        data = await post_chat_completion(
            self._http, self.url, body, timeout_s=self.timeout_s, max_retries=self.max_retries,
            backoff_s=self.backoff_s, headers=headers,
        )  # fmt: skip
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return PolicyTurn(
            message=assistant_message(choice["message"] or {}, turn=context.turn),
            finish_reason=choice.get("finish_reason"),
            token_ids=_ints(choice.get("token_ids")),
            logprobs=_logprobs(choice.get("logprobs")),
            prompt_token_ids=_ints(data.get("prompt_token_ids") or choice.get("prompt_token_ids")),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )

    async def aclose(self) -> None:
        await self._http.aclose()


def _ints(value: Any) -> list[int] | None:
    return [int(v) for v in value] if isinstance(value, list) else None


def _logprobs(value: Any) -> list[float] | None:
    """The sampled tokens' logprobs from a chat choice's `logprobs` (`{"content": [{"logprob": ...}]}`)."""
    content = value.get("content") if isinstance(value, Mapping) else None
    if not isinstance(content, list):
        return None
    return [float(entry["logprob"]) for entry in content if isinstance(entry, Mapping) and "logprob" in entry]


class ScriptedPolicy:
    """A local function as the policy: `fn(messages, tools)` returns the assistant message.

    The function may be async, and may also take `context` (a `TurnContext`) by name. It returns
    a message dict (`content`, `tool_calls` in OpenAI's shape, or `{"name": ..., "arguments": {...}}`
    calls), or a string (a final answer). A dict may carry the turn's `token_ids`, `logprobs`
    and `prompt_token_ids` (a local model has them); they are recorded, not sent back.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"a scripted policy must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or f"scripted:{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"
        self._wants_context = "context" in inspect.signature(fn).parameters

    def __repr__(self) -> str:
        return f"ScriptedPolicy({self.name!r})"

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> PolicyTurn:
        args = ([dict(m) for m in messages], [dict(t) for t in tools])
        if inspect.iscoroutinefunction(self.fn):
            raw = await (self.fn(*args, context=context) if self._wants_context else self.fn(*args))
        else:  # a local model may take a while: keep the other episodes going
            raw = await asyncio.to_thread(lambda: self.fn(*args, context=context) if self._wants_context else self.fn(*args))
        if isinstance(raw, str):
            raw = {"content": raw}
        if not isinstance(raw, Mapping):
            raise TypeError(f"{self.name} returned {type(raw).__name__}: return a message dict or a string")
        return PolicyTurn(
            message=assistant_message(raw, turn=context.turn),
            finish_reason=raw.get("finish_reason"),
            token_ids=_ints(raw.get("token_ids")),
            logprobs=[float(v) for v in raw["logprobs"]] if isinstance(raw.get("logprobs"), list) else None,
            prompt_token_ids=_ints(raw.get("prompt_token_ids")),
        )

    async def aclose(self) -> None:
        return None


def load_policy(spec: str) -> ScriptedPolicy:
    """A `ScriptedPolicy` from `scripted:MODULE:FUNCTION` (MODULE importable from the current
    directory, or a path to a `.py` file).

    Raises:
        ValueError: the spec is not `scripted:MODULE:FUNCTION`, or the import fails.
    """
    kind, _, ref = spec.partition(":")
    module_name, _, attribute = ref.rpartition(":")
    if kind != "scripted" or not module_name or not attribute:
        raise ValueError(f"a policy is `scripted:MODULE:FUNCTION` (e.g. scripted:my_policy:act), got {spec!r}")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            module_spec = importlib.util.spec_from_file_location(f"openenv_policy_{path.stem}", path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
        fn = getattr(module, attribute)
    except (ImportError, AttributeError, OSError, SyntaxError) as e:
        raise ValueError(f"cannot load the policy {spec!r}: {type(e).__name__}: {e}") from e
    return ScriptedPolicy(fn, name=spec)
