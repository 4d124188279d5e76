"""The interception server: model endpoints per rollout, in three API dialects, answered by the trainer.

A black-box agent (a CLI program in the environment's sandbox) makes its own model calls. For
training, each rollout gets a base URL and a secret:

    POST /rollout/{rollout_id}/v1/chat/completions   OpenAI chat completions
    POST /rollout/{rollout_id}/v1/responses          OpenAI Responses API
    POST /rollout/{rollout_id}/v1/messages           Anthropic Messages
    Authorization: Bearer <secret>   (or x-api-key: <secret>, as Anthropic clients send it)

OpenAI clients take `.../rollout/{id}/v1` as their base URL, Anthropic clients
`.../rollout/{id}`. Each dialect's codec (`dialect.py`) decodes its request into one internal
form (`ModelCall`: chat-completions messages and tools), so the trainer answers every dialect
with the same code. A request waits in the rollout's queue until the trainer takes it
(`Rollout.next_request`), generates the answer with the policy, and `respond`s; the agent then
gets its dialect's response, streamed (server-sent events) when it asked. Every wait is bounded: a request the trainer does not
answer within `request_timeout_s` gets a 504, and a rollout that is closed answers 410, so an
agent never hangs on the server.

A request without the secret, with a wrong one, or with another rollout's, gets 401; the
secret is compared in constant time and never logged. Host tools (an allowlist given per
rollout) are reached at `POST /rollout/{rollout_id}/v1/tools/{name}`; the names `reset`,
`step`, `state` and `close` can never be host tools.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import inspect
import itertools
import json
import logging
import queue
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from .dialect import Answer, Dialect, ModelCall, ReplyContext, ToolCallOut
from .wire_anthropic import AnthropicDialect
from .wire_chat import ChatDialect
from .wire_responses import ResponsesDialect

__all__ = ["InterceptedRequest", "InterceptionServer", "Rollout"]

logger = logging.getLogger(__name__)

RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})


ChatRequest = ModelCall
"""The internal form of a model call (a chat-completions request body); kept under its old name."""

DIALECTS: tuple[Dialect, ...] = (ChatDialect(), ResponsesDialect(), AnthropicDialect())
"""The wire dialects served under every rollout's `/rollout/{id}`."""


@dataclass
class InterceptedRequest:
    """One model call of an agent, waiting for the trainer's answer."""

    rollout_id: str
    index: int
    """The call's number within its rollout, from 0."""
    body: ModelCall
    """The call in the internal form (chat-completions messages and tools), whatever the dialect."""
    dialect: str = "chat"
    """The API the agent spoke: `chat`, `responses` or `anthropic`."""
    received_at: float = field(default_factory=time.time)
    _answer: concurrent.futures.Future[Answer] = field(default_factory=concurrent.futures.Future, repr=False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.messages

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self.body.tools

    @property
    def max_tokens(self) -> int | None:
        return self.body.max_completion_tokens or self.body.max_tokens

    @property
    def answered(self) -> bool:
        return self._answer.done()

    def respond(
        self,
        message: Mapping[str, Any],
        *,
        finish_reason: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        """Answer the agent with an assistant message (`content` and/or `tool_calls`). Thread-safe.

        Tool call arguments may be dicts; they are sent as JSON strings, as OpenAI does.
        """
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function", call)
            arguments = function.get("arguments", {})
            calls.append(
                ToolCallOut(
                    id=call.get("id") or f"call_{self.index}_{i}_{uuid.uuid4().hex[:8]}",
                    name=str(function.get("name", "")),
                    arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                )
            )
        reason = finish_reason or ("tool_calls" if calls else "stop")
        if reason not in ("stop", "tool_calls", "length"):
            raise ValueError(f"finish_reason must be stop, tool_calls or length, got {reason!r}")
        answer = Answer(
            content=message.get("content"),
            tool_calls=tuple(calls),
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        if not self._answer.done():
            self._answer.set_result(answer)

    def fail(self, status: int, message: str) -> None:
        """Answer the agent with an error (e.g. 500 when generation failed). Thread-safe."""
        if not self._answer.done():
            self._answer.set_exception(_HTTPFailure(status, message))


class _HTTPFailure(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Rollout:
    """One episode's endpoint: its id, its secret, and the queue of its agent's model calls."""

    def __init__(
        self,
        server: InterceptionServer,
        rollout_id: str,
        secret: str,
        tools: Mapping[str, Callable[..., Any]],
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.server = server
        self.id = rollout_id
        self.secret = secret
        self.tools = dict(tools)
        self.closed = False
        self.requests: list[InterceptedRequest] = []
        """Every request received, in order (answered or not)."""
        self._loop = loop
        self._aqueue: asyncio.Queue[InterceptedRequest | None] | None = asyncio.Queue() if loop is not None else None
        self._queue: queue.Queue[InterceptedRequest | None] = queue.Queue()
        self._counter = itertools.count()

    def __repr__(self) -> str:  # the secret stays out of reprs and logs
        return f"Rollout({self.id!r}, requests={len(self.requests)}, closed={self.closed})"

    def base_url(self, host: str | None = None) -> str:
        """The OpenAI base URL (ending in `/v1`) an agent uses; `host` as the agent reaches the server.
        Anthropic clients take it without the `/v1` (`anthropic_base_url`)."""
        return f"http://{host or self.server.host}:{self.server.port}/rollout/{self.id}/v1"

    def anthropic_base_url(self, host: str | None = None) -> str:
        """The base URL Anthropic clients take (they add `/v1/messages` themselves)."""
        return self.base_url(host).removesuffix("/v1")

    async def next_request(self, timeout_s: float | None = None) -> InterceptedRequest | None:
        """The next model call (waits at most `timeout_s`); None once the rollout is closed.

        Raises:
            TimeoutError: no call came within `timeout_s`.
        """
        if self._aqueue is None:
            raise RuntimeError("this rollout was opened without an event loop: use next_request_blocking()")
        item = await asyncio.wait_for(self._aqueue.get(), timeout_s)
        if item is None:
            self._aqueue.put_nowait(None)  # stays closed for later callers
        return item

    def next_request_blocking(self, timeout_s: float | None = None) -> InterceptedRequest | None:
        """`next_request` for sync callers.

        Raises:
            TimeoutError: no call came within `timeout_s`.
        """
        if self._aqueue is not None:
            raise RuntimeError("this rollout belongs to an event loop: await next_request()")
        try:
            item = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"no model call of rollout {self.id} within {timeout_s} s") from None
        if item is None:
            self._queue.put_nowait(None)
        return item

    def close(self) -> None:
        """End the rollout: waiting and later requests get 410. Safe to call twice."""
        self.server.close_rollout(self.id)

    # server side
    def _deliver(self, item: InterceptedRequest | None) -> None:
        if self._aqueue is not None and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._aqueue.put_nowait, item)
            except RuntimeError:  # the consumer's loop is gone: nobody will answer
                if item is not None:
                    item.fail(410, f"rollout {self.id} has no consumer")
        else:
            self._queue.put_nowait(item)

    def _new_request(self, body: ModelCall, dialect: str = "chat") -> InterceptedRequest:
        request = InterceptedRequest(self.id, next(self._counter), body, dialect)
        self.requests.append(request)
        return request


class InterceptionServer:
    """Serves rollouts' chat endpoints and host tools on one port, on a thread of its own.

    Example:
        >>> server = InterceptionServer().start()  # doctest: +SKIP
        >>> rollout = server.open_rollout()
        >>> rollout.base_url()
        'http://127.0.0.1:43127/rollout/3f2a.../v1'
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        request_timeout_s: float = 600.0,
        tool_timeout_s: float = 60.0,
        max_body_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        """Describe the server; nothing listens until `start()`.

        Args:
            host: the address to listen on. Agents in containers on the SDK's internal network
                reach the host at that network's gateway (`DockerProvider.host_address`); listen
                there or on `0.0.0.0`.
            port: the port; 0 picks a free one.
            request_timeout_s: the longest a model call waits for the trainer's answer (then 504).
            tool_timeout_s: the longest a host tool may run (then 504).
            max_body_bytes: requests larger than this are refused (413).
        """
        self.host = host
        self.port = port
        self.request_timeout_s = request_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.max_body_bytes = max_body_bytes
        self._rollouts: dict[str, Rollout] = {}
        self._closed_ids: set[str] = set()  # so a late request of an ended rollout gets 410, not 404
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start listening (returns once the port accepts connections)."""
        import uvicorn

        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="openenv-interception", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the interception server did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close every rollout and stop the server. Safe to call twice."""
        for rollout_id in list(self._rollouts):
            self.close_rollout(rollout_id)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._server = self._thread = None

    def open_rollout(
        self,
        *,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        rollout_id: str | None = None,
    ) -> Rollout:
        """A new rollout with a fresh secret. Called from a running event loop, the rollout's
        requests are awaited on that loop (`await next_request()`); otherwise they are taken with
        `next_request_blocking()`.

        Args:
            tools: host tools the agent may call (name -> function of keyword arguments).
            rollout_id: the id; default a random one.

        Raises:
            ValueError: a tool is named `reset`, `step`, `state` or `close`, or the id is taken.
        """
        tools = dict(tools or {})
        reserved = sorted(RESERVED_TOOL_NAMES & tools.keys())
        if reserved:
            raise ValueError(f"{reserved} are the orchestrator's verbs and can never be host tools of an agent")
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        rollout_id = rollout_id or uuid.uuid4().hex
        with self._lock:
            if rollout_id in self._rollouts:
                raise ValueError(f"rollout {rollout_id!r} is already open")
            rollout = Rollout(self, rollout_id, secrets.token_urlsafe(32), tools, loop)
            self._rollouts[rollout_id] = rollout
        return rollout

    def close_rollout(self, rollout_id: str) -> None:
        """Close a rollout: its waiting requests get 410, its queue yields None. Safe to call twice."""
        with self._lock:
            rollout = self._rollouts.pop(rollout_id, None)
            if rollout is not None:
                self._closed_ids.add(rollout_id)
        if rollout is None or rollout.closed:
            return
        rollout.closed = True
        for request in rollout.requests:
            request.fail(410, "this rollout has ended")
        rollout._deliver(None)

    def rollout(self, rollout_id: str) -> Rollout | None:
        return self._rollouts.get(rollout_id)

    # --- the HTTP app -------------------------------------------------------------------------

    def app(self) -> FastAPI:
        app = FastAPI(title="openenv interception", openapi_url=None, docs_url=None, redoc_url=None)

        chat = DIALECTS[0]

        def error(status: int, message: str, kind: str = "invalid_request_error", dialect: Dialect = chat) -> JSONResponse:
            # x-should-retry: the SDKs (openai, anthropic) do not retry a refusal that will not change.
            retry = {} if status in (408, 429) or status >= 500 else {"x-should-retry": "false"}
            return JSONResponse(dialect.error(status, message, kind), status_code=status, headers=retry)

        def authorize(request: Request, rollout_id: str, dialect: Dialect = chat) -> Rollout | JSONResponse:
            rollout = self._rollouts.get(rollout_id)
            header = request.headers.get("authorization", "")
            given = header[7:].strip() if header[:7].lower() == "bearer " else ""
            given = given or request.headers.get("x-api-key", "") or request.headers.get("api-key", "")
            if not given:
                return error(
                    401, "missing credentials: send the rollout's secret as `Authorization: Bearer <secret>` or `x-api-key`",
                    "authentication_error", dialect,
                )
            # Refusals never quote the (random) rollout id: OpenCode retries, for a minute of
            # back-off, any error whose text matches /429|500|502|503|504|524/, as ~4% of hex ids do.
            if rollout is None:
                if rollout_id in self._closed_ids:
                    return error(410, "this rollout has ended", "not_found_error", dialect)
                return error(404, "no open rollout at this URL", "not_found_error", dialect)
            if not hmac.compare_digest(given.encode(), rollout.secret.encode()):
                return error(401, "the secret is not this rollout's", "authentication_error", dialect)
            return rollout

        async def body_of(request: Request, dialect: Dialect = chat) -> dict[str, Any] | JSONResponse:
            raw = await request.body()
            if len(raw) > self.max_body_bytes:
                return error(413, f"the request has {len(raw)} bytes; at most {self.max_body_bytes} are accepted", dialect=dialect)
            try:
                data = json.loads(raw or b"{}")
            except ValueError as e:
                return error(400, f"the body is not JSON: {e}", dialect=dialect)
            if not isinstance(data, dict):
                return error(400, "the body must be a JSON object", dialect=dialect)
            return data

        @app.get("/health")
        async def health() -> dict[str, Any]:
            return {"status": "ok", "rollouts": len(self._rollouts)}

        @app.get("/rollout/{rollout_id}/v1/models")
        async def models(rollout_id: str, request: Request) -> Any:
            rollout = authorize(request, rollout_id)
            if isinstance(rollout, JSONResponse):
                return rollout
            return {"object": "list", "data": [{"id": "policy", "object": "model", "owned_by": "openenv"}]}

        async def model_call(dialect: Dialect, rollout_id: str, request: Request) -> Any:
            rollout = authorize(request, rollout_id, dialect)
            if isinstance(rollout, JSONResponse):
                return rollout
            data = await body_of(request, dialect)
            if isinstance(data, JSONResponse):
                return data
            try:
                parsed = dialect.parse(data)
                body = dialect.decode(parsed)
            except ValidationError as e:
                where = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors(include_input=False))
                return error(400, f"invalid {dialect.name} request: {where}", dialect=dialect)
            except ValueError as e:
                return error(400, str(e), dialect=dialect)
            if rollout.closed:
                return error(410, "this rollout has ended", "not_found_error", dialect)
            intercepted = rollout._new_request(body, dialect.name)
            rollout._deliver(intercepted)
            try:
                answer = await asyncio.wait_for(asyncio.wrap_future(intercepted._answer), self.request_timeout_s)
            except TimeoutError:
                intercepted.fail(504, "timed out")
                return error(504, f"the trainer did not answer within {self.request_timeout_s} s", "timeout_error", dialect)
            except _HTTPFailure as e:
                kind = {410: "not_found_error"}.get(e.status, "server_error" if e.status >= 500 else "invalid_request_error")
                return error(e.status, e.message, kind, dialect)
            ctx = ReplyContext(
                response_id=f"{dialect.id_prefix}_{rollout_id[:8]}{intercepted.index:04d}{uuid.uuid4().hex[:8]}",
                created=int(time.time()),
                model=body.model or "policy",
                request=parsed,
            )
            if not body.stream:
                return JSONResponse(dialect.encode(answer, ctx))
            return StreamingResponse(
                dialect.stream(answer, ctx), media_type="text/event-stream", headers={"cache-control": "no-cache"}
            )

        def endpoint_of(dialect: Dialect) -> Callable[[str, Request], Any]:
            async def endpoint(rollout_id: str, request: Request) -> Any:
                return await model_call(dialect, rollout_id, request)

            return endpoint

        for dialect in DIALECTS:
            app.add_api_route(f"/rollout/{{rollout_id}}{dialect.path}", endpoint_of(dialect), methods=["POST"], name=dialect.name)

        @app.post("/rollout/{rollout_id}/v1/tools/{name}")
        async def host_tool(rollout_id: str, name: str, request: Request) -> Any:
            rollout = authorize(request, rollout_id)
            if isinstance(rollout, JSONResponse):
                return rollout
            if name in RESERVED_TOOL_NAMES:
                return error(403, f"{name!r} is an orchestrator verb; agents cannot call it", "permission_error")
            function = rollout.tools.get(name)
            if function is None:
                return error(404, f"no host tool {name!r}; this rollout allows {sorted(rollout.tools)}", "not_found_error")
            data = await body_of(request)
            if isinstance(data, JSONResponse):
                return data
            arguments = data.get("arguments", data)
            if not isinstance(arguments, dict):
                return error(400, "the tool's arguments must be a JSON object")
            try:
                if inspect.iscoroutinefunction(function):
                    result = await asyncio.wait_for(function(**arguments), self.tool_timeout_s)
                else:
                    result = await asyncio.wait_for(asyncio.to_thread(function, **arguments), self.tool_timeout_s)
            except TimeoutError:
                return error(504, f"host tool {name!r} ran past {self.tool_timeout_s} s", "timeout_error")
            except TypeError as e:
                return error(400, f"bad arguments for host tool {name!r}: {e}")
            except Exception as e:
                return error(500, f"host tool {name!r} failed: {type(e).__name__}: {e}", "server_error")
            return {"result": result}

        return app
