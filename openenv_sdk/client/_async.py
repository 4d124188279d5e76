"""`AsyncEnvClient`: a client of one environment server, one session, over a WebSocket.

`_sync.py` is generated from `_async.py` by `scripts/unasync.py`: change `_async.py` only. The
I/O in which the two differ lives in `_io.py` and `_mcp.py` as twins, logic without I/O in
`_base.py`.
"""

from __future__ import annotations

import contextlib
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from .. import tracing
from ..errors import ClientStateError, ProviderError, RequestTimeout, ServerError, TransportError
from ..snapshots import CheckpointInfo, RestoredInfo
from ..tasks import ServedTask, TaskSplit
from ..types import SchemaResponse, SessionInfo
from ._base import (
    _RETRY_AFTER_SENT,
    STALE,
    ActT,
    BaseEnvClient,
    ConnectionEnded,
    Dropped,
    ObsT,
    StateT,
    _http_base,
    _Lifecycle,
    http_error,
    json_or_text,
    logger,
)
from ._io import AsyncBlocking, AsyncLock, AsyncReplyBody, AsyncWebSocket
from ._mcp import AsyncMcpChannel
from ._models import StepResult

if TYPE_CHECKING:
    import mcp_types

__all__ = ["AsyncEnvClient"]


class AsyncEnvClient(BaseEnvClient[ActT, ObsT, StateT]):
    """A client of one environment server; one client holds one session.

    Typed by the environment's models, `AsyncEnvClient[MyAction, MyObservation, MyState](url)`
    or `AsyncEnvClient(url, env_cls=MyEnvironment)`: `reset` and `step` return a `StepResult`
    whose observation is the environment's observation model, and `state()` its state model.

    Example:
        >>> async with AsyncEnvClient(env_dir="environments/echo", env_cls=EchoEnvironment) as env:  # doctest: +SKIP
        ...     await env.reset()
        ...     result = await env.step(EchoAction(message="hi"))

    The connection opens on first use (or `connect()` / `async with`). If it drops, the next
    call opens a new session (once; `auto_reconnect=False` turns that off); since the episode
    does not survive its session, every call but `reset()` then raises `SessionError` until the
    next `reset()`. A closed client refuses reuse with `ClientStateError`.

    Calls on one client are serialised (one session, one request at a time); run several
    clients for concurrent episodes.
    """

    def _setup_io(self) -> None:
        self._conn: AsyncWebSocket | None = None
        self._http: httpx.AsyncClient | None = None
        self._mcp: AsyncMcpChannel | None = None
        self._lock = AsyncLock()

    # --- lifecycle ------------------------------------------------------------------------

    async def connect(self) -> Self:
        """Start the provider (if any) and open the session now rather than on first use.

        Raises:
            ProviderError: the provider could not start the server.
            TransportError: the server cannot be reached.
            CapacityError: the server holds its maximum of sessions.
        """
        async with self._lock:
            self._check_usable()
            if self._conn is None:
                await self._open()
            return self

    async def reconnect(self) -> SessionInfo | None:
        """Drop the current session and open a new one. An episode in progress is lost: every
        call but `reset()` raises `SessionError` until the next `reset()`.

        Returns:
            The new session (`None` for servers without the `session` message).
        """
        async with self._lock:
            self._check_usable()
            await self._drop("reconnect() replaced the connection")
            await self._open()
            return self._session_info

    async def restart(self) -> SessionInfo | None:
        """Stop the provider's server, start a fresh one, and open a new session there.

        Raises:
            ClientStateError: the client was given a `base_url`, not a provider.
        """
        async with self._lock:
            self._check_usable()
            provider = self._provider
            if provider is None:
                raise ClientStateError(self._restart_refused())
            await self._drop("restart() replaced the server")
            await self._close_http()
            await AsyncBlocking.call(provider.stop)
            self._base_url = None
            self._schema = None
            await self._open()
            return self._session_info

    async def aclose(self) -> None:
        """Close the session, the MCP channel and the provider's server, then run the close
        hooks (`add_close_hook`). Safe to call twice."""
        async with self._lock:
            if not self._begin_close():
                return
            try:
                await self._close_socket()
                await self._close_mcp()
                await self._close_http()
            finally:
                try:
                    if self._provider is not None:
                        await AsyncBlocking.call(self._provider.stop)
                finally:
                    self._run_close_hooks()

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- the orchestrator's verbs -----------------------------------------------------------

    async def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start an episode: `seed`, `episode_id` and task fields (`await env.reset(task_id="t1")`).

        Raises:
            ServerError: the server refused (e.g. `InvalidActionError` for an unknown task field).
            TransportError: the connection failed; `RequestTimeout` after `timeout_s`.
        """
        async with self._lock:
            observation_model = dict if self._generic else self._observation_model()
            data = await self._exchange("reset", kwargs)
            result = self._parse_step(data, observation_model)
            self._record_reset(kwargs, data)
            return result

    async def step(self, action: Any) -> StepResult[ObsT]:
        """Apply one action: the action model, a dict of its fields, or a tool-call action.

        Raises:
            InvalidActionError: the action fails the action schema (checked before sending when
                possible, else by the server).
            SessionError: the episode was lost with its connection; call `reset()`.
            TransportError: the connection failed; `RequestTimeout` after `timeout_s`.
        """
        async with self._lock:
            payload, observation_model = self._encode_action(action)
            data = await self._exchange("step", payload)
            result = self._parse_step(data, observation_model)
            self._record_step(payload, data)
            return result

    async def state(self) -> StateT:
        """The episode's state, as the environment's state model.

        Raises:
            SessionError: the episode was lost with its connection; call `reset()`.
        """
        async with self._lock:
            return self._parse_state(await self._exchange("state", None))

    async def call(self, name: str, /, **arguments: Any) -> Any:
        """An orchestrator-only call (for graders), e.g. `await env.call("transcript")`: the agent's tool calls.

        Raises:
            ServerError: unknown call (code `UNKNOWN_CALL`), or the call failed.
        """
        async with self._lock:
            return self._parse_call(await self._exchange("call", {"name": name, "arguments": arguments}))

    # --- checkpoint, restore, fork (orchestrator-only; see docs/fork.md) ------------------------

    async def checkpoint(self) -> CheckpointInfo:
        """Keep the episode as it stands (environment state and the session's workspace) on the
        server, under an opaque handle that `restore` takes, on any session of a server of the
        same environment and checkpoint store, also after the server restarted.

        Raises:
            CheckpointError: the environment cannot snapshot (`SNAPSHOT_UNSUPPORTED`) or the
                store is full (`CHECKPOINT_LIMIT`).
            SessionError: no episode (call `reset()` first).
        """
        async with self._lock:
            data = await self._exchange("checkpoint", {})
            return CheckpointInfo.model_validate(data)

    async def restore(self, handle: str | CheckpointInfo, *, drop: bool = False) -> RestoredInfo:
        """Continue a checkpoint's episode in this client's session (its own episode, if any, is
        replaced): the next steps observe exactly what the checkpointed session's would.
        `drop=True` forgets the checkpoint once restored (one request instead of two).

        Raises:
            CheckpointError: unknown handle (`CHECKPOINT_NOT_FOUND`), or of another environment.
        """
        name = handle.handle if isinstance(handle, CheckpointInfo) else handle
        async with self._lock:
            data = await self._exchange("restore", {"handle": name, "drop": drop})
            info = RestoredInfo.model_validate(data)
            self._record_restore(name, info.state)
            return info

    async def drop_checkpoint(self, handle: str | CheckpointInfo) -> None:
        """Forget a checkpoint on the server (its files are removed; its handle no longer restores).

        Raises:
            CheckpointError: unknown handle (`CHECKPOINT_NOT_FOUND`).
        """
        name = handle.handle if isinstance(handle, CheckpointInfo) else handle
        async with self._lock:
            await self._exchange("drop_checkpoint", {"handle": name})

    async def fork(self, n: int = 1) -> list[Self]:
        """`n` new clients of the same server, each in a session of its own that continues this
        episode from where it stands (a checkpoint restored `n` times, then dropped). This
        client's episode goes on unchanged. Close the copies when done (`async with` each).

        Raises:
            ValueError: `n` is below 1.
            CheckpointError: as `checkpoint` and `restore`.
        """
        if n < 1:
            raise ValueError(f"fork needs n >= 1 copies, got {n}")
        info = await self.checkpoint()
        copies: list[Self] = []
        try:
            for i in range(n):
                copy = self.sibling()
                copies.append(copy)
                await copy.restore(info.handle, drop=i == n - 1)  # the last copy's restore drops it
                copy.trajectory = self.trajectory.model_copy(deep=True)
        except BaseException:
            for copy in copies:
                await copy.aclose()
            with contextlib.suppress(ServerError, TransportError):
                await self.drop_checkpoint(info.handle)
            raise
        return copies

    def sibling(self) -> Self:
        """A new client of this client's server, with its options and orchestrator token, for a
        session of its own (opened on first use); it does not stop the server when closed.

        Raises:
            ClientStateError: the client has not connected yet (its server has no URL yet).
        """
        if self._base_url is None:
            raise ClientStateError("sibling() needs a connected client: its server's URL is not known yet")
        return type(self)(self._base_url, **self._sibling_kwargs())

    async def session(self) -> SessionInfo:
        """The session: its id and the MCP token that binds an agent to this episode."""
        async with self._lock:
            self._check_usable()
            if self._conn is None:
                await self._connection("session")
            if self._session_info is None:
                self._session_info = self._session_from(await self._exchange("session", None))
            return self._session_info

    @property
    def mcp_url(self) -> str:
        """The URL an agent's MCP client connects to, bound to this session's episode.

        Raises:
            ClientStateError: no session is open yet (`async with`, `await env.connect()` or
                `await env.session()` opens one).
        """
        return self._mcp_ready_url()

    async def schema(self) -> SchemaResponse:
        """The server's `/schema`: action, observation and state JSON Schemas, and the tools."""
        async with self._lock:
            self._check_usable()
            if self._schema is None:
                await self._ensure_started()
                self._schema = self._schema_from(await self._http_json("GET", f"{self._base_url}/schema", None))
            return self._schema

    # --- the Task API (plain HTTP; no session needed) ----------------------------------------

    async def splits(self) -> list[TaskSplit]:
        """The environment's task splits (`GET /{env}/splits`), each with its type and task count."""
        return await self._tasks_call("splits")

    async def tasks(self, split: str, *, start: int | None = None, stop: int | None = None) -> list[ServedTask]:
        """The tasks of `split`: all of them, or `[start, stop)` (slice bounds) when either is given."""
        if start is None and stop is None:
            return await self._tasks_call("tasks", split=split)
        return await self._tasks_call("task_range", split=split, start=start, stop=stop)

    async def num_tasks(self, split: str) -> int:
        """How many tasks `split` has."""
        return await self._tasks_call("num_tasks", split=split)

    async def task(self, task_id: str | None = None, /, *, split: str | None = None, index: int | None = None) -> ServedTask:
        """One task, by id (`await env.task("fizzbuzz")`) or by position (`await env.task(split="test", index=3)`);
        start it with `await env.reset(**task.reset_kwargs)`.

        Raises:
            ValueError: neither or both ways of naming the task were given.
            InvalidActionError: the server knows no such task, split or index.
        """
        return await self._tasks_call("task", **self._task_fields(task_id, split, index))

    async def _tasks_call(self, call: str, **fields: Any) -> Any:
        async with self._lock:
            self._check_usable()
            await self._ensure_started()
            if self._task_env is None:
                self._task_env = self._env_name_from(await self._http_json("GET", f"{self._base_url}/list_environments", None))
            method, url, body = self._task_request(call, self._task_env, **fields)
            return self._parse_tasks(call, await self._http_json(method, url, body))

    async def _http_json(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        try:
            async with self._http_client().stream(method, url, json=body) as response:
                raw = await AsyncReplyBody.read(response, self._options.max_message_bytes, f"{method} {url}")
        except httpx.TimeoutException as e:
            raise RequestTimeout(f"{method} {url}: no answer within {self._options.timeout_s:g} s") from e
        except httpx.HTTPError as e:
            raise TransportError(f"{method} {url} failed: {e}.{self._provider_note()}") from e
        data = json_or_text(raw, f"{method} {url}")
        if response.status_code != 200:
            raise http_error(response.status_code, data, f"{method} {url}")
        return data

    # --- the agent's side (MCP) --------------------------------------------------------------

    async def list_tools(self) -> list[mcp_types.Tool]:
        """The tools, listed over this session's MCP binding (see `tool_transport`)."""
        if self._options.tool_transport == "websocket":
            async with self._lock:
                return self._tools_from(await self._exchange("mcp", self._mcp_message("tools/list")))
        channel = await self._mcp_channel()
        return await channel.list_tools()

    async def call_tool(self, name: str, /, **arguments: Any) -> mcp_types.CallToolResult:
        """Call a tool as the agent would: over MCP, in this session's episode.

        A failing tool is a result (`is_error=True`) the agent sees; the episode goes on.

        It goes over the official `mcp` client (`tool_transport="mcp"`, the default) or as the
        same MCP request on the session's WebSocket (`tool_transport="websocket"`).

        Raises:
            ToolCallError: the server refused the call: an unknown tool (`error_type`
                `tool_not_found`, the type `step` reports for it).
            SessionError: a call before `reset` (`NOT_RESET`) or while the session is busy, the
                class and code `step` raises.
        """
        with tracing.span("openenv.client.call_tool", attributes={"gen_ai.tool.name": name, **self._span_attributes()}):
            if self._options.tool_transport == "websocket":
                message = self._mcp_message("tools/call", {"name": name, "arguments": arguments})
                async with self._lock:
                    return self._tool_result_from(await self._exchange("mcp", message), name)
            channel = await self._mcp_channel()
            # the mcp SDK carries the trace on in the request's `_meta`
            return await channel.call_tool(name, arguments)

    # --- internals ----------------------------------------------------------------------------

    async def _mcp_channel(self) -> AsyncMcpChannel:
        url = self._mcp_url(await self.session())
        async with self._lock:
            if self._mcp is not None and self._mcp.url != url:
                await self._close_mcp()
            if self._mcp is None:
                options = self._options
                self._mcp = AsyncMcpChannel(url, timeout_s=options.timeout_s, connect_timeout_s=options.connect_timeout_s)
            return self._mcp

    async def _close_mcp(self) -> None:
        channel, self._mcp = self._mcp, None
        if channel is not None:
            await channel.aclose()

    async def _ensure_started(self) -> None:
        if self._base_url is None:
            assert self._provider is not None
            base_url = await AsyncBlocking.call(self._provider.start)
            if not isinstance(base_url, str):
                raise ProviderError(f"{type(self._provider).__name__}.start() returned {base_url!r}, not a URL")
            self._base_url = _http_base(base_url)

    def _http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            options = self._options
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(options.timeout_s, connect=options.connect_timeout_s), headers=self._auth_headers(),
                event_hooks={"request": [_inject_trace]} if tracing.enabled() else None,
            )
        return self._http

    async def _close_http(self) -> None:
        client, self._http = self._http, None
        if client is not None:
            await client.aclose()

    async def _open(self) -> None:
        """Connect a new WebSocket session and learn its MCP binding; whatever fails, the socket
        is closed before the error goes up."""
        await self._ensure_started()
        try:
            conn = await AsyncWebSocket.connect(self._ws_url(), options=self._options, headers=self._auth_headers())
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
            # ConnectionClosed: the server went away during the opening handshake
            raise TransportError(self._unreachable_text(e)) from e
        self._conn = conn
        self._send_ids = True
        try:
            info: SessionInfo | None = self._session_from(await self._roundtrip(conn, "session", None))
        except ServerError as e:
            if e.code != "UNKNOWN_TYPE":  # UNKNOWN_TYPE: an OpenEnv server has no `session` message
                await self._close_socket()
                raise
            info = None
        except ConnectionEnded as e:
            await self._close_socket()
            raise e.error from None
        except Dropped as e:
            await self._close_socket()
            raise TransportError(f"{self._ws_url()} closed the connection at once ({e.reason})") from None
        except BaseException:
            await self._close_socket()
            raise
        self._on_connected(info)

    async def _close_socket(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.aclose()
            except Exception as e:  # already broken: nothing more to release
                logger.debug("closing the WebSocket failed: %s", e)

    async def _drop(self, reason: str) -> None:
        if self._conn is not None:
            await self._close_socket()
            self._on_dropped(reason)

    async def _connection(self, kind: str) -> AsyncWebSocket:
        if self._conn is None:
            if self._lost is not None and not self._options.auto_reconnect:
                raise self._reconnect_refused()
            if self._lost is not None or self._lifecycle is _Lifecycle.OPEN:
                logger.warning("reconnecting to %s: a new session (%s)", self._where(), self._lost or "no episode lost")
            await self._open()
        self._check_not_lost(kind)
        assert self._conn is not None
        return self._conn

    async def _exchange(self, kind: str, data: Any) -> Any:
        self._check_usable()
        auto_reconnect = self._options.auto_reconnect
        for attempt in (1, 2):
            conn = await self._connection(kind)
            try:
                with tracing.span(f"openenv.client.{kind}", kind="client", attributes=self._span_attributes()):
                    return await self._roundtrip(conn, kind, data)
            except Dropped as dropped:
                await self._close_socket()
                self._on_dropped(f"the connection closed ({dropped.reason})")
                retry = auto_reconnect and attempt == 1 and (not dropped.sent or kind in _RETRY_AFTER_SENT)
                if not retry:
                    raise TransportError(self._drop_text(kind, dropped)) from None
            except ConnectionEnded as ended:
                await self._close_socket()
                self._on_dropped(f"the server ended the session ({ended.error.args[0]})")
                # the server ended the session before it took the request (idle or unreset reaper):
                # a reset (or session) means a new session anyway, so it goes again on a new one
                retry = auto_reconnect and attempt == 1 and kind in _RETRY_AFTER_SENT
                if not (retry and ended.error.code != "CAPACITY_REACHED"):
                    raise self._ended_error(ended.error) from None
            except RequestTimeout:
                raise
            except TransportError as e:  # the connection is out of step: start over on a new one
                await self._close_socket()
                self._on_dropped(f"the connection failed ({e})")
                raise
        raise AssertionError("unreachable")

    async def _roundtrip(self, conn: AsyncWebSocket, kind: str, data: Any) -> Any:
        request_id, text = self._encode(kind, data)
        try:
            await conn.send(text)
        except ConnectionClosed as e:
            raise self._closed_on_send(str(e), await conn.unread()) from None
        deadline = time.monotonic() + self._options.timeout_s
        while True:
            try:
                raw = await conn.recv(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                if self._after_timeout(request_id):
                    await self._close_socket()
                    self._on_dropped("a request timed out on a server that does not echo request ids")
                raise RequestTimeout(self._timeout_error_text(kind)) from None
            except ConnectionClosed as e:
                raise Dropped(str(e), sent=True) from None
            reply = self._decode(request_id, kind, raw)
            if reply is not STALE:
                return reply


async def _inject_trace(request: httpx.Request) -> None:
    tracing.inject(request.headers)
