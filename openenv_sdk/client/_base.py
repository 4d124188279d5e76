"""The protocol logic both clients share; `EnvClient` and `AsyncEnvClient` add only the I/O.

What lives here: the constructor and its checks, where the server comes from (a URL or a
provider), the WebSocket envelope with request ids, mapping error replies to the error tree,
typing observations and states, the lost-episode bookkeeping behind reconnects, and the
episode record (`Trajectory`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import itertools
import json
import logging
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ValidationError

from .. import tracing
from ..errors import (
    ClientStateError,
    InvalidActionError,
    ProviderError,
    ServerError,
    SessionError,
    ToolCallError,
    TransportError,
    error_class,
)
from ..providers.base import OrchestratorTokenHolder
from ..tasks import ServedTask, TaskSplit
from ..tools import validation_message
from ..types import (
    WS_REPLY_TYPE,
    Action,
    CallToolAction,
    CallToolObservation,
    ErrorCode,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    SchemaResponse,
    SessionInfo,
    State,
    ToolCallAction,
    ToolErrorType,
)
from ._models import StepResult, Trajectory, TrajectoryStep
from ._options import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    ClientOptions,
    ToolTransport,
)

if typing.TYPE_CHECKING:
    import mcp_types

    from ..environment import Environment
    from ..providers.base import Provider

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "BaseEnvClient",
    "ClientOptions",
    "server_error",
]

logger = logging.getLogger("openenv_sdk.client")

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)

_ENDS_CONNECTION = frozenset({"CAPACITY_REACHED", "SESSION_ERROR"})
"""Error codes after which the server closes the WebSocket (capacity at connect, idle reaper)."""

_ALLOWED_AFTER_LOSS = frozenset({"reset", "session", "restore", "drop_checkpoint"})
"""Requests that still make sense once the episode is lost: they do not pretend it continues."""

_RETRY_AFTER_SENT = frozenset({"reset", "session", "restore"})
"""Requests that may be sent again on a new session after their connection dropped mid-way."""


JSONRPC_NAMES = {
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: "INTERNAL_ERROR",
}
"""JSON-RPC's error codes by name, for `ToolCallError.code`."""


_TOOL_NOT_FOUND_CODE = ErrorCode.VALIDATION_ERROR.value
"""The `data.code` on our servers' refusal of a `tools/call`: only an unknown tool gets it."""


def tool_call_refused(what: str, code: int, message: str, tool: str | None, data: Any = None) -> ServerError:
    """The error for an MCP request the server refused with JSON-RPC error `code`.

    A refusal that names a session problem in `data.code` (`NOT_RESET`, `SESSION_BUSY`,
    `SESSION_REQUIRED`: our servers send it) raises what `step` raises for it, the same class
    and code; the rest is `ToolCallError` with the JSON-RPC code's name, and an unknown tool
    carries `error_type` `tool_not_found`, the type `step` reports for it.
    """
    details: dict[str, Any] = {"jsonrpc_code": code}
    if tool is not None:
        details["tool"] = tool
    sent = data.get("code") if isinstance(data, Mapping) else None
    if isinstance(sent, str) and sent != _TOOL_NOT_FOUND_CODE and error_class(sent) is SessionError:
        return SessionError(message, code=sent, details=details)
    unknown_tool = sent == _TOOL_NOT_FOUND_CODE and tool is not None
    return ToolCallError(
        f"MCP {what} refused: {message}",
        code=JSONRPC_NAMES.get(code, f"JSONRPC_{code}"),
        details=details,
        error_type=ToolErrorType.TOOL_NOT_FOUND if unknown_tool else None,
    )


def server_error(payload: Any) -> ServerError:
    """The error-tree exception for a server's error payload (`{"message", "code", ...}`)."""
    if not isinstance(payload, Mapping):
        return ServerError(f"The server answered with an error: {payload!r}", code="UNKNOWN")
    details = {k: v for k, v in payload.items() if k not in ("message", "code")}
    code = str(payload.get("code") or "UNKNOWN")
    message = str(payload.get("message") or "The server answered with an error and no message")
    return error_class(code)(message, code=code, details=details)


def _malformed(what: str, model: str, e: ValidationError) -> ServerError:
    """The error for an MCP reply whose result is not the MCP type it should be."""
    return ServerError(f"MCP {what}: the reply's result is not a valid {model}: {validation_message(e)}", code="UNKNOWN")


def _http_base(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url must look like http://host:port, got {url!r}")
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"


class _Models(NamedTuple):
    action: type[Action]
    observation: type[Observation]
    state: type[State]


class _Lifecycle(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class _Stale:
    """Marks a late reply to a request that already timed out; it is dropped."""


STALE = _Stale()


class ConnectionEnded(Exception):
    """Internal: the server ended the session with an error (capacity, idle reaper)."""

    def __init__(self, error: ServerError) -> None:
        super().__init__(str(error))
        self.error = error


class Dropped(Exception):
    """Internal: the WebSocket closed under a request. `sent`: whether the request went out."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class BaseEnvClient(Generic[ActT, ObsT, StateT]):
    """What `EnvClient` and `AsyncEnvClient` share. Not used directly."""

    _generic: ClassVar[bool] = False
    """Generic clients take dict actions (checked against `/schema`) and return dicts."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        env_dir: str | Path | None = None,
        image: str | None = None,
        provider: Provider | None = None,
        env_cls: type[Environment[ActT, ObsT, StateT]] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        auto_reconnect: bool = True,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        orchestrator_token: str | None = None,
        tool_transport: ToolTransport = "mcp",
        validate_actions: bool = True,
    ) -> None:
        """Describe the connection; nothing is opened until first use (or `connect()`).

        Give exactly one of `base_url`, `env_dir`, `image`, `provider`. The keywords after
        `env_cls` are `ClientOptions`' fields, documented there; the client keeps them as one
        frozen `options` object.

        Args:
            base_url: a running server, e.g. `http://127.0.0.1:8000`.
            env_dir: an environment folder to serve locally (`openenv serve ENV_DIR` in a
                subprocess on a free loopback port), stopped when the client closes.
            image: an environment image to run with `DockerProvider`, stopped on close.
            provider: a `Provider` (`start() -> base_url`, `stop()`, `is_alive()`, and
                `logs_tail()` quoted when the server dies); the client starts it when it opens
                and stops it when it closes.
            env_cls: the environment class whose models type observations and states
                (instead of `EnvClient[MyAction, MyObservation, MyState]`); typed clients only.

        Raises:
            ValueError: not exactly one source was given, or an option is out of range
                (a timeout that is not positive, an unknown `tool_transport`).
            TypeError: `env_cls=` was given to a generic client (generic clients are untyped).
            ProviderError: `image=` was given but the Docker provider is unavailable.
        """
        given = {
            name: value
            for name, value in (("base_url", base_url), ("env_dir", env_dir), ("image", image), ("provider", provider))
            if value is not None
        }
        if len(given) != 1:
            raise ValueError(
                f"{type(self).__name__} needs exactly one of base_url, env_dir=, image=, provider= "
                f"(got {', '.join(given) or 'none'})"
            )
        self._options = ClientOptions(
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            startup_timeout_s=startup_timeout_s,
            auto_reconnect=auto_reconnect,
            max_message_bytes=max_message_bytes,
            orchestrator_token=orchestrator_token,
            tool_transport=tool_transport,
            validate_actions=validate_actions,
        )
        if env_cls is not None and self._generic:
            raise TypeError(f"{type(self).__name__} takes dicts and needs no env_cls; use EnvClient(env_cls=...)")
        self._env_cls = env_cls
        self._provider = provider if provider is not None else self._make_provider(env_dir, image)
        self._base_url: str | None = _http_base(base_url) if base_url is not None else None
        self._lifecycle = _Lifecycle.UNOPENED
        self._close_hooks = contextlib.ExitStack()
        self._ids = itertools.count(1)
        self._abandoned: set[int] = set()
        self._ids_echoed = False
        self._send_ids = True
        self._session_info: SessionInfo | None = None
        self._episode_active = False
        self._lost: str | None = None
        self._schema: SchemaResponse | None = None
        self._validator: Any = None
        self._models_cache: _Models | None = None
        self.trajectory: Trajectory = Trajectory()
        """The current episode as sent and received (reset on every `reset`)."""
        self._setup_io()

    def _setup_io(self) -> None:
        """The subclass's I/O state (connections, locks); nothing is opened here."""

    def _mcp_message(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """An MCP JSON-RPC request for the session's WebSocket (`tool_transport="websocket"`)."""
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}

    def _tools_from(self, reply: Any) -> list[mcp_types.Tool]:
        """The tools of a `tools/list` reply from the session's WebSocket."""
        import mcp_types

        tools = self._mcp_result(reply, "tools/list").get("tools")
        if not isinstance(tools, list | None):
            raise ServerError(f"MCP tools/list: `tools` is not a list: {str(tools)[:300]}", code="UNKNOWN")
        try:
            return [mcp_types.Tool.model_validate(tool) for tool in tools or ()]
        except ValidationError as e:
            raise _malformed("tools/list", "Tool", e) from e

    def _tool_result_from(self, reply: Any, name: str) -> mcp_types.CallToolResult:
        """The result of a `tools/call` reply from the session's WebSocket."""
        import mcp_types

        what = f"tools/call {name!r}"
        try:
            return mcp_types.CallToolResult.model_validate(self._mcp_result(reply, what, tool=name))
        except ValidationError as e:
            raise _malformed(what, "CallToolResult", e) from e

    def _mcp_result(self, reply: Any, what: str, *, tool: str | None = None) -> dict[str, Any]:
        """The `result` of the server's JSON-RPC reply; a JSON-RPC error raises `ToolCallError`,
        as the official client's `MCPError` does on the `"mcp"` transport."""
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            code = code if isinstance(code, int) else -32603
            raise tool_call_refused(what, code, str(error.get("message")), tool, error.get("data"))
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict):
            raise ServerError(f"MCP {what}: the reply holds no result object: {str(reply)[:300]}", code="UNKNOWN")
        return result

    def _make_provider(self, env_dir: str | Path | None, image: str | None) -> Provider | None:
        if env_dir is not None:
            from ..providers.local import LocalProcessProvider

            return LocalProcessProvider(env_dir, startup_timeout_s=self._options.startup_timeout_s)
        if image is not None:
            try:
                from ..providers.docker import DockerProvider
            except ImportError as e:
                raise ProviderError(
                    f"image= needs the Docker provider (openenv_sdk.providers.docker and the `docker` "
                    f"package: pip install 'openenv-sdk[docker]'): {e}"
                ) from e
            return DockerProvider(image, startup_timeout_s=self._options.startup_timeout_s)
        return None

    # --- public, I/O-free -----------------------------------------------------------------

    @property
    def base_url(self) -> str | None:
        """The server's `http://host:port`; `None` until a provider has started it."""
        return self._base_url

    @property
    def options(self) -> ClientOptions:
        """The client's settings (timeouts, reconnects, token, tool transport), frozen."""
        return self._options

    def add_close_hook(self, hook: Callable[[], None]) -> None:
        """Call `hook()` when the client closes, after its connections and its provider's server.

        For code that hands clients out and must learn when one is given back (a pool freeing
        the client's slot). Hooks run once, the last added first, on the closing thread (for
        `AsyncEnvClient`, on the event loop: keep them short and non-blocking); every hook runs
        even when an earlier one raises. On a closed client the hook runs at once.
        """
        if self._lifecycle is _Lifecycle.CLOSED:
            hook()
            return
        self._close_hooks.callback(hook)

    @property
    def provider(self) -> Provider | None:
        """The provider that runs the server, when the client was given one (or `env_dir`/`image`)."""
        return self._provider

    @contextlib.contextmanager
    def request_timeout(self, timeout_s: float) -> Iterator[None]:
        """Within the block, a reply may take up to `timeout_s` seconds instead of the client's
        `timeout_s` (e.g. an orchestrator call that runs an agent to completion)."""
        previous = self._options
        self._options = dataclasses.replace(previous, timeout_s=timeout_s)
        try:
            yield
        finally:
            self._options = previous

    @property
    def is_closed(self) -> bool:
        """Whether `close()` / `aclose()` was called."""
        return self._lifecycle is _Lifecycle.CLOSED

    def __repr__(self) -> str:
        where = self._base_url or (type(self._provider).__name__ if self._provider else "?")
        return f"<{type(self).__name__} {where} {self._lifecycle.value}>"

    # --- state checks -----------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._lifecycle is _Lifecycle.CLOSED:
            raise ClientStateError(f"This {type(self).__name__} is closed; create a new client")

    def _begin_close(self) -> bool:
        """Mark the client closed; False when it already was (closing twice is a no-op)."""
        if self._lifecycle is _Lifecycle.CLOSED:
            return False
        self._lifecycle = _Lifecycle.CLOSED
        return True

    def _run_close_hooks(self) -> None:
        hooks, self._close_hooks = self._close_hooks, contextlib.ExitStack()
        hooks.close()

    def _mcp_ready_url(self) -> str:
        """`mcp_url` of the open session; `ClientStateError` when none is open."""
        self._check_usable()
        if self._session_info is None:
            raise ClientStateError(
                f"mcp_url needs an open session: use `with` (or `async with`), or call connect() "
                f"(or session()) first on this {type(self).__name__}"
            )
        return self._mcp_url(self._session_info)

    def _restart_refused(self) -> str:
        return (
            f"restart() needs a provider (env_dir=, image= or provider=); this client was given "
            f"base_url={self._base_url!r}"
        )

    def _auth_headers(self) -> dict[str, str]:
        """`Authorization: Bearer <orchestrator token>`, when there is a token (given, or the provider's)."""
        token = self._options.orchestrator_token
        if token is None and isinstance(self._provider, OrchestratorTokenHolder):
            token = self._provider.orchestrator_token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _ws_url(self) -> str:
        assert self._base_url is not None
        return self._base_url.replace("http", "ws", 1) + "/ws"

    def _where(self) -> str:
        return self._base_url or "the server"

    def _provider_note(self) -> str:
        """What the provider knows when the server stopped answering (exit code, last output)."""
        provider = self._provider
        if provider is None:
            return ""
        try:
            alive = provider.is_alive()
        except Exception:  # a provider's own failure must not hide the original error
            return ""
        if alive:
            return ""
        note = f" The server ({type(provider).__name__}) is not running"
        try:
            tail = list(provider.logs_tail())
        except Exception:  # as above: the provider's own failure must not hide the original error
            tail = []
        note += "; its last output:\n" + "\n".join(tail[-20:]) if tail else "."
        return note + "\nStart a fresh one with client.restart()."

    # --- the envelope -----------------------------------------------------------------------

    def _span_attributes(self) -> dict[str, Any]:
        """What a client span says of this client (see `openenv_sdk.tracing`)."""
        info = self._session_info
        return {"server.address": self._base_url, "openenv.session_id": info.session_id if info else None}

    def _encode(self, kind: str, data: Any) -> tuple[int, str]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"type": kind, "id": request_id} if self._send_ids else {"type": kind}
        if self._send_ids and tracing.enabled():  # OpenEnv's servers refuse unknown fields
            tracing.inject(message)  # `traceparent`: the server's span of this request is the client span's child
        if data is not None:
            message["data"] = data
        return request_id, json.dumps(message)

    def _decode(self, request_id: int, kind: str, raw: str | bytes) -> Any:
        """The `data` of the reply to `request_id`, or `STALE` for a late reply to an abandoned one.

        Raises:
            ServerError: the reply is a typed error (its subclass follows the code).
            ConnectionEnded: the server ended the session with this error.
            TransportError: the reply is not an envelope, or answers another request.
        """
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        try:
            message = json.loads(text)
        except ValueError:
            raise TransportError(f"The server sent a message that is not JSON: {text[:200]!r}") from None
        except RecursionError:
            raise TransportError(f"The server sent a message nested too deep to read: {text[:100]!r}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise TransportError(f"The server sent a message that is not an envelope: {text[:200]!r}")
        reply_id = message.get("id")
        if reply_id is not None:
            self._ids_echoed = True
            if reply_id != request_id:
                if reply_id in self._abandoned:
                    self._abandoned.discard(reply_id)
                    return STALE
                raise TransportError(
                    f"The reply's id {reply_id!r} does not match the request's ({request_id}, {kind}): "
                    f"the connection is out of step"
                )
        reply_type = message["type"]
        data = message.get("data")
        if reply_type == "error":
            error = server_error(data)
            if error.code in _ENDS_CONNECTION:
                raise ConnectionEnded(error)
            raise error
        expected = WS_REPLY_TYPE[kind]
        if reply_type != expected:
            raise TransportError(f"Expected a {expected!r} reply to {kind!r}, got {reply_type!r}: {text[:200]!r}")
        return data

    def _timeout_error_text(self, kind: str) -> str:
        return f"No reply to {kind!r} from {self._where()} within {self._options.timeout_s:g} s (timeout_s)"

    def _after_timeout(self, request_id: int) -> bool:
        """Remember a timed-out request; True when the connection must be dropped because the
        server does not echo ids, so its late reply could not be told apart."""
        if self._ids_echoed:
            self._abandoned.add(request_id)
            return False
        return True

    # --- sessions, drops and lost episodes -------------------------------------------------

    def _on_connected(self, info: SessionInfo | None) -> None:
        """The new connection's session; `None` from a server without the `session` message
        (OpenEnv's): such a server refuses unknown fields, so no request ids are sent to it."""
        self._send_ids = info is not None
        self._session_info = info
        self._abandoned.clear()
        self._lifecycle = _Lifecycle.OPEN

    def _on_dropped(self, reason: str) -> None:
        """The connection is gone (its session with it): remember what was lost."""
        if self._episode_active:
            sid = self._session_info.session_id if self._session_info else "?"
            steps = len(self.trajectory.steps)
            self._lost = (
                f"The episode was lost: {reason}, which ended session {sid} "
                f"(after {steps} step{'s' if steps != 1 else ''} of the episode)"
            )
        self._episode_active = False
        self._session_info = None

    def _check_not_lost(self, kind: str) -> None:
        if self._lost is not None and kind not in _ALLOWED_AFTER_LOSS:
            sid = self._session_info.session_id if self._session_info else None
            now = f"A new session ({sid}) is open" if sid else "A new session is open"
            raise SessionError(
                f"{self._lost}. {now}, but the episode cannot continue in it: call reset() to start a new episode.",
                code="SESSION_ERROR",
                details={"lost": "episode", "session_id": sid},
            )

    def _ended_error(self, error: ServerError) -> ServerError:
        """The server's own error for a session it ended, with what that means for the caller."""
        if error.code == "CAPACITY_REACHED":
            return error
        lost = f" {self._lost}." if self._lost else ""
        return type(error)(
            f"{error.args[0]}.{lost} The next call opens a new session; reset() starts a new episode.",
            code=error.code,
            details=error.details,
        )

    def _closed_on_send(self, reason: str, pending: list[str | bytes]) -> Exception:
        """What to raise when a send found the socket closed: the server's last error when one
        was waiting unread (it says why: capacity, idle reaper), else `Dropped`."""
        for raw in pending:
            try:
                message = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(message, dict) and message.get("type") == "error":
                return ConnectionEnded(server_error(message.get("data")))
        return Dropped(reason, sent=False)

    def _reconnect_refused(self) -> SessionError:
        return SessionError(
            f"{self._lost or 'The connection dropped'}. auto_reconnect is off: call reconnect() to open a "
            f"new session, then reset().",
            code="SESSION_ERROR",
            details={"lost": "episode"},
        )

    def _drop_text(self, kind: str, dropped: Dropped) -> str:
        where = "sending" if not dropped.sent else "waiting for the reply to"
        return (
            f"The connection to {self._ws_url()} closed while {where} {kind!r} ({dropped.reason}). "
            f"{self._lost or 'Its session ended'}; the next call opens a new session"
            f"{', and reset() starts a new episode' if self._lost else ''}.{self._provider_note()}"
        )

    def _unreachable_text(self, error: BaseException) -> str:
        lost = f" {self._lost}." if self._lost else ""
        return f"Could not connect to {self._ws_url()}: {type(error).__name__}: {error}.{lost}{self._provider_note()}"

    def _mcp_url(self, info: SessionInfo) -> str:
        assert self._base_url is not None
        return f"{self._base_url}{info.mcp_path}?session={quote(info.mcp_token, safe='')}"

    def _session_from(self, data: Any) -> SessionInfo:
        try:
            return SessionInfo.model_validate(data)
        except ValidationError as e:
            raise TransportError(f"The server's session reply is malformed: {validation_message(e)}") from e

    # --- typing -------------------------------------------------------------------------------

    def _models(self) -> _Models:
        if self._models_cache is None:
            self._models_cache = self._resolve_models()
        return self._models_cache

    def _resolve_models(self) -> _Models:
        if self._env_cls is not None:
            cls = self._env_cls
            return _Models(cls.action_type, cls.observation_type, cls.state_type)
        candidates = [getattr(self, "__orig_class__", None)]
        for klass in type(self).__mro__:
            candidates.extend(getattr(klass, "__orig_bases__", ()))
        for alias in candidates:
            args = typing.get_args(alias) if alias is not None else ()
            if len(args) == 3 and all(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
                action, observation, state = args
                return _Models(action, observation, state)
        raise TypeError(
            f"{type(self).__name__} needs the environment's models: {type(self).__name__}[MyAction, "
            f"MyObservation, MyState](...) or {type(self).__name__}(..., env_cls=MyEnvironment); "
            f"for plain dicts use GenericEnvClient"
        )

    def _encode_action(self, action: Any) -> tuple[dict[str, Any], type[Any]]:
        """The action as sent, and the model its observation is parsed with.

        Raises:
            InvalidActionError: a dict action fails the action model (checked before sending).
            TypeError: the action is neither the action model, a tool-call action, nor a dict.
        """
        models = self._models()
        if isinstance(action, Mapping):
            model = _tool_action_model(action, models.action) or models.action
            if not self._options.validate_actions:  # sent as given: the server checks it
                return dict(action), _OBSERVATION_OF.get(model, models.observation)
            try:
                action = model.model_validate(dict(action))
            except ValidationError as e:
                errors = [
                    {"loc": ["action", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                    for err in e.errors(include_url=False)
                ]
                where = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in errors)
                raise InvalidActionError(
                    f"Invalid action for {model.__name__}: {where}", code="VALIDATION_ERROR", details={"errors": errors}
                ) from e
        if isinstance(action, ToolCallAction | CallToolAction):
            observation: type[Any] = CallToolObservation
        elif isinstance(action, ListToolsAction):
            observation = ListToolsObservation
        elif isinstance(action, models.action):
            observation = models.observation
        else:
            raise TypeError(
                f"step() takes a {models.action.__name__}, a dict of its fields, or a tool-call action "
                f"(ToolCallAction, CallToolAction, ListToolsAction); got {type(action).__name__}"
            )
        return action.model_dump(mode="json"), observation

    def _observation_model(self) -> type[Any]:
        return self._models().observation

    def _parse_step(self, data: Any, observation_model: type[Any]) -> StepResult[Any]:
        if not isinstance(data, dict) or not isinstance(data.get("observation"), dict):
            raise TransportError(f"The server's observation reply is malformed: {str(data)[:200]!r}")
        body: dict[str, Any] = data["observation"]
        reward = data.get("reward")
        done = bool(data.get("done", False))
        metadata = data.get("metadata") or body.get("metadata") or {}
        if observation_model is dict:
            return StepResult[dict[str, Any]](observation=dict(body), reward=reward, done=done, metadata=metadata)
        try:
            observation = observation_model.model_validate({**body, "reward": reward, "done": done})
        except ValidationError as e:
            raise TransportError(
                f"The server's observation does not fit {observation_model.__name__} (is the client typed "
                f"for this environment?): {validation_message(e)}"
            ) from e
        return StepResult[observation_model](  # type: ignore[valid-type]
            observation=observation, reward=reward, done=done, metadata=metadata
        )

    def _parse_state(self, data: Any) -> Any:
        if self._generic:
            if not isinstance(data, dict):
                raise TransportError(f"The server's state reply is not an object: {str(data)[:200]!r}")
            return data
        model = self._models().state
        try:
            return model.model_validate(data)
        except ValidationError as e:
            raise TransportError(
                f"The server's state does not fit {model.__name__} (is the client typed for this "
                f"environment?): {validation_message(e)}"
            ) from e

    def _parse_call(self, data: Any) -> Any:
        if not isinstance(data, dict) or "result" not in data:
            raise TransportError(f"The server's call reply is malformed: {str(data)[:200]!r}")
        return data["result"]

    # --- the episode record -------------------------------------------------------------------

    def _sibling_kwargs(self) -> dict[str, Any]:
        """What a client of the same server, session of its own, is built with (`fork`)."""
        token = self._auth_headers().get("Authorization", "").removeprefix("Bearer ") or None
        options = dataclasses.asdict(self._options)
        options["orchestrator_token"] = token
        if not self._generic:
            options["env_cls"] = self._env_cls
        return options

    def _record_restore(self, handle: str, state: dict[str, Any]) -> None:
        self._lost = None
        self._episode_active = True
        self.trajectory = Trajectory(task={"restored_from": handle}, initial_observation={"state": state})

    def _record_reset(self, task: dict[str, Any], data: dict[str, Any]) -> None:
        self._lost = None
        self._episode_active = True
        self.trajectory = Trajectory(task=dict(task), initial_observation=dict(data["observation"]))

    def _record_step(self, action: dict[str, Any], data: dict[str, Any]) -> None:
        self.trajectory.steps.append(
            TrajectoryStep(
                action=action,
                observation=dict(data["observation"]),
                reward=data.get("reward"),
                done=bool(data.get("done", False)),
            )
        )

    # --- the Task API (plain HTTP, shared by both clients) ----------------------------------

    _task_env: str | None = None
    """The environment's name on the Task API's paths, from `GET /list_environments`."""


    def _task_request(self, call: str, env_name: str, **fields: Any) -> tuple[str, str, dict[str, Any] | None]:
        """Method, URL and JSON body of one Task API request, e.g. `("POST", ".../wordle/task", {...})`."""
        if call == "splits":
            return "GET", f"{self._base_url}/{quote(env_name, safe='')}/splits", None
        return "POST", f"{self._base_url}/{quote(env_name, safe='')}/{call}", {k: v for k, v in fields.items() if v is not None}

    @staticmethod
    def _task_fields(task_id: str | None, split: str | None, index: int | None) -> dict[str, Any]:
        by_position = split is not None and index is not None
        if (task_id is not None) == by_position or (task_id is not None and (split, index) != (None, None)):
            raise ValueError("task() takes a task id (task('fizzbuzz')), or split= and index= (task(split='test', index=3))")
        return {"id": task_id, "split": split, "index": index}

    @staticmethod
    def _env_name_from(body: Any) -> str:
        if not (isinstance(body, list) and body and isinstance(body[0], str)):
            # not a typed error from the server: an answer this client cannot read
            raise TransportError(f"GET /list_environments answered {str(body)[:200]}, not a list of names")
        return body[0]

    @staticmethod
    def _parse_tasks(call: str, body: Any) -> Any:
        if call == "splits":
            return [TaskSplit.model_validate(s) for s in body]
        if call == "num_tasks":
            return int(body["num_tasks"])
        if call == "task":
            return ServedTask.model_validate(body["task"])
        return [ServedTask.model_validate(t) for t in body["tasks"]]

    def _schema_from(self, data: Any) -> SchemaResponse:
        try:
            return SchemaResponse.model_validate(data)
        except ValidationError as e:
            raise TransportError(f"{self._where()}/schema is malformed: {validation_message(e)}") from e


_OBSERVATION_OF: dict[type[Action], type[Observation]] = {
    ToolCallAction: CallToolObservation,
    CallToolAction: CallToolObservation,
    ListToolsAction: ListToolsObservation,
}
"""The observation model a tool-call action's reply is parsed with."""


def _tool_action_model(action: Mapping[str, Any], action_model: type[Action]) -> type[Action] | None:
    """The tool-call action model a dict spells, as the server reads it; None for a plain action."""
    kind = action.get("type")
    if kind == "list_tools" and "type" not in action_model.model_fields:
        return ListToolsAction
    if kind == "call_tool" and "type" not in action_model.model_fields:
        return CallToolAction
    if "tool" in action and "tool" not in action_model.model_fields:
        return ToolCallAction
    return None


def json_or_text(body: bytes, what: str) -> Any:
    """A reply body's JSON, or its text when it is not JSON (an error page).

    Raises:
        TransportError: the JSON nests deeper than the parser goes."""
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace")
    except RecursionError:
        raise TransportError(f"{what}: the reply's JSON is nested too deep to read") from None


def http_error(status: int, body: Any, what: str) -> ServerError:
    """A server's HTTP error (`{"detail": {"message", "code", ...}}`) as the error tree."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict) and "code" in detail:
        return server_error(detail)
    return ServerError(f"{what} answered HTTP {status}: {str(body)[:300]}", code=f"HTTP_{status}")
