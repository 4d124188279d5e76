"""Sessions: one environment instance each, and the manager that creates, finds and reaps them."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import difflib
import functools
import inspect
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from .. import tracing
from ..environment import Environment
from ..tools import tool_result, validation_message
from ..types import (
    Action,
    CallToolAction,
    CallToolObservation,
    ErrorCode,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    ResetRequest,
    ToolCallAction,
    ToolErrorType,
)
from ._outcome import ToolOutcome
from ._protocol import ProtocolError
from ._worker import (
    AbandonedCalls,
    Call,
    CallRunner,
    EnvironmentAborted,
    LoopHandoff,
    SessionLane,
    SessionWorker,
    WorkerPool,
    guard_async,
    guard_sync,
)

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["Session", "SessionManager", "SessionObserver"]


def did_you_mean(name: str, options: Any) -> str:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _shielded(method: _F) -> _F:
    """The last net under a session's public verb: whatever `BaseException` environment code
    raised past the finer handlers becomes `EXECUTION_ERROR`, never a dead task or server."""

    @functools.wraps(method)
    async def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
        try:
            return await guard_async(method(self, *args, **kwargs))
        except EnvironmentAborted as e:
            logger.warning("session %s: the environment raised %s", self.id[:8], e)
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"The environment raised {e}") from e

    return wrapper  # type: ignore[return-value]


class SessionObserver(Protocol):
    """Told what sessions do (the server's `/metrics`). Every method is quick and never raises."""

    def session_opened(self, kind: str) -> None:
        """A session of this kind (`http`, `ws`) was created."""

    def session_closed(self, kind: str, reason: str) -> None:
        """A session ended: `closed` (by its client or the server) or `reaped` (idle)."""

    def call_done(self, call: str, seconds: float, outcome: str, tool: str | None) -> None:
        """A `reset`, `step` or `tool` call ended: `ok`, a tool error type, or a protocol error code
        (lowercase); `tool` is the tool's name, `<unknown>` for a name the environment lacks."""


def _observed(call: str) -> Callable[[_F], _F]:
    """Report the verb's duration and outcome to the manager's observer, when it has one."""

    def decorate(method: _F) -> _F:
        @functools.wraps(method)
        async def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
            observer = self._manager.observer
            if observer is None:
                return await method(self, *args, **kwargs)
            started, outcome = time.monotonic(), "error"
            try:
                result = await method(self, *args, **kwargs)
                outcome = result.outcome if isinstance(result, ToolOutcome) else "ok"
                return result
            except ProtocolError as e:
                outcome = e.code.value.lower()
                raise
            finally:
                tool = None
                if call == "tool":
                    tool = args[0] if args and args[0] in type(self.env).tool_specs else "<unknown>"
                observer.call_done(call, time.monotonic() - started, outcome, tool)

        return wrapper  # type: ignore[return-value]

    return decorate


class Session:
    """One episode's environment instance and what the server knows of it."""

    __slots__ = (
        "id",
        "mcp_token",
        "env",
        "kind",
        "created_at",
        "last_active",
        "_lock",
        "_worker",
        "_hung",
        "_hung_what",
        "_manager",
        "on_reap",
        "has_reset",
        "_transcript",
        "_transcript_bytes",
        "_transcript_dropped",
        "closed",
    )

    def __init__(self, manager: SessionManager, session_id: str, env: Environment[Any, Any, Any], kind: str) -> None:
        self.id = session_id
        self.mcp_token = secrets.token_urlsafe(24)
        self.env = env
        self.kind = kind
        self.created_at = self.last_active = time.monotonic()
        self._lock: asyncio.Lock | None = None
        self._worker: CallRunner | None = None
        self._hung: Call | None = None
        self._hung_what = ""
        self._manager = manager
        self.on_reap: Callable[[], Awaitable[None]] | None = None
        self.has_reset = False
        self._transcript: collections.deque[dict[str, Any]] = collections.deque()
        self._transcript_bytes = 0
        self._transcript_dropped = 0
        self.closed = False

    def __repr__(self) -> str:  # never the MCP token
        return f"<Session {self.id[:8]} {self.kind}{' reset' if self.has_reset else ''}>"

    # --- running environment code -----------------------------------------------------

    @property
    def lock(self) -> asyncio.Lock:
        """Serialises calls into one environment (an orchestrator step and an agent's MCP call)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @property
    def busy(self) -> bool:
        """Whether a call that timed out (or whose caller went away) still runs on this session's thread."""
        if self._hung is not None and self._hung.finished:
            self._hung = None
        return self._hung is not None

    def _check_not_busy(self) -> None:
        if self.busy:
            raise ProtocolError(
                ErrorCode.SESSION_BUSY,
                f"A previous call in this session ({self._hung_what}) is still running on its thread; "
                f"this session takes calls again once it ends (other sessions are not affected). "
                f"Close the session to start over in a new one.",
            )

    async def _run(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        what: str = "",
    ) -> Any:
        """Run environment code: a coroutine function on the event loop, a blocking sync one off
        it (on the server's worker pool, one call at a time per session; on the session's own
        thread with `THREAD_AFFINITY`). `TimeoutError` past `timeout_s`; a sync call left running
        (timed out, or its caller cancelled) quarantines the session until it ends."""
        kwargs = kwargs or {}
        if tracing.enabled():  # a span for the environment's code, on whichever thread runs it
            name = what or f"{getattr(fn, '__name__', 'call')}()"
            fn = tracing.wrap(fn, f"openenv.env {name}", {"openenv.session_id": self.id})
        if _is_coroutine_function(fn):
            if timeout_s is None:
                return await guard_async(fn(*args, **kwargs))
            return await asyncio.wait_for(guard_async(fn(*args, **kwargs)), timeout=timeout_s)
        if not type(self.env).BLOCKING:
            return guard_sync(fn, *args, **kwargs)
        what = what or f"{getattr(fn, '__name__', 'call')}()"
        self._check_not_busy()
        if self._worker is None:
            if type(self.env).THREAD_AFFINITY:
                self._worker = SessionWorker(f"openenv-{self.id[:8]}")
            else:  # no thread held between calls: 10,000 sessions need not hold 10,000 threads
                self._worker = SessionLane(self._manager.workers)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        call = Call(fn, args, kwargs, future, self._manager.handoff(loop))
        self._worker.start(call)
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, future)
        try:
            return await future
        except _Expired:
            self._abandon(call, f"{what}, which timed out after {timeout_s:g} s")
            raise TimeoutError(what) from None
        except asyncio.CancelledError:
            if not call.finished:
                self._abandon(call, f"{what}, whose caller went away")
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _abandon(self, call: Call, what: str) -> None:
        self._hung, self._hung_what = call, what
        self._manager.abandoned.add(call)
        logger.warning("session %s: %s; the session is busy until it ends", self.id[:8], what)

    def touch(self) -> None:
        self.last_active = time.monotonic()

    # --- the orchestrator's verbs -----------------------------------------------------

    @_shielded
    @_observed("reset")
    async def reset(self, data: dict[str, Any] | None) -> dict[str, Any]:
        try:
            request = ResetRequest.model_validate(data or {})
        except ValidationError as e:
            raise ProtocolError.from_validation(e, "Invalid reset arguments") from e
        kwargs: dict[str, Any] = {"seed": request.seed, "episode_id": request.episode_id, **(request.model_extra or {})}
        env = self.env
        fn = env.reset_async if _overrides(env, "reset_async") else env.reset  # type: ignore[attr-defined]
        kwargs = _accepted_kwargs(fn, kwargs)
        async with self.lock:
            obs = await self._call_env(fn, kwargs=kwargs)
            self.has_reset = True
            self._transcript.clear()
            self._transcript_bytes = self._transcript_dropped = 0
        return serialize_observation(obs)

    def require_reset(self, what: str) -> None:
        if not self.has_reset:
            raise ProtocolError(ErrorCode.NOT_RESET, f"{what} before reset: call reset first to start an episode")

    @_shielded
    @_observed("step")
    async def step(self, data: dict[str, Any] | None) -> dict[str, Any]:
        self.require_reset("step")
        if data is None:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, "step needs an action object in `data`")
        env = self.env
        tool_action = parse_tool_action(type(env), data)
        if tool_action is not None:
            obs = await self.step_tool(tool_action)
            return serialize_observation(obs)
        try:
            action = type(env).action_type.model_validate(data)
        except ValidationError as e:
            raise ProtocolError.from_validation(e, f"Invalid action for {type(env).__name__}") from e
        fn = env.step_async if _overrides(env, "step_async") else env.step  # type: ignore[attr-defined]
        if self._lock is None or not self._lock.locked():
            if not type(env).BLOCKING and not _is_coroutine_function(fn):
                # a quick sync call runs to its end with no await: nothing else can enter the
                # environment meanwhile, so the lock would only cost time (the hot path)
                return serialize_observation(await self._call_env(fn, (action,)))
        async with self.lock:
            obs = await self._call_env(fn, (action,))
        return serialize_observation(obs)

    async def step_tool(self, action: Action) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=[spec.schema() for spec in type(self.env).tool_specs.values()])
        assert isinstance(action, ToolCallAction | CallToolAction)
        name = action.tool if isinstance(action, ToolCallAction) else action.tool_name
        outcome = await self.call_tool(name, action.arguments, source="step")
        state = guard_sync(getattr, self.env, "state")
        if hasattr(state, "step_count"):
            state.step_count += 1
        return CallToolObservation(
            tool_name=name,
            result=outcome.step_result(),
            error=outcome.error,
            done=bool(guard_sync(getattr, self.env, "episode_done")),
        )

    @_shielded
    async def state(self) -> dict[str, Any]:
        try:
            state = guard_sync(getattr, self.env, "state")
            if inspect.isawaitable(state):
                state = await guard_async(state)
            return state.model_dump(mode="json") if hasattr(state, "model_dump") else dict(state or {})
        except (ProtocolError, EnvironmentAborted):
            raise
        except Exception as e:
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"state raised {type(e).__name__}: {e}") from e

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The agent's tool calls this episode, oldest first; when older calls were dropped to
        keep the transcript within `max_transcript_bytes`, a first entry says how many."""
        entries = list(self._transcript)
        if self._transcript_dropped:
            note = (
                f"{self._transcript_dropped} earlier tool call(s) were dropped: the transcript keeps at most "
                f"{self._manager.max_transcript_bytes} bytes and {self._manager.max_transcript} calls"
            )
            entries.insert(
                0,
                {"tool": None, "arguments": None, "output": None, "error": note, "source": "server",
                 "dropped": self._transcript_dropped},
            )
        return entries

    @_shielded
    async def call(self, name: str, arguments: dict[str, Any] | None) -> Any:
        """An orchestrator-only call (`@orchestrator` methods, and `transcript`)."""
        if name == "transcript":
            return self.transcript
        calls = type(self.env).orchestrator_calls
        if name not in calls:
            raise ProtocolError(
                ErrorCode.UNKNOWN_CALL,
                f"Unknown orchestrator call {name!r}.{did_you_mean(name, [*calls, 'transcript'])} "
                f"Available: {sorted([*calls, 'transcript'])}",
            )
        fn = getattr(self.env, calls[name])
        arguments = arguments or {}
        try:  # checked here: inside _call_env a TypeError would read as the call's own failure
            if not isinstance(arguments, dict):
                raise TypeError(f"arguments must be an object, got {type(arguments).__name__}")
            inspect.signature(fn).bind(**arguments)
        except TypeError as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"Bad arguments for {name!r}: {e}") from e
        async with self.lock:
            result = await self._call_env(fn, kwargs=arguments)
        return result.model_dump(mode="json") if hasattr(result, "model_dump") else result

    @_shielded
    @_observed("tool")
    async def call_tool(self, name: str, arguments: dict[str, Any] | None, *, source: str) -> ToolOutcome:
        """Run one tool. A failure is an outcome (an `isError: true` result and a `ToolError`),
        never an exception, except for an unknown tool called over MCP, which raises
        `ProtocolError(VALIDATION_ERROR)` (MCP answers it as a protocol error, -32602, as the MCP
        spec says), and a call before reset."""
        self.require_reset(f"tool call {name!r}")
        specs = type(self.env).tool_specs
        spec = specs.get(name)
        if spec is None:
            message = f"Unknown tool {name!r}.{did_you_mean(name, specs)} Available: {sorted(specs)}"
            if source == "step":
                return ToolOutcome.failure(ToolErrorType.TOOL_NOT_FOUND, message)
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, message, details={"tool": name})
        try:
            kwargs = spec.validate_arguments(arguments or {})
        except ValidationError as e:
            message = f"Invalid arguments for tool {name!r}: {validation_message(e)}"
            return self._tool_failure(name, arguments, source, ToolErrorType.INVALID_ARGS, message)
        timeout_s = spec.timeout_s if spec.timeout_s is not None else self._manager.tool_timeout_s
        fn = getattr(self.env, spec.method_name)
        async with self.lock:
            self.touch()
            try:
                value = await self._run(fn, kwargs=kwargs, timeout_s=timeout_s, what=f"tool {name!r}")
            except ProtocolError:  # SESSION_BUSY
                raise
            except TimeoutError:
                message = f"Tool {name!r} timed out after {timeout_s:g} s"
                return self._tool_failure(name, arguments, source, ToolErrorType.TIMEOUT, message)
            except Exception as e:  # a failing tool is a result the agent sees (SystemExit included)
                message = f"Tool {name!r} failed: {type(e).__name__}: {e}"
                return self._tool_failure(name, arguments, source, ToolErrorType.EXECUTION_ERROR, message)
        try:
            result = guard_sync(tool_result, value)
        except Exception as e:
            message = f"Tool {name!r} returned a value that is not JSON: {type(e).__name__}: {e}"
            return self._tool_failure(name, arguments, source, ToolErrorType.EXECUTION_ERROR, message)
        result = _cap_result(result, name, self._manager.max_tool_result_bytes)
        self._record(name, arguments, result["content"][0]["text"], None, source)
        return ToolOutcome(result)

    def _tool_failure(
        self, name: str, arguments: dict[str, Any] | None, source: str, kind: ToolErrorType, message: str
    ) -> ToolOutcome:
        message = _cut(message, self._manager.max_tool_result_bytes, "error message")
        self._record(name, arguments, None, message, source)
        return ToolOutcome.failure(kind, message)

    def _record(self, name: str, arguments: Any, output: str | None, error: str | None, source: str) -> None:
        """Keep the call in the transcript, within `max_transcript_bytes`: a big argument or output
        is cut (the entry says `"truncated": true`), and the oldest entries go first."""
        manager = self._manager
        budget = max(1024, manager.max_transcript_bytes // 4)  # one entry's share
        entry: dict[str, Any] = {"tool": name, "arguments": arguments, "output": output, "error": error, "source": source}
        size = _json_size(entry)
        if size > budget:
            entry = {
                "tool": name,
                "arguments": _shrink(arguments, budget // 4),
                "output": _cut(output, budget // 2, "output") if output is not None else None,
                "error": _cut(error, budget // 4, "error") if error is not None else None,
                "source": source,
                "truncated": True,
            }
            size = _json_size(entry)
            if size > budget:
                entry["arguments"] = {"_truncated": f"arguments of {_json_size(arguments)} bytes were not kept"}
                size = _json_size(entry)
        self._transcript.append(entry)
        self._transcript_bytes += size
        while self._transcript and (
            self._transcript_bytes > manager.max_transcript_bytes or len(self._transcript) > manager.max_transcript
        ):
            self._transcript_bytes -= _json_size(self._transcript.popleft())
            self._transcript_dropped += 1

    async def _call_env(
        self, fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self.touch()
        try:
            return await self._run(fn, args, kwargs)
        except ProtocolError:
            raise
        except ValidationError as e:
            raise ProtocolError.from_validation(e, f"{fn.__name__} built an invalid model") from e
        except Exception as e:
            logger.warning("session %s: %s raised %s: %s", self.id[:8], fn.__name__, type(e).__name__, e)
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"{fn.__name__} raised {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        """Close the environment. When a call still runs on the session's thread, `close()`
        is queued behind it and not waited for; a `close()` that hangs is abandoned after
        `tool_timeout_s`."""
        if self.closed:
            return
        self.closed = True
        env = self.env
        worker = self._worker
        try:
            fn = env.close_async if _overrides(env, "close_async") else env.close  # type: ignore[attr-defined]
            if self.busy and worker is not None:
                worker.submit(fn).add_done_callback(_consume)
            else:
                await self._run(fn, timeout_s=self._manager.tool_timeout_s, what="close()")
        except Exception as e:  # close must not take the server down
            logger.warning("session %s: close() raised %s: %s", self.id[:8], type(e).__name__, e)
        finally:
            if worker is not None:
                worker.shutdown()


class _Expired(Exception):
    """A blocking call's timer ran out before its thread answered (never leaves `Session._run`)."""


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def _consume(future: Any) -> None:
    """Read a left-behind future's outcome, so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, default=str).encode())
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


def _cut(text: str, max_bytes: int, what: str) -> str:
    """`text` within `max_bytes` of UTF-8, with a marker saying what was cut."""
    if len(text) * 4 <= max_bytes:
        return text
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    kept = raw[:max_bytes].decode("utf-8", errors="ignore")
    return f"{kept}\n[... {what} truncated by the server: {len(raw)} bytes, the limit is {max_bytes} ...]"


def _shrink(value: Any, max_string_bytes: int) -> Any:
    """`value` with every long string cut to `max_string_bytes`."""
    if isinstance(value, str):
        return _cut(value, max_string_bytes, "string")
    if isinstance(value, dict):
        return {k: _shrink(v, max_string_bytes) for k, v in value.items()}
    if isinstance(value, list):
        return [_shrink(v, max_string_bytes) for v in value]
    return value


def _cap_result(result: dict[str, Any], name: str, max_bytes: int) -> dict[str, Any]:
    """A tool result within `max_bytes` (its text and the copies of the value beside it, in
    `structuredContent` and `data`): past that, the copies are left out, and the text is cut,
    each with a marker saying so."""
    text = result["content"][0]["text"]
    size = len(text) if len(text) * 4 <= max_bytes else len(text.encode())
    copies = 1 + ("structuredContent" in result) + ("data" in result)
    if size * copies <= max_bytes:
        return result
    if size <= max_bytes:
        text += f"\n[... structured content of tool {name!r} left out by the server: over {max_bytes} bytes ...]"
    else:
        text = _cut(text, max_bytes, f"result of tool {name!r}")
    return {"content": [{"type": "text", "text": text}], "isError": result.get("isError", False)}


def _overrides(env: Environment[Any, Any, Any], name: str) -> bool:
    return callable(getattr(type(env), name, None))


_TAKES_TOOL_CALLS: dict[type, bool] = {}  # per environment class; classes are few and live on


def _takes_tool_calls(env_cls: type[Environment[Any, Any, Any]]) -> bool:
    """`env_cls.handles_tool_calls_in_step()`, once per class (it walks the MRO; every step asks)."""
    known = _TAKES_TOOL_CALLS.get(env_cls)
    if known is None:
        known = _TAKES_TOOL_CALLS[env_cls] = env_cls.handles_tool_calls_in_step()
    return known


def _is_coroutine_function(fn: Callable[..., Any]) -> bool:
    """`inspect.iscoroutinefunction`, once per function (every call into an environment asks)."""
    return _coroutine_function(getattr(fn, "__func__", fn))


@functools.lru_cache(maxsize=1024)
def _coroutine_function(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)


@functools.lru_cache(maxsize=256)
def _signature_info(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    params = inspect.signature(fn).parameters.values()
    return frozenset(p.name for p in params), any(p.kind is p.VAR_KEYWORD for p in params)


def _accepted_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    names, var_kw = _signature_info(getattr(fn, "__func__", fn))
    if var_kw:
        return kwargs
    unknown = [k for k, v in kwargs.items() if k not in names and v is not None]
    if unknown:
        accepted = sorted(names - {"self"})
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR,
            f"reset got unknown field(s) {unknown}; this environment's reset accepts {accepted}",
        )
    return {k: v for k, v in kwargs.items() if k in names}


def parse_tool_action(env_cls: type[Environment[Any, Any, Any]], data: dict[str, Any]) -> Action | None:
    """A tool-call action in any accepted spelling, or None when `data` is not one."""
    kind = data.get("type")
    try:
        if kind == "list_tools":
            return ListToolsAction.model_validate(data)
        if kind == "call_tool":
            return CallToolAction.model_validate(data)
        if "tool" in data and (env_cls.tool_specs or _takes_tool_calls(env_cls)):
            if "tool" in env_cls.action_type.model_fields:
                return None
            return ToolCallAction.model_validate(data)
    except ValidationError as e:
        raise ProtocolError.from_validation(e, "Invalid tool-call action") from e
    if _takes_tool_calls(env_cls):
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR,
            f"{env_cls.__name__} takes tool calls: send {{'tool': name, 'arguments': {{...}}}}; "
            f"tools: {sorted(env_cls.tool_specs)}",
        )
    return None


def serialize_observation(obs: Observation) -> dict[str, Any]:
    """OpenEnv's wire shape: the observation without done/reward, with reward, done and metadata
    beside it (metadata kept in both places, as OpenEnv does). The shape is `StepResult`'s; the
    observation model has validated every field already, so the dict is built directly (hot path)."""
    if not isinstance(obs, Observation):
        raise ProtocolError(
            ErrorCode.EXECUTION_ERROR, f"reset/step must return an Observation, got {type(obs).__name__}"
        )
    body = obs.model_dump(mode="json", exclude={"done", "reward"})
    out: dict[str, Any] = {"observation": body, "reward": obs.reward, "done": obs.done}
    if obs.metadata:
        out["metadata"] = body["metadata"]
    return out


class SessionManager:
    """Creates sessions up to a capacity, finds them by id or MCP token, and reaps idle ones.

    A session not reset within `unreset_grace_s` of its creation (`POST /sessions`, a WebSocket
    that only connects) is reaped then, not after `idle_timeout_s`; every session counts against
    `max_sessions`. While `max_abandoned_threads` calls that timed out still run, no session is
    created.
    """

    def __init__(
        self,
        env_factory: Callable[[], Environment[Any, Any, Any]],
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        tool_timeout_s: float,
        unreset_grace_s: float | None = 30.0,
        max_abandoned_threads: int = 64,
        max_transcript: int = 10_000,
        max_transcript_bytes: int = 4 * 1024 * 1024,
        max_tool_result_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.env_factory = env_factory
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.unreset_grace_s = unreset_grace_s
        self.max_transcript = max_transcript
        self.max_transcript_bytes = max_transcript_bytes
        self.max_tool_result_bytes = max_tool_result_bytes
        self.sessions: dict[str, Session] = {}
        self.by_token: dict[str, Session] = {}
        self.abandoned = AbandonedCalls(max_abandoned_threads)
        self.workers = WorkerPool()
        """The threads that run sessions' blocking sync calls (but `THREAD_AFFINITY` sessions')."""
        self._handoff: LoopHandoff | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.observer: SessionObserver | None = None
        """Told of sessions opened and closed and of every call (the server's metrics)."""

    @property
    def active(self) -> int:
        return len(self.sessions)

    def handoff(self, loop: asyncio.AbstractEventLoop) -> LoopHandoff:
        """The way back to `loop` for results of calls run on worker threads."""
        handoff = self._handoff
        if handoff is None or handoff.loop is not loop:
            handoff = self._handoff = LoopHandoff(loop)
        return handoff

    @property
    def unreset(self) -> int:
        """Sessions not reset yet (they count against `max_sessions`)."""
        return sum(1 for s in self.sessions.values() if not s.has_reset)

    async def create(self, kind: str) -> Session:
        if len(self.sessions) >= self.max_sessions:
            raise ProtocolError(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(self.sessions)} of {self.max_sessions} sessions in use",
                details={"active_sessions": len(self.sessions), "max_sessions": self.max_sessions},
            )
        if self.abandoned.full:
            raise ProtocolError(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {self.abandoned.count} calls that timed out still run on their threads "
                f"(max_abandoned_threads is {self.abandoned.limit}); new sessions wait until some end",
                details={"abandoned_threads": self.abandoned.count, "max_abandoned_threads": self.abandoned.limit},
            )
        session_id = secrets.token_hex(16)
        try:
            env = guard_sync(self.env_factory)
        except Exception as e:
            raise ProtocolError(
                ErrorCode.FACTORY_ERROR, f"Could not create the environment: {type(e).__name__}: {e}"
            ) from e
        session = Session(self, session_id, env, kind)
        self.sessions[session_id] = session
        self.by_token[session.mcp_token] = session
        if self.observer is not None:
            self.observer.session_opened(kind)
        return session

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            reaped = f", reaped after {self.idle_timeout_s:g} s idle" if self.idle_timeout_s is not None else ""
            raise ProtocolError(
                ErrorCode.SESSION_NOT_FOUND,
                f"No session {session_id[:64]!r}: it was closed{reaped}, or never existed. "
                f"Create one with POST /sessions or POST /reset.",
            )
        return session

    def get_by_token(self, token: str) -> Session | None:
        return self.by_token.get(token)

    async def close(self, session_id: str, *, reason: str = "closed") -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        self.by_token.pop(session.mcp_token, None)
        if self.observer is not None:
            self.observer.session_closed(session.kind, reason)
        await session.aclose()

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)
        self.workers.shutdown()

    def start_reaper(self) -> None:
        if (self.idle_timeout_s is not None or self.unreset_grace_s is not None) and self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_forever(), name="openenv-idle-reaper")

    async def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None

    async def _reap_forever(self) -> None:
        limits = [t for t in (self.idle_timeout_s, self.unreset_grace_s) if t is not None]
        interval_s = max(0.05, min(min(limits) / 4, 30.0))
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.reap_idle()
            except Exception:  # the reaper must outlive any one session's failure
                logger.exception("the idle reaper failed; it goes on")

    async def reap_idle(self) -> int:
        """Close sessions idle longer than `idle_timeout_s`, and sessions not reset within
        `unreset_grace_s` of their creation; returns how many."""
        now = time.monotonic()
        idle = []
        for s in list(self.sessions.values()):
            if s._lock is not None and s._lock.locked():
                continue
            if not s.has_reset and self.unreset_grace_s is not None and now - s.created_at > self.unreset_grace_s:
                idle.append((s, f"not reset within {self.unreset_grace_s:g} s"))
            elif self.idle_timeout_s is not None and now - s.last_active > self.idle_timeout_s:
                idle.append((s, f"{self.idle_timeout_s:g} s idle"))
        for session, why in idle:
            logger.info("session %s: reaped: %s", session.id[:8], why)
            if session.on_reap is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(session.on_reap(), timeout=5.0)
            await self.close(session.id, reason="reaped")
        return len(idle)

