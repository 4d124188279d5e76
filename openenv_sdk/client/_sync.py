"""`EnvClient`: the blocking client (WebSocket through `websockets.sync.client`)."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from .. import tracing
from ..errors import ClientStateError, ProviderError, RequestTimeout, ServerError, TransportError
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
    logger,
)
from ._mcp import LoopThread, McpChannel
from ._models import StepResult

if TYPE_CHECKING:
    import mcp_types

__all__ = ["EnvClient"]


class EnvClient(BaseEnvClient[ActT, ObsT, StateT]):
    """A blocking client of one environment server; one client holds one session.

    Typed by the environment's models, `EnvClient[MyAction, MyObservation, MyState](url)` or
    `EnvClient(url, env_cls=MyEnvironment)`: `reset` and `step` return a `StepResult` whose
    observation is the environment's observation model, and `state()` its state model.

    Example:
        >>> with EnvClient(env_dir="environments/echo", env_cls=EchoEnvironment) as env:  # doctest: +SKIP
        ...     env.reset()
        ...     result = env.step(EchoAction(message="hi"))

    The connection opens on first use (or `connect()` / `with`). If it drops, the next call
    opens a new session (once; `auto_reconnect=False` turns that off); since the episode does
    not survive its session, every call but `reset()` then raises `SessionError` until the
    next `reset()`. A closed client refuses reuse with `ClientStateError`.
    """

    def _setup_io(self) -> None:
        self._conn: ClientConnection | None = None
        self._http: httpx.Client | None = None
        self._loop_thread: LoopThread | None = None
        self._mcp: McpChannel | None = None
        self._lock = threading.RLock()

    # --- lifecycle ------------------------------------------------------------------------

    def connect(self) -> Self:
        """Start the provider (if any) and open the session now rather than on first use.

        Raises:
            ProviderError: the provider could not start the server.
            TransportError: the server cannot be reached.
            CapacityError: the server holds its maximum of sessions.
        """
        with self._lock:
            self._check_usable()
            if self._conn is None:
                self._open()
            return self

    def reconnect(self) -> SessionInfo | None:
        """Drop the current session and open a new one. An episode in progress is lost: every
        call but `reset()` raises `SessionError` until the next `reset()`.

        Returns:
            The new session (`None` for servers without the `session` message).
        """
        with self._lock:
            self._check_usable()
            self._drop("reconnect() replaced the connection")
            self._open()
            return self._session_info

    def restart(self) -> SessionInfo | None:
        """Stop the provider's server, start a fresh one, and open a new session there.

        Raises:
            ClientStateError: the client was given a `base_url`, not a provider.
        """
        with self._lock:
            self._check_usable()
            provider = self._provider
            if provider is None:
                raise ClientStateError(self._restart_refused())
            self._drop("restart() replaced the server")
            self._close_http()
            provider.stop()
            self._base_url = None
            self._schema = None
            self._open()
            return self._session_info

    def close(self) -> None:
        """Close the session, the MCP channel and the provider's server. Safe to call twice."""
        with self._lock:
            if self._lifecycle is _Lifecycle.CLOSED:
                return
            self._lifecycle = _Lifecycle.CLOSED
            try:
                self._close_socket()
                self._close_mcp()
                self._close_http()
            finally:
                if self._provider is not None:
                    self._provider.stop()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the orchestrator's verbs -----------------------------------------------------------

    def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start an episode: `seed`, `episode_id` and task fields (`reset(task_id="t1")`).

        Raises:
            ServerError: the server refused (e.g. `InvalidActionError` for an unknown task field).
            TransportError: the connection failed; `RequestTimeout` after `timeout_s`.
        """
        with self._lock:
            observation_model = dict if self._generic else self._observation_model()
            data = self._exchange("reset", kwargs)
            result = self._parse_step(data, observation_model)
            self._record_reset(kwargs, data)
            return result

    def step(self, action: Any) -> StepResult[ObsT]:
        """Apply one action: the action model, a dict of its fields, or a tool-call action.

        Raises:
            InvalidActionError: the action fails the action schema (checked before sending when
                possible, else by the server).
            SessionError: the episode was lost with its connection; call `reset()`.
            TransportError: the connection failed; `RequestTimeout` after `timeout_s`.
        """
        with self._lock:
            payload, observation_model = self._encode_action(action)
            data = self._exchange("step", payload)
            result = self._parse_step(data, observation_model)
            self._record_step(payload, data)
            return result

    def state(self) -> StateT:
        """The episode's state, as the environment's state model.

        Raises:
            SessionError: the episode was lost with its connection; call `reset()`.
        """
        with self._lock:
            return self._parse_state(self._exchange("state", None))

    def call(self, name: str, /, **arguments: Any) -> Any:
        """An orchestrator-only call (for graders), e.g. `call("transcript")`: the agent's tool calls.

        Raises:
            ServerError: unknown call (code `UNKNOWN_CALL`), or the call failed.
        """
        with self._lock:
            return self._parse_call(self._exchange("call", {"name": name, "arguments": arguments}))

    def session(self) -> SessionInfo:
        """The session: its id and the MCP token that binds an agent to this episode."""
        with self._lock:
            self._check_usable()
            if self._conn is None:
                self._connection("session")
            if self._session_info is None:
                self._session_info = self._session_from(self._exchange("session", None))
            return self._session_info

    @property
    def mcp_url(self) -> str:
        """The URL an agent's MCP client connects to, bound to this session's episode."""
        return self._mcp_url(self.session())

    def schema(self) -> SchemaResponse:
        """The server's `/schema`: action, observation and state JSON Schemas, and the tools."""
        with self._lock:
            self._check_usable()
            if self._schema is None:
                self._ensure_started()
                try:
                    response = self._http_client().get(f"{self._base_url}/schema")
                except httpx.TimeoutException as e:
                    raise RequestTimeout(f"GET {self._base_url}/schema: no answer within {self._timeout_s:g} s") from e
                except httpx.HTTPError as e:
                    raise TransportError(f"GET {self._base_url}/schema failed: {e}.{self._provider_note()}") from e
                body = _json_or_text(response)
                if response.status_code != 200:
                    raise http_error(response.status_code, body, f"GET {self._base_url}/schema")
                self._schema = self._schema_from(body)
            return self._schema

    # --- the Task API (plain HTTP; no session needed) ----------------------------------------

    def splits(self) -> list[TaskSplit]:
        """The environment's task splits (`GET /{env}/splits`), each with its type and task count."""
        return self._tasks_call("splits")

    def tasks(self, split: str, *, start: int | None = None, stop: int | None = None) -> list[ServedTask]:
        """The tasks of `split`: all of them, or `[start, stop)` (slice bounds) when either is given."""
        if start is None and stop is None:
            return self._tasks_call("tasks", split=split)
        return self._tasks_call("task_range", split=split, start=start, stop=stop)

    def num_tasks(self, split: str) -> int:
        """How many tasks `split` has."""
        return self._tasks_call("num_tasks", split=split)

    def task(self, task_id: str | None = None, /, *, split: str | None = None, index: int | None = None) -> ServedTask:
        """One task, by id (`env.task("fizzbuzz")`) or by position (`env.task(split="test", index=3)`);
        start it with `env.reset(**task.reset_kwargs)`.

        Raises:
            ValueError: neither or both ways of naming the task were given.
            InvalidActionError: the server knows no such task, split or index.
        """
        return self._tasks_call("task", **self._task_fields(task_id, split, index))

    def _tasks_call(self, call: str, **fields: Any) -> Any:
        with self._lock:
            self._check_usable()
            self._ensure_started()
            if self._task_env is None:
                self._task_env = self._env_name_from(self._http_json("GET", f"{self._base_url}/list_environments", None))
            method, url, body = self._task_request(call, self._task_env, **fields)
            return self._parse_tasks(call, self._http_json(method, url, body))

    def _http_json(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        try:
            response = self._http_client().request(method, url, json=body)
        except httpx.TimeoutException as e:
            raise RequestTimeout(f"{method} {url}: no answer within {self._timeout_s:g} s") from e
        except httpx.HTTPError as e:
            raise TransportError(f"{method} {url} failed: {e}.{self._provider_note()}") from e
        data = _json_or_text(response)
        if response.status_code != 200:
            raise http_error(response.status_code, data, f"{method} {url}")
        return data

    # --- the agent's side (MCP) --------------------------------------------------------------

    def list_tools(self) -> list[mcp_types.Tool]:
        """The tools, listed over this session's MCP binding (see `tool_transport`)."""
        if self._tool_transport == "websocket":
            with self._lock:
                return self._tools_from(self._exchange("mcp", self._mcp_message("tools/list")))
        channel = self._mcp_channel()
        assert self._loop_thread is not None
        return self._loop_thread.run(channel.list_tools(), self._mcp_wait_s())

    def call_tool(self, name: str, /, **arguments: Any) -> mcp_types.CallToolResult:
        """Call a tool as the agent would: over MCP, in this session's episode.

        A failing tool is a result (`is_error=True`) the agent sees; the episode goes on.

        It goes over the official `mcp` client (`tool_transport="mcp"`, the default) or as the
        same MCP request on the session's WebSocket (`tool_transport="websocket"`).

        Raises:
            ToolCallError: the server refused the call (e.g. unknown tool).
        """
        with tracing.span("openenv.client.call_tool", attributes={"gen_ai.tool.name": name, **self._span_attributes()}):
            if self._tool_transport == "websocket":
                message = self._mcp_message("tools/call", {"name": name, "arguments": arguments})
                with self._lock:
                    return self._tool_result_from(self._exchange("mcp", message), name)
            channel = self._mcp_channel()
            assert self._loop_thread is not None
            # the mcp SDK carries the trace on in the request's `_meta`
            return self._loop_thread.run(channel.call_tool(name, arguments), self._mcp_wait_s())

    # --- internals ----------------------------------------------------------------------------

    def _mcp_wait_s(self) -> float:
        return self._timeout_s + self._connect_timeout_s + 1.0

    def _mcp_channel(self) -> McpChannel:
        url = self.mcp_url
        with self._lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
            if self._mcp is not None and self._mcp.url != url:
                self._close_mcp_channel_only()
            if self._mcp is None:
                self._mcp = McpChannel(url, timeout_s=self._timeout_s, connect_timeout_s=self._connect_timeout_s)
            return self._mcp

    def _close_mcp_channel_only(self) -> None:
        channel, self._mcp = self._mcp, None
        if channel is not None and self._loop_thread is not None:
            try:
                self._loop_thread.run(channel.aclose(), self._connect_timeout_s + 1.0)
            except Exception as e:  # closing must go on
                logger.debug("closing the MCP channel failed: %s", e)

    def _close_mcp(self) -> None:
        self._close_mcp_channel_only()
        thread, self._loop_thread = self._loop_thread, None
        if thread is not None:
            thread.close(self._connect_timeout_s)

    def _ensure_started(self) -> None:
        if self._base_url is None:
            assert self._provider is not None
            base_url = self._provider.start()
            if not isinstance(base_url, str):
                raise ProviderError(f"{type(self._provider).__name__}.start() returned {base_url!r}, not a URL")
            self._base_url = _http_base(base_url)

    def _http_client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                timeout=httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s), headers=self._auth_headers(),
                event_hooks={"request": [_inject_trace]} if tracing.enabled() else None,
            )
        return self._http

    def _close_http(self) -> None:
        client, self._http = self._http, None
        if client is not None:
            client.close()

    def _open(self) -> None:
        """Connect a new WebSocket session and learn its MCP binding."""
        self._ensure_started()
        try:
            conn = connect(
                self._ws_url(),
                open_timeout=self._connect_timeout_s,
                close_timeout=self._connect_timeout_s,
                max_size=self._max_message_bytes,
                additional_headers=self._auth_headers(),
                legacy=True,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as e:
            # ConnectionClosed: the server went away during the opening handshake
            raise TransportError(self._unreachable_text(e)) from e
        self._conn = conn
        self._send_ids = True
        try:
            info = self._session_from(self._roundtrip(conn, "session", None))
        except ServerError as e:
            if e.code != "UNKNOWN_TYPE":  # an OpenEnv server has no `session` message
                raise
            info = None
        except ConnectionEnded as e:
            self._close_socket()
            raise e.error from None
        except Dropped as e:
            self._close_socket()
            raise TransportError(f"{self._ws_url()} closed the connection at once ({e.reason})") from None
        except BaseException:
            self._close_socket()
            raise
        self._on_connected(info)

    def _close_socket(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as e:  # already broken: nothing more to release
                logger.debug("closing the WebSocket failed: %s", e)

    def _drop(self, reason: str) -> None:
        if self._conn is not None:
            self._close_socket()
            self._on_dropped(reason)

    def _connection(self, kind: str) -> ClientConnection:
        if self._conn is None:
            if self._lost is not None and not self._auto_reconnect:
                raise self._reconnect_refused()
            if self._lost is not None or self._lifecycle is _Lifecycle.OPEN:
                logger.warning("reconnecting to %s: a new session (%s)", self._where(), self._lost or "no episode lost")
            self._open()
        self._check_not_lost(kind)
        assert self._conn is not None
        return self._conn

    def _exchange(self, kind: str, data: Any) -> Any:
        self._check_usable()
        for attempt in (1, 2):
            conn = self._connection(kind)
            try:
                with tracing.span(f"openenv.client.{kind}", kind="client", attributes=self._span_attributes()):
                    return self._roundtrip(conn, kind, data)
            except Dropped as dropped:
                self._close_socket()
                self._on_dropped(f"the connection closed ({dropped.reason})")
                retry = self._auto_reconnect and attempt == 1 and (not dropped.sent or kind in _RETRY_AFTER_SENT)
                if not retry:
                    raise TransportError(self._drop_text(kind, dropped)) from None
            except ConnectionEnded as ended:
                self._close_socket()
                self._on_dropped(f"the server ended the session ({ended.error.args[0]})")
                # the server ended the session before it took the request (idle or unreset reaper):
                # a reset (or session) means a new session anyway, so it goes again on a new one
                retry = self._auto_reconnect and attempt == 1 and kind in _RETRY_AFTER_SENT
                if not (retry and ended.error.code != "CAPACITY_REACHED"):
                    raise self._ended_error(ended.error) from None
            except RequestTimeout:
                raise
            except TransportError as e:  # the connection is out of step: start over on a new one
                self._close_socket()
                self._on_dropped(f"the connection failed ({e})")
                raise
        raise AssertionError("unreachable")

    def _roundtrip(self, conn: ClientConnection, kind: str, data: Any) -> Any:
        request_id, text = self._encode(kind, data)
        try:
            conn.send(text)
        except ConnectionClosed as e:
            raise self._closed_on_send(str(e), _unread(conn)) from None
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                raw = conn.recv(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                if self._after_timeout(request_id):
                    self._close_socket()
                    self._on_dropped("a request timed out on a server that does not echo request ids")
                raise RequestTimeout(self._timeout_error_text(kind)) from None
            except ConnectionClosed as e:
                raise Dropped(str(e), sent=True) from None
            reply = self._decode(request_id, kind, raw)
            if reply is not STALE:
                return reply


def _unread(conn: ClientConnection) -> list[str | bytes]:
    """Messages already received on a closed connection (e.g. the server's last error)."""
    out: list[str | bytes] = []
    for _ in range(8):
        try:
            out.append(conn.recv(timeout=0))
        except (ConnectionClosed, TimeoutError, RuntimeError):
            break
    return out


def _inject_trace(request: httpx.Request) -> None:
    tracing.inject(request.headers)


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text
