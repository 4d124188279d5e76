"""Sessions: one environment instance each, and the manager that creates, finds and reaps them."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import inspect
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from ..environment import Environment
from ..tools import ToolSpec, error_result, tool_result, validation_message
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
    ToolError,
    ToolErrorType,
)
from ._protocol import ProtocolError

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["Session", "SessionManager"]


def did_you_mean(name: str, options: Any) -> str:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


class Session:
    """One episode's environment instance and what the server knows of it."""

    __slots__ = (
        "id",
        "mcp_token",
        "env",
        "kind",
        "last_active",
        "_lock",
        "_executor",
        "_manager",
        "on_reap",
        "has_reset",
        "transcript",
        "closed",
    )

    def __init__(self, manager: SessionManager, session_id: str, env: Environment[Any, Any, Any], kind: str) -> None:
        self.id = session_id
        self.mcp_token = secrets.token_urlsafe(24)
        self.env = env
        self.kind = kind
        self.last_active = time.monotonic()
        self._lock: asyncio.Lock | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._manager = manager
        self.on_reap: Callable[[], Awaitable[None]] | None = None
        self.has_reset = False
        self.transcript: list[dict[str, Any]] = []
        self.closed = False

    # --- running environment code -----------------------------------------------------

    @property
    def lock(self) -> asyncio.Lock:
        """Serialises calls into one environment (an orchestrator step and an agent's MCP call)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        env_cls = type(self.env)
        if not env_cls.BLOCKING:
            return fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        if env_cls.THREAD_AFFINITY:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"openenv-{self.id[:8]}")
            executor: ThreadPoolExecutor | None = self._executor
        else:
            executor = self._manager.executor
        return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))

    def touch(self) -> None:
        self.last_active = time.monotonic()

    # --- the orchestrator's verbs -----------------------------------------------------

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
            obs = await self._call_env(fn, **kwargs)
            self.has_reset = True
            self.transcript = []
        return serialize_observation(obs)

    def require_reset(self, what: str) -> None:
        if not self.has_reset:
            raise ProtocolError(ErrorCode.NOT_RESET, f"{what} before reset: call reset first to start an episode")

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
        async with self.lock:
            obs = await self._call_env(fn, action)
        return serialize_observation(obs)

    async def step_tool(self, action: Action) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=[spec.schema() for spec in type(self.env).tool_specs.values()])
        assert isinstance(action, ToolCallAction | CallToolAction)
        name = action.tool if isinstance(action, ToolCallAction) else action.tool_name
        outcome = await self.call_tool(name, action.arguments, source="step")
        state = self.env.state
        if hasattr(state, "step_count"):
            state.step_count += 1
        error = outcome.get("_error")
        return CallToolObservation(
            tool_name=name,
            result=None if error else outcome,
            error=error,
            done=bool(self.env.episode_done),
        )

    async def state(self) -> dict[str, Any]:
        state = self.env.state
        if inspect.isawaitable(state):
            state = await state
        return state.model_dump(mode="json") if hasattr(state, "model_dump") else dict(state or {})

    async def call(self, name: str, arguments: dict[str, Any] | None) -> Any:
        """An orchestrator-only call (`@orchestrator` methods, and `transcript`)."""
        if name == "transcript":
            return list(self.transcript)
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
            result = await self._call_env(fn, **arguments)
        return result.model_dump(mode="json") if hasattr(result, "model_dump") else result

    async def call_tool(self, name: str, arguments: dict[str, Any] | None, *, source: str) -> dict[str, Any]:
        """Run one tool. Returns MCP `CallToolResult` JSON; a failure is a result with
        `isError: true` and a `_error` ToolError (for `step`), never an exception, except for an
        unknown tool called over MCP, which raises `ProtocolError(VALIDATION_ERROR)` (MCP answers
        it as a protocol error, -32602, as the MCP spec says), and a call before reset."""
        self.require_reset(f"tool call {name!r}")
        specs = type(self.env).tool_specs
        spec = specs.get(name)
        if spec is None:
            message = f"Unknown tool {name!r}.{did_you_mean(name, specs)} Available: {sorted(specs)}"
            if source == "step":
                return {"_error": ToolError(error_type=ToolErrorType.TOOL_NOT_FOUND, message=message)}
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
                value = await asyncio.wait_for(self._run(fn, **kwargs), timeout=timeout_s)
            except TimeoutError:
                message = f"Tool {name!r} timed out after {timeout_s:g} s"
                return self._tool_failure(name, arguments, source, ToolErrorType.TIMEOUT, message)
            except Exception as e:  # a failing tool is a result the agent sees
                message = f"Tool {name!r} failed: {type(e).__name__}: {e}"
                return self._tool_failure(name, arguments, source, ToolErrorType.EXECUTION_ERROR, message)
        try:
            result = tool_result(value)
        except (TypeError, ValueError) as e:
            message = f"Tool {name!r} returned a value that is not JSON: {e}"
            return self._tool_failure(name, arguments, source, ToolErrorType.EXECUTION_ERROR, message)
        self._record(name, arguments, result["content"][0]["text"], None, source)
        return result

    def _tool_failure(
        self, name: str, arguments: dict[str, Any] | None, source: str, kind: ToolErrorType, message: str
    ) -> dict[str, Any]:
        self._record(name, arguments, None, message, source)
        result = error_result(message)
        result["_error"] = ToolError(error_type=kind, message=message)
        return result

    def _record(self, name: str, arguments: Any, output: str | None, error: str | None, source: str) -> None:
        if len(self.transcript) < self._manager.max_transcript:
            self.transcript.append(
                {"tool": name, "arguments": arguments, "output": output, "error": error, "source": source}
            )

    async def _call_env(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.touch()
        try:
            return await self._run(fn, *args, **kwargs)
        except ProtocolError:
            raise
        except ValidationError as e:
            raise ProtocolError.from_validation(e, f"{fn.__name__} built an invalid model") from e
        except Exception as e:
            logger.warning("session %s: %s raised %s: %s", self.id[:8], fn.__name__, type(e).__name__, e)
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"{fn.__name__} raised {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        env = self.env
        try:
            fn = env.close_async if _overrides(env, "close_async") else env.close  # type: ignore[attr-defined]
            await self._run(fn)
        except Exception as e:  # close must not take the server down
            logger.warning("session %s: close() raised %s: %s", self.id[:8], type(e).__name__, e)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False)


def _overrides(env: Environment[Any, Any, Any], name: str) -> bool:
    return callable(getattr(type(env), name, None))


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
        if "tool" in data and (env_cls.tool_specs or env_cls.handles_tool_calls_in_step()):
            if "tool" in env_cls.action_type.model_fields:
                return None
            return ToolCallAction.model_validate(data)
    except ValidationError as e:
        raise ProtocolError.from_validation(e, "Invalid tool-call action") from e
    if env_cls.handles_tool_calls_in_step():
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
    """Creates sessions up to a capacity, finds them by id or MCP token, and reaps idle ones."""

    def __init__(
        self,
        env_factory: Callable[[], Environment[Any, Any, Any]],
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        tool_timeout_s: float,
        max_workers: int = 64,
        max_transcript: int = 10_000,
    ) -> None:
        self.env_factory = env_factory
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.max_transcript = max_transcript
        self.sessions: dict[str, Session] = {}
        self.by_token: dict[str, Session] = {}
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="openenv-env")
        self._reaper: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        return len(self.sessions)

    async def create(self, kind: str) -> Session:
        if len(self.sessions) >= self.max_sessions:
            raise ProtocolError(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(self.sessions)} of {self.max_sessions} sessions in use",
                details={"active_sessions": len(self.sessions), "max_sessions": self.max_sessions},
            )
        session_id = secrets.token_hex(16)
        try:
            env = self.env_factory()
        except Exception as e:
            raise ProtocolError(
                ErrorCode.FACTORY_ERROR, f"Could not create the environment: {type(e).__name__}: {e}"
            ) from e
        session = Session(self, session_id, env, kind)
        self.sessions[session_id] = session
        self.by_token[session.mcp_token] = session
        return session

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            reaped = f", reaped after {self.idle_timeout_s:g} s idle" if self.idle_timeout_s is not None else ""
            raise ProtocolError(
                ErrorCode.SESSION_NOT_FOUND,
                f"No session {session_id!r}: it was closed{reaped}, or never existed. "
                f"Create one with POST /sessions or POST /reset.",
            )
        return session

    def get_by_token(self, token: str) -> Session | None:
        return self.by_token.get(token)

    async def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        self.by_token.pop(session.mcp_token, None)
        await session.aclose()

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def start_reaper(self) -> None:
        if self.idle_timeout_s is not None and self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_forever(), name="openenv-idle-reaper")

    async def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None

    async def _reap_forever(self) -> None:
        assert self.idle_timeout_s is not None
        interval_s = max(0.05, min(self.idle_timeout_s / 4, 30.0))
        while True:
            await asyncio.sleep(interval_s)
            await self.reap_idle()

    async def reap_idle(self) -> int:
        """Close sessions idle for longer than `idle_timeout_s`; returns how many."""
        if self.idle_timeout_s is None:
            return 0
        deadline = time.monotonic() - self.idle_timeout_s
        idle = [s for s in self.sessions.values() if s.last_active < deadline and not (s._lock is not None and s._lock.locked())]
        for session in idle:
            logger.info("session %s: reaped after %.0f s idle", session.id[:8], self.idle_timeout_s)
            if session.on_reap is not None:
                with contextlib.suppress(Exception):
                    await session.on_reap()
            await self.close(session.id)
        return len(idle)
