"""`WS /ws`: one connection is one session.

Messages are OpenEnv's envelope `{"type": ..., "data": ..., "id"?: ...}`; every reply echoes
the request's `id`. Every bad message (not UTF-8, not JSON, nested too deep, too large, of an
unknown type) gets a typed `error` reply and the session goes on; the reply keeps the request's
`id` (for a message not parsed whole, when the id is its first key, its second after `type`, or
its last). A client that goes away while its call runs has the call cancelled after
`disconnect_grace_s` (at once when the server stops), and its session closed. A connection whose session
is not reset within `unreset_grace_s` is closed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import from_json, to_json
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from .. import tracing
from ..types import WS_REPLY_TYPE, ErrorCode, SessionInfo, WSRequest
from ._limits import check_json_text
from ._mcp_compat import handle_jsonrpc
from ._protocol import RequestRefused
from ._protocols import CHANNEL_KEY, OVERSIZE_KEY, ServerWebSocketProtocol, salvage_id
from ._tracing import handle_traced

if TYPE_CHECKING:
    from ..environment import Environment
    from ._session import Session
    from ._state import ServerState

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["serve_websocket"]


def _dump(kind: str, data: Any, request_id: str | int | None) -> str:
    message = {"type": kind, "data": data} if request_id is None else {"type": kind, "data": data, "id": request_id}
    try:
        return to_json(message).decode()  # pydantic-core's encoder: a fifth of json.dumps's time
    except ValueError:
        return json.dumps(message)  # what it cannot encode fails as it always did


async def serve_websocket(websocket: WebSocket, state: ServerState) -> None:
    """Accept one connection, hold its session until it closes, is reaped, or the server stops.

    The connection is served in a task of its own, awaited here: a coroutine that wakes
    resumes every coroutine that awaits it, and this one is awaited by the ASGI stack (a dozen
    middleware and routing frames), so each message would resume them all, twice. In its own
    task a message wakes the loop's few frames alone. Cancelling this coroutine cancels the
    task."""
    await asyncio.ensure_future(_serve(websocket, state))


async def _serve(websocket: WebSocket, state: ServerState) -> None:
    await websocket.accept()
    try:
        session = await state.sessions.create("ws")
    except RequestRefused as e:
        await websocket.send_text(_dump("error", e.payload(), None))
        await websocket.close(code=1013, reason=e.code.value)
        return

    async def on_reap() -> None:
        if session.has_reset:
            why = f"{state.sessions.idle_timeout_s:g} s idle"
        else:
            why = f"it was not reset within {state.sessions.unreset_grace_s:g} s (unreset_grace_s)"
        error = RequestRefused(ErrorCode.SESSION_ERROR, f"Session closed after {why}")
        if websocket.client_state is WebSocketState.CONNECTED:
            await websocket.send_text(_dump("error", error.payload(), None))
            await websocket.close(code=1001, reason="idle timeout")

    session.on_reap = on_reap
    max_bytes, max_depth = state.config.max_message_bytes, state.config.max_json_depth
    small = max_bytes // 4  # characters: at most 4 bytes each in UTF-8
    watch = _DropWatch(websocket, state.config.disconnect_grace_s)
    watched = _may_wait(state.env_cls)
    traced = tracing.enabled()  # decided when the app is made: once a connection is enough
    # The ASGI channel under starlette's `receive` and `send`: a text message in, a text reply
    # out, with the state bookkeeping they do done here (two coroutine calls a step fewer).
    receive: Callable[[], Awaitable[Any]] = websocket._receive
    send = websocket._send
    # Under our uvicorn protocol, the connection itself: a step's text comes as a `str` and its
    # reply's frame is written at once, with no ASGI event dicts (`ServerWebSocketProtocol`).
    channel = _channel(websocket)
    if channel is not None:
        receive = channel.receive_message
    try:
        while True:
            if watch.pending:  # what the watch read, through starlette
                message = watch.pending.pop()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
            else:
                message = await receive()
                if type(message) is str:  # the channel's text message
                    text = message
                elif message["type"] == "websocket.disconnect":
                    websocket.client_state = WebSocketState.DISCONNECTED
                    break
                else:
                    text = message.get("text")
            if text is None or len(text) > small or text.count("[") + text.count("{") > max_depth:
                # the checks in full: the text cannot be within the limits at a glance (a
                # message of text is UTF-8 already, and under `small` characters it is under
                # `max_bytes` bytes; with fewer brackets than `max_depth` it nests no deeper)
                raw = text.encode() if text is not None else (message.get("bytes") or b"")
                try:
                    if len(raw) > max_bytes or OVERSIZE_KEY in message:
                        oversize = message.get(OVERSIZE_KEY) or {"bytes": len(raw), "id": salvage_id(raw[:256], raw[-256:])}
                        error = _too_large(oversize["bytes"], max_bytes)
                        await websocket.send_text(_dump("error", error.payload(), oversize["id"]))
                        continue
                    text = check_json_text(raw, max_depth=max_depth)
                except RequestRefused as error:
                    await websocket.send_text(_dump("error", error.payload(), _salvage_id_of(raw)))
                    continue
            if traced:
                with watch:
                    reply, closing = await handle_traced(_handle, session, text, state)
            elif watched:
                with watch:
                    reply, closing = await _handle(session, text, state)
            else:  # calls that never wait cannot be cut short: no watch (the hot path)
                reply, closing = await _handle(session, text, state)
            if reply is not None:
                if websocket.application_state is not WebSocketState.CONNECTED:
                    await websocket.send_text(reply)  # refused as starlette refuses it (the reaper closed it)
                elif channel is not None and channel.send_text_now(reply):
                    pass
                else:
                    try:
                        await send({"type": "websocket.send", "text": reply})
                    except OSError:  # the client is gone (uvicorn's ClientDisconnected): the session ends
                        websocket.application_state = WebSocketState.DISCONNECTED
                        break
            if closing:
                await websocket.close(code=1000)
                break
    except WebSocketDisconnect:
        pass
    except RuntimeError as e:  # sending on a socket the reaper closed
        logger.debug("session %s: websocket ended: %s", session.id[:8], e)
    except asyncio.CancelledError:
        if not watch.cancelled_call:
            raise
        task = asyncio.current_task()
        if task is not None:  # ours, handled: the session's close below runs as usual
            task.uncancel()
        logger.info("session %s: the client went away during a call; the call was cancelled", session.id[:8])
    finally:
        session.on_reap = None  # the closure holds the session: no cycle left for the collector
        await state.sessions.close(session.id)


def _channel(websocket: WebSocket) -> ServerWebSocketProtocol | None:
    """The connection's `ServerWebSocketProtocol`, when it serves this socket and the app gets
    its `receive` unwrapped (no middleware reads the messages on the way); None otherwise (another
    server, or a wrapping middleware: the ASGI channel is used)."""
    ref = websocket.scope.get(CHANNEL_KEY)
    channel = ref() if ref is not None else None
    if isinstance(channel, ServerWebSocketProtocol) and websocket._receive == channel.receive:
        return channel
    return None


def _parse(text: str) -> tuple[str, dict[str, Any] | None, str | int | None]:
    """The envelope's `type`, `data` and `id`, as `WSRequest.model_validate_json` reads them. The
    common message (an object whose `type` is a string, `data` an object or null, `id` a string,
    a 64-bit int or null) is read by pydantic-core's JSON parser alone; pydantic validates
    everything else, so anything it would refuse or convert is refused or converted as before.

    Raises:
        ValidationError: what `WSRequest.model_validate_json` raises.
    """
    try:
        value = from_json(text)
    except ValueError:
        value = None
    if type(value) is dict:
        kind, data, request_id = value.get("type"), value.get("data"), value.get("id")
        if (
            type(kind) is str
            and (data is None or type(data) is dict)
            and (request_id is None or type(request_id) is str or (type(request_id) is int and _I64[0] <= request_id <= _I64[1]))
        ):
            return kind, data, request_id
    request = WSRequest.model_validate_json(text)
    return request.type, request.data, request.id


_I64 = (-(2**63), 2**63 - 1)


async def _handle(session: Session, text: str, state: ServerState) -> tuple[str | None, bool]:
    """One message in, one reply out (and whether the session ends)."""
    try:
        kind, body, request_id = _parse(text)
    except ValidationError as e:
        request_id = _salvage_id(text)
        if any(err["type"] == "json_invalid" for err in e.errors()):
            # pydantic's message already reads "Invalid JSON: <reason>"
            error = RequestRefused(ErrorCode.INVALID_JSON, e.errors()[0]["msg"])
        else:
            error = RequestRefused.from_validation(e, "Invalid message")
        return _dump("error", error.payload(), request_id), False
    session.last_active = time.monotonic()  # `session.touch()`, one call fewer (the hot path)
    try:
        if kind == "step":
            data: Any = await session.step(body)
        elif kind == "reset":
            data = await session.reset(body)
        elif kind == "state":
            data = await session.state()
        elif kind == "close":
            return None, True
        elif kind == "mcp":
            data = await handle_jsonrpc(body, session=session, env_cls=state.env_cls)
        elif kind == "session":
            data = SessionInfo(session_id=session.id, mcp_token=session.mcp_token).model_dump()
        elif kind == "call":
            call = body or {}
            name = call.get("name")
            if not isinstance(name, str):
                raise RequestRefused(ErrorCode.VALIDATION_ERROR, "call needs data.name (the orchestrator call)")
            data = {"name": name, "result": await session.call(name, call.get("arguments"))}
        elif kind in _SNAPSHOT_VERBS:  # orchestrator-only: checkpoint, restore, drop_checkpoint (_snapshots.py)
            data = await _snapshot_verb(kind, session, state, body)
        else:
            raise RequestRefused(
                ErrorCode.UNKNOWN_TYPE,
                f"Unknown message type {kind!r}; expected one of reset, step, state, close, mcp, session, call, "
                f"checkpoint, restore, drop_checkpoint",
            )
    except RequestRefused as e:
        return _dump("error", e.payload(), request_id), False
    return _dump(WS_REPLY_TYPE[kind], data, request_id), False


_SNAPSHOT_VERBS = frozenset({"checkpoint", "restore", "drop_checkpoint"})


async def _snapshot_verb(kind: str, session: Session, state: ServerState, data: dict[str, Any] | None) -> Any:
    from . import _snapshots  # imported on first use: most sessions never checkpoint

    if kind == "checkpoint":
        return await _snapshots.checkpoint(session, state, data)
    if kind == "restore":
        return await _snapshots.restore(session, state, data)
    return await _snapshots.drop_checkpoint(state, data)


_WATCH_AFTER_S = 0.05
"""A call that takes longer than this is watched for its client going away (quick calls, the
most, cost no watcher task)."""

_SERVER_STOPPING = 1012  # the close code uvicorn hands the app when the server shuts down


class _DropWatch:
    """While a call runs (`with watch:`), notices the client going away and, after the grace,
    cancels the connection's task (the call with it: a coroutine is cancelled, a call on a
    thread is abandoned and then ended by the session's `close`).

    The watcher reads the connection, so a message that arrives meanwhile is kept in `pending`
    for the loop (the watch then ends: a client that sends is there)."""

    __slots__ = ("_websocket", "_grace_s", "_timer", "_watcher", "_task", "pending", "cancelled_call")

    def __init__(self, websocket: WebSocket, grace_s: float) -> None:
        self._websocket = websocket
        self._grace_s = grace_s
        self._timer: asyncio.TimerHandle | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._task: asyncio.Task[Any] | None = None
        self.pending: list[Any] = []
        self.cancelled_call = False

    def __enter__(self) -> None:
        if not self.pending:
            self._task = asyncio.current_task()
            self._timer = asyncio.get_running_loop().call_later(_WATCH_AFTER_S, self._start)

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watcher is not None:
            self._watcher.cancel()  # a message it was handed stays queued for `receive`
            self._watcher = None

    def _start(self) -> None:
        self._timer = None
        self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        try:
            message = await self._websocket.receive()
        except (RuntimeError, WebSocketDisconnect):  # the socket ended under us: the loop will see it
            self._watcher = None
            return
        self._watcher = None
        self.pending.append(message)
        if message["type"] != "websocket.disconnect":
            return
        if message.get("code") != _SERVER_STOPPING:
            await asyncio.sleep(self._grace_s)
        if self._task is not None and not self._task.done():
            self.cancelled_call = True
            self._task.cancel()


_MAY_WAIT: dict[type, bool] = {}  # per environment class; classes are few and live on


def _may_wait(env_cls: type[Environment[Any, Any, Any]]) -> bool:
    """Whether a call into `env_cls` can wait (a `BLOCKING` class's calls run on threads; a
    coroutine runs on the loop): only such a call is watched for its client going away."""
    known = _MAY_WAIT.get(env_cls)
    if known is None:
        known = _MAY_WAIT[env_cls] = bool(env_cls.BLOCKING) or any(
            inspect.iscoroutinefunction(member) for _, member in inspect.getmembers(env_cls, callable)
        )
    return known


def _too_large(size: int, max_bytes: int) -> RequestRefused:
    return RequestRefused(
        ErrorCode.MESSAGE_TOO_LARGE,
        f"Message of {size} bytes exceeds the limit of {max_bytes} bytes (max_message_bytes)",
        details={"max_message_bytes": max_bytes, "message_bytes": size},
    )


def _salvage_id_of(raw: bytes) -> str | int | None:
    """The id of a message refused before it was parsed (not UTF-8, nested too deep)."""
    return salvage_id(raw[:256], raw[-256:])


def _salvage_id(text: str) -> str | int | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    request_id = value.get("id") if isinstance(value, dict) else None
    return request_id if isinstance(request_id, str | int) else None
