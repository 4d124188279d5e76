"""What a session's verbs read off the wire and write onto it: tool-call actions in every accepted
spelling, `reset`'s keyword arguments, the observation reply, and a tool result within its bound."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..environment import Environment
from ..types import Action, CallToolAction, ErrorCode, ListToolsAction, Observation, ToolCallAction
from ._protocol import RequestRefused
from ._transcript import cut

__all__ = ["accepted_kwargs", "cap_result", "parse_tool_action", "serialize_observation"]


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
        raise RequestRefused.from_validation(e, "Invalid tool-call action") from e
    if _takes_tool_calls(env_cls):
        raise RequestRefused(
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
        raise RequestRefused(
            ErrorCode.EXECUTION_ERROR, f"reset/step must return an Observation, got {type(obs).__name__}"
        )
    # `model_dump`'s own call, one frame fewer (the hot path)
    body = obs.__pydantic_serializer__.to_python(obs, mode="json", exclude=_NOT_IN_BODY)
    out: dict[str, Any] = {"observation": body, "reward": obs.reward, "done": obs.done}
    if obs.metadata:
        out["metadata"] = body["metadata"]
    return out


_NOT_IN_BODY = {"done", "reward"}  # never changed


def accepted_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`reset`'s keyword arguments that `fn` takes; `VALIDATION_ERROR` for a set one it does not."""
    names, var_kw = _signature_info(getattr(fn, "__func__", fn))
    if var_kw:
        return kwargs
    unknown = [k for k, v in kwargs.items() if k not in names and v is not None]
    if unknown:
        accepted = sorted(names - {"self"})
        raise RequestRefused(
            ErrorCode.VALIDATION_ERROR,
            f"reset got unknown field(s) {unknown}; this environment's reset accepts {accepted}",
        )
    return {k: v for k, v in kwargs.items() if k in names}


def cap_result(result: dict[str, Any], name: str, max_bytes: int) -> dict[str, Any]:
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
        text = cut(text, max_bytes, f"result of tool {name!r}")
    return {"content": [{"type": "text", "text": text}], "isError": result.get("isError", False)}


_TAKES_TOOL_CALLS: dict[type, bool] = {}  # per environment class; classes are few and live on


def _takes_tool_calls(env_cls: type[Environment[Any, Any, Any]]) -> bool:
    """`env_cls.handles_tool_calls_in_step()`, once per class (it walks the MRO; every step asks)."""
    known = _TAKES_TOOL_CALLS.get(env_cls)
    if known is None:
        known = _TAKES_TOOL_CALLS[env_cls] = env_cls.handles_tool_calls_in_step()
    return known


@functools.lru_cache(maxsize=256)
def _signature_info(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    params = inspect.signature(fn).parameters.values()
    return frozenset(p.name for p in params), any(p.kind is p.VAR_KEYWORD for p in params)
