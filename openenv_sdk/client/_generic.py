"""`GenericEnvClient` / `AsyncGenericEnvClient`: dict actions checked against the server's `/schema`.

No environment package is needed: on first `step` the client fetches `/schema` and validates
each action with `jsonschema` before it is sent, so a bad action fails with the field it names
(`action.message: 'message' is a required property`). Tool-call actions (`{"tool": ..., "arguments":
...}`, `{"type": "call_tool", "tool_name": ..., ...}`, `{"type": "list_tools"}`) are checked for
their shape only: an unknown tool or bad arguments come back as the observation's typed `error`,
as the same call over MCP comes back as an `isError` result (one vocabulary: docs/errors.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from .._suggest import did_you_mean
from ..errors import InvalidActionError
from ..types import Action, Observation, SchemaResponse, State
from ._async import AsyncEnvClient
from ._options import ClientOptions
from ._sync import EnvClient

__all__ = ["ActionValidator", "AsyncGenericEnvClient", "GenericEnvClient"]


def _path(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts)


class ActionValidator:
    """Checks dict actions against a server's `/schema` (action schema and tool input schemas)."""

    def __init__(self, schema: SchemaResponse) -> None:
        from jsonschema import Draft202012Validator

        self.action_schema = schema.action
        self._action = Draft202012Validator(schema.action)
        self.tools = {tool.name: tool for tool in schema.tools}
        self._action_fields = set((schema.action.get("properties") or {}).keys())

    def tool_call(self, action: Mapping[str, Any]) -> tuple[str, str, Any] | None:
        """`(name_key, name, arguments)` when `action` spells a tool call, else None."""
        kind = action.get("type")
        if "type" not in self._action_fields:
            if kind == "list_tools":
                return ("type", "", None)
            if kind == "call_tool":
                return ("tool_name", action.get("tool_name"), action.get("arguments", {}))  # type: ignore[return-value]
        if "tool" in action and "tool" not in self._action_fields and self.tools:
            return ("tool", action.get("tool"), action.get("arguments", {}))  # type: ignore[return-value]
        return None

    def validate(self, action: Mapping[str, Any]) -> None:
        """Raises `InvalidActionError` naming every bad field (`action.<path>: <why>`).

        A tool call is checked for its shape only (a name, an object of arguments): an unknown
        tool or arguments that fail the tool's schema are the agent's mistakes, which the server
        reports in the observation (`error.error_type` `tool_not_found` / `invalid_args`), as
        it does for the same call over MCP (docs/errors.md).
        """
        call = self.tool_call(action)
        if call is None:
            self._raise_if_errors(self._errors(self._action, action, self.action_schema, ["action"]), "action")
            return
        name_key, name, arguments = call
        if name_key == "type":  # list_tools
            return
        errors: list[dict[str, Any]] = []
        if not isinstance(name, str):
            errors.append({"loc": ["action", name_key], "msg": "the tool's name must be a string", "type": "type"})
        elif not isinstance(arguments, Mapping):
            errors.append({"loc": ["action", "arguments"], "msg": "arguments must be an object", "type": "type"})
        self._raise_if_errors(errors, f"tool call {name!r}")

    def _errors(
        self, validator: Any, instance: Any, schema: dict[str, Any], prefix: list[Any]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for error in sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path]):
            loc = [*prefix, *error.absolute_path]
            message = error.message
            if error.validator == "required":
                instance = error.instance if isinstance(error.instance, Mapping) else {}
                for name in [p for p in error.validator_value if p not in instance]:
                    if message == f"{name!r} is a required property":
                        loc = [*loc, name]
                        break
            elif error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
                allowed = sorted((error.schema.get("properties") or {}).keys())
                extras = [k for k in error.instance if k not in allowed]
                for extra in extras:
                    out.append(
                        {
                            "loc": [*loc, extra],
                            "msg": f"unexpected field {extra!r}.{did_you_mean(str(extra), allowed)} "
                            f"Allowed: {allowed}",
                            "type": "additionalProperties",
                        }
                    )
                continue
            out.append({"loc": loc, "msg": message, "type": str(error.validator)})
        return out

    @staticmethod
    def _raise_if_errors(errors: list[dict[str, Any]], what: str) -> None:
        if errors:
            message = "; ".join(f"{_path(e['loc'])}: {e['msg']}" for e in errors)
            raise InvalidActionError(message, code="VALIDATION_ERROR", details={"errors": errors, "checked": what})


class _GenericMixin:
    """Dict actions and observations for either client; the shared bits only."""

    _generic: ClassVar[bool] = True
    _options: ClientOptions
    _schema: SchemaResponse | None
    _validator: Any

    def _resolve_models(self) -> Any:
        from ._base import _Models

        return _Models(Action, Observation, State)

    def _encode_action(self, action: Any) -> tuple[dict[str, Any], type[Any]]:
        if isinstance(action, BaseModel):
            action = action.model_dump(mode="json")
        if not isinstance(action, Mapping):
            raise TypeError(f"step() takes a dict action, got {type(action).__name__}")
        payload = dict(action)
        if self._options.validate_actions and self._schema is not None:
            if self._validator is None:
                self._validator = ActionValidator(self._schema)
            self._validator.validate(payload)
        return payload, dict


class GenericEnvClient(_GenericMixin, EnvClient[Any, Any, Any]):
    """A blocking client for any environment server, with plain dict actions and observations.

    `reset`/`step` return `StepResult[dict]`, `state()` a dict. Each action is checked against
    the server's `/schema` before it is sent (`validate_actions=False` skips that, e.g. for a
    server without `/schema`).

    Example:
        >>> with GenericEnvClient("http://127.0.0.1:8000") as env:  # doctest: +SKIP
        ...     env.reset()
        ...     env.step({"message": "hi"})
    """

    def step(self, action: Mapping[str, Any]) -> Any:
        """Apply one dict action, checked against `/schema` first.

        Raises:
            InvalidActionError: the action fails the action schema, or a tool call has no
                string name or non-object arguments; the message names each bad field
                (`action.message: ...`). An unknown tool or bad arguments are the
                observation's `error` (`tool_not_found`, `invalid_args`), as the server says.
        """
        if self._options.validate_actions:
            self.schema()
        return EnvClient.step(self, action)


class AsyncGenericEnvClient(_GenericMixin, AsyncEnvClient[Any, Any, Any]):
    """The asyncio twin of `GenericEnvClient`."""

    async def step(self, action: Mapping[str, Any]) -> Any:
        """Apply one dict action, checked against `/schema` first. See `GenericEnvClient.step`."""
        if self._options.validate_actions:
            await self.schema()
        return await AsyncEnvClient.step(self, action)
