"""`Session`: one episode's environment instance, and the verbs the server's routes call on it.

The verbs are the orchestrator's (`reset`, `step`, `state`, `call`) and the agent's tool calls:
`step_tool_call` (a tool call sent as a `step` action) and `mcp_tool_call` (over MCP). The rest
is split by job: where environment code runs (`_runner.py`), the agent's transcript
(`_transcript.py`), the wire shapes (`_wire.py`), and the sessions' manager (`_manager.py`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from .. import tracing
from .._suggest import did_you_mean
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
from ._outcome import ToolOutcome, raised
from ._protocol import RequestRefused
from ._runner import SessionRunner, is_coroutine_function
from ._transcript import Transcript, cut
from ._wire import accepted_kwargs, cap_result, parse_tool_action, serialize_observation
from ._worker import EnvironmentAborted, _own_cancellation, guard_async, guard_sync

if TYPE_CHECKING:
    from ..tools import ToolSpec
    from ._manager import SessionManager
    from ._protocols import Connection

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["Session"]


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _verb(call: str | None = None) -> Callable[[_F], _F]:
    """The last net under a session's public verb, and its report to the manager's observer.

    Whatever `BaseException` environment code raised past the finer handlers becomes
    `EXECUTION_ERROR`, never a dead task or server (a `CancelledError` of the server's own, a
    timeout or a shutdown, goes on). When the manager has an observer and `call` names the
    verb, its duration and outcome are reported: `ok`, the tool outcome, the refusal's code,
    or `error`. One wrapper, one coroutine frame per call (this is the step's hot path)."""

    def decorate(method: _F) -> _F:
        @functools.wraps(method)
        async def wrapper(self: Session, *args: Any, **kwargs: Any) -> Any:
            observer = self._manager.observer if call is not None else None
            started, outcome = (time.monotonic() if observer is not None else 0.0), "error"
            try:
                result = await method(self, *args, **kwargs)
                if observer is not None:
                    outcome = result.outcome if call == "tool" else "ok"  # a tool verb returns a ToolOutcome
                return result
            except RequestRefused as e:
                outcome = e.code.value.lower()
                raise
            except EnvironmentAborted as e:
                aborted = e
            except Exception:
                raise
            except BaseException as e:  # as `guard_async` maps it
                if isinstance(e, asyncio.CancelledError) and _own_cancellation():
                    raise
                aborted = EnvironmentAborted(e)
                aborted.__cause__ = e
            finally:
                if observer is not None:
                    tool = None
                    if call == "tool":
                        tool = args[0] if args and args[0] in type(self.env).tool_specs else "<unknown>"
                    observer.call_done(call or "", time.monotonic() - started, outcome, tool)
            logger.warning("session %s: the environment raised %s", self.id[:8], aborted)
            raise RequestRefused(ErrorCode.EXECUTION_ERROR, f"The environment raised {aborted}") from aborted

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
        "_runner",
        "_manager",
        "on_reap",
        "has_reset",
        "_transcript",
        "closed",
        "connection",
        "orphaned_at",
    )

    def __init__(self, manager: SessionManager, session_id: str, env: Environment[Any, Any, Any], kind: str) -> None:
        self.id = session_id
        self.mcp_token = secrets.token_urlsafe(24)
        self.env = env
        self.kind = kind
        self.created_at = self.last_active = time.monotonic()
        self._lock: asyncio.Lock | None = None
        self._runner = SessionRunner(session_id, type(env), manager)
        self._manager = manager
        self.on_reap: Callable[[], Awaitable[None]] | None = None
        self.has_reset = False
        self._transcript = Transcript(max_bytes=manager.config.max_transcript_bytes)
        self.closed = False
        self.connection: Connection | None = None
        """The HTTP connection that made the session and holds it (`POST /reset` without a
        session), until a request on another connection names it; None once it is anyone's."""
        self.orphaned_at: float | None = None
        """When `connection` closed with no other client holding the session (it is reaped
        `unreset_grace_s` later unless a request names it meanwhile)."""

    def __repr__(self) -> str:  # never the MCP token
        return f"<Session {self.id[:8]} {self.kind}{' reset' if self.has_reset else ''}>"

    @property
    def lock(self) -> asyncio.Lock:
        """Serialises calls into one environment (an orchestrator step and an agent's MCP call)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @property
    def in_call(self) -> bool:
        """Whether a call holds the environment now (the reaper leaves such a session alone)."""
        return self._lock is not None and self._lock.locked()

    @property
    def busy(self) -> bool:
        """Whether a call that timed out (or whose caller went away) still runs on this session's thread."""
        return self._runner.busy

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def named_on(self, connection: Connection | None) -> None:
        """A request named this session: from another connection than the one that made it, the
        session is that client's too, and outlives the first connection."""
        if self.connection is not None and connection is not self.connection:
            self.connection = None
            self.orphaned_at = None

    # --- the orchestrator's verbs -----------------------------------------------------

    @_verb("reset")
    async def reset(self, data: dict[str, Any] | None) -> dict[str, Any]:
        try:
            request = ResetRequest.model_validate(data or {})
        except ValidationError as e:
            raise RequestRefused.from_validation(e, "Invalid reset arguments") from e
        kwargs: dict[str, Any] = {"seed": request.seed, "episode_id": request.episode_id, **(request.model_extra or {})}
        env = self.env
        fn = env.reset_async if _overrides(env, "reset_async") else env.reset  # type: ignore[attr-defined]
        kwargs = accepted_kwargs(fn, kwargs)
        async with self.lock:
            obs = await self._call_env(fn, kwargs=kwargs)
            self.has_reset = True
            self._transcript.clear()
        return serialize_observation(obs)

    def require_reset(self, what: str) -> None:
        if not self.has_reset:
            raise RequestRefused(ErrorCode.NOT_RESET, f"{what} before reset: call reset first to start an episode")

    @_verb("step")
    async def step(self, data: dict[str, Any] | None) -> dict[str, Any]:
        if not self.has_reset:
            self.require_reset("step")
        if data is None:
            raise RequestRefused(ErrorCode.VALIDATION_ERROR, "step needs an action object in `data`")
        env = self.env
        plan = _STEP_PLANS.get(type(env)) or _step_plan(type(env))
        if "tool" in data or plan.tool_calls or data.get("type") in _TOOL_ACTION_TYPES:
            tool_action = parse_tool_action(type(env), data)
            if tool_action is not None:
                obs = await self.step_tool(tool_action)
                return serialize_observation(obs)
        try:
            action = plan.validate(data)
        except ValidationError as e:
            raise RequestRefused.from_validation(e, f"Invalid action for {type(env).__name__}") from e
        fn = getattr(env, plan.method)
        idle = self._lock is None or not self._lock.locked()
        if idle and plan.inline and getattr(fn, "__func__", None) is plan.function and not tracing.enabled():
            # a quick sync call runs to its end with no await: nothing else can enter the
            # environment meanwhile, so the lock (and the runner) would only cost time (the hot
            # path). No `touch`: both routes touched the session as the message came, in this
            # same turn of the loop, and nothing can read it before the call ends.
            try:
                obs = fn(action)  # `guard_sync(fn, action)`, one call fewer
            except RequestRefused:
                raise
            except Exception as e:
                raise self._env_failure(fn, e) from e
            except BaseException as e:  # as `guard_sync` maps it
                raise EnvironmentAborted(e) from e
            return serialize_observation(obs)
        if idle and not type(env).BLOCKING and not is_coroutine_function(fn):
            return serialize_observation(await self._call_env(fn, (action,)))
        async with self.lock:
            obs = await self._call_env(fn, (action,))
        return serialize_observation(obs)

    async def step_tool(self, action: Action) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=[spec.schema() for spec in type(self.env).tool_specs.values()])
        assert isinstance(action, ToolCallAction | CallToolAction)
        name = action.tool if isinstance(action, ToolCallAction) else action.tool_name
        outcome = await self.step_tool_call(name, action.arguments)
        state = guard_sync(getattr, self.env, "state")
        if hasattr(state, "step_count"):
            state.step_count += 1
        return CallToolObservation(
            tool_name=name,
            result=outcome.step_result(),
            error=outcome.error,
            done=bool(guard_sync(getattr, self.env, "episode_done")),
        )

    @_verb()
    async def state(self) -> dict[str, Any]:
        try:
            state = guard_sync(getattr, self.env, "state")
            if inspect.isawaitable(state):
                state = await guard_async(state)
            return state.model_dump(mode="json") if hasattr(state, "model_dump") else dict(state or {})
        except (RequestRefused, EnvironmentAborted):
            raise
        except Exception as e:
            raise RequestRefused(ErrorCode.EXECUTION_ERROR, f"state raised {type(e).__name__}: {e}") from e

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The agent's tool calls this episode, oldest first; when older calls were dropped to
        keep the transcript within `max_transcript_bytes`, a first entry says how many."""
        return self._transcript.entries()

    @_verb()
    async def call(self, name: str, arguments: dict[str, Any] | None) -> Any:
        """An orchestrator-only call (`@orchestrator` methods, and `transcript`)."""
        if name == "transcript":
            return self.transcript
        calls = type(self.env).orchestrator_calls
        if name not in calls:
            raise RequestRefused(
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
            raise RequestRefused(ErrorCode.VALIDATION_ERROR, f"Bad arguments for {name!r}: {e}") from e
        async with self.lock:
            result = await self._call_env(fn, kwargs=arguments)
        return result.model_dump(mode="json") if hasattr(result, "model_dump") else result

    # --- the agent's tool calls -------------------------------------------------------

    @_verb("tool")
    async def step_tool_call(self, name: str, arguments: dict[str, Any] | None) -> ToolOutcome:
        """Run one tool sent as a `step` action. Every failure is an outcome (a `ToolError`),
        an unknown tool included (`TOOL_NOT_FOUND`); a call before reset raises `NOT_RESET`."""
        self.require_reset(f"tool call {name!r}")
        spec = type(self.env).tool_specs.get(name)
        if spec is None:
            return ToolOutcome.failure(ToolErrorType.TOOL_NOT_FOUND, self._unknown_tool(name))
        return await self._run_tool(spec, name, arguments, "step")

    @_verb("tool")
    async def mcp_tool_call(self, name: str, arguments: dict[str, Any] | None) -> ToolOutcome:
        """Run one tool called over MCP. A failure is an outcome (an `isError: true` result),
        except an unknown tool, which raises `RequestRefused(VALIDATION_ERROR)` (MCP answers it as
        a protocol error, -32602, as the MCP spec says), and a call before reset (`NOT_RESET`)."""
        self.require_reset(f"tool call {name!r}")
        spec = type(self.env).tool_specs.get(name)
        if spec is None:
            raise RequestRefused(ErrorCode.VALIDATION_ERROR, self._unknown_tool(name), details={"tool": name})
        return await self._run_tool(spec, name, arguments, "mcp")

    def _unknown_tool(self, name: str) -> str:
        specs = type(self.env).tool_specs
        return f"Unknown tool {name!r}.{did_you_mean(name, specs)} Available: {sorted(specs)}"

    async def _run_tool(self, spec: ToolSpec, name: str, arguments: dict[str, Any] | None, source: str) -> ToolOutcome:
        """Run a known tool; a failure is an outcome, recorded in the transcript as from `source`."""
        try:
            kwargs = spec.validate_arguments(arguments or {})
        except ValidationError as e:
            message = f"Invalid arguments for tool {name!r}: {validation_message(e)}"
            return self._tool_failure(name, arguments, source, ToolErrorType.INVALID_ARGS, message)
        config = self._manager.config
        timeout_s = spec.timeout_s if spec.timeout_s is not None else config.tool_timeout_s
        fn = getattr(self.env, spec.method_name)
        async with self.lock:
            self.touch()
            try:
                value = await self._runner.run(fn, kwargs=kwargs, timeout_s=timeout_s, what=f"tool {name!r}")
            except RequestRefused:  # SESSION_BUSY
                raise
            except TimeoutError:
                message = f"Tool {name!r} timed out after {timeout_s:g} s"
                return self._tool_failure(name, arguments, source, ToolErrorType.TIMEOUT, message)
            except Exception as e:  # a failing tool is a result the agent sees (SystemExit included)
                return self._tool_failure(name, arguments, source, *raised(name, e))
        try:
            result = guard_sync(tool_result, value)
            if "structuredContent" in result:  # strict JSON: what MCP and `step` send must parse anywhere
                json.dumps(result["structuredContent"], allow_nan=False)
        except Exception as e:
            message = f"Tool {name!r} returned a value that is not JSON: {type(e).__name__}: {e}"
            return self._tool_failure(name, arguments, source, ToolErrorType.EXECUTION_ERROR, message)
        result = cap_result(result, name, config.max_tool_result_bytes)
        self._transcript.record(name, arguments, result["content"][0]["text"], None, source)
        return ToolOutcome(result)

    def _tool_failure(
        self, name: str, arguments: dict[str, Any] | None, source: str, kind: ToolErrorType, message: str
    ) -> ToolOutcome:
        message = cut(message, self._manager.config.max_tool_result_bytes, "error message")
        self._transcript.record(name, arguments, None, message, source)
        return ToolOutcome.failure(kind, message)

    # --- running environment code -----------------------------------------------------

    async def _call_env(
        self, fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self.touch()
        try:
            return await self._runner.run(fn, args, kwargs)
        except RequestRefused:
            raise
        except Exception as e:
            raise self._env_failure(fn, e) from e

    def _env_failure(self, fn: Callable[..., Any], e: Exception) -> RequestRefused:
        """What the client is told when environment code `fn` raised `e`."""
        if isinstance(e, ValidationError):
            return RequestRefused.from_validation(e, f"{fn.__name__} built an invalid model")
        logger.warning("session %s: %s raised %s: %s", self.id[:8], fn.__name__, type(e).__name__, e)
        return RequestRefused(ErrorCode.EXECUTION_ERROR, f"{fn.__name__} raised {type(e).__name__}: {e}")

    async def aclose(self) -> None:
        """Close the environment. When a call still runs on the session's thread, `close()`
        is queued behind it and not waited for; a `close()` that hangs is abandoned after
        `tool_timeout_s`."""
        if self.closed:
            return
        self.closed = True
        env = self.env
        try:
            fn = env.close_async if _overrides(env, "close_async") else env.close  # type: ignore[attr-defined]
            await self._runner.close(fn, timeout_s=self._manager.config.tool_timeout_s)
        except Exception as e:  # close must not take the server down
            logger.warning("session %s: close() raised %s: %s", self.id[:8], type(e).__name__, e)


def _overrides(env: Environment[Any, Any, Any], name: str) -> bool:
    """Whether `env`'s class has `name` (`step_async`, ...), once per class and name (a missing
    attribute costs a raised and caught `AttributeError`, and every step asks)."""
    key = (type(env), name)
    known = _OVERRIDES.get(key)
    if known is None:
        known = _OVERRIDES[key] = callable(getattr(type(env), name, None))
    return known


_OVERRIDES: dict[tuple[type, str], bool] = {}  # per environment class; classes are few and live on


class _StepPlan:
    """How `step` calls one environment class, worked out once per class (every step asks)."""

    __slots__ = ("method", "function", "inline", "tool_calls", "validate")

    def __init__(self, env_cls: type[Environment[Any, Any, Any]]) -> None:
        self.method = "step_async" if callable(getattr(env_cls, "step_async", None)) else "step"
        self.function = getattr(env_cls, self.method)
        self.inline = not env_cls.BLOCKING and not is_coroutine_function(self.function)
        """The class's method is sync and runs on the event loop: called in place, no runner."""
        self.tool_calls = env_cls.handles_tool_calls_in_step()
        """The class takes tool calls only: `parse_tool_action` reads (or refuses) every action.
        Otherwise only one that names a tool or a tool action type can be one."""
        model = env_cls.action_type
        # what `model_validate` calls, one frame fewer (a model not built yet: its own path)
        self.validate = model.__pydantic_validator__.validate_python if model.__pydantic_complete__ else model.model_validate


_STEP_PLANS: dict[type, _StepPlan] = {}  # per environment class; classes are few and live on
_TOOL_ACTION_TYPES = frozenset({"list_tools", "call_tool"})


def _step_plan(env_cls: type[Environment[Any, Any, Any]]) -> _StepPlan:
    plan = _STEP_PLANS[env_cls] = _StepPlan(env_cls)
    return plan
