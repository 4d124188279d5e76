"""`ToolOutcome`: what one tool call came to, as the session hands it to `step` and to MCP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ToolFailure
from ..tools import error_result
from ..types import ToolError, ToolErrorType

__all__ = ["ToolOutcome", "raised"]


def raised(name: str, error: Exception) -> tuple[ToolErrorType, str]:
    """The failure type and the agent's text for an exception that tool `name` raised.

    `ToolFailure` is written for the agent: its message and its `error_type`, no class name.
    Anything else is `execution_error`, with its class name (`ValueError: ...`).
    """
    if isinstance(error, ToolFailure):
        return error.error_type, f"Tool {name!r} failed: {error}"
    return ToolErrorType.EXECUTION_ERROR, f"Tool {name!r} failed: {type(error).__name__}: {error}"


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call's result, and its failure when it failed.

    A failing tool is an outcome, not an exception: the agent sees `result` (`isError: true`),
    and `step` sees `error`.
    """

    result: dict[str, Any]
    """MCP's `CallToolResult` as JSON, plus `data` (the tool's value) when it was kept."""
    error: ToolError | None = None
    """Why the call failed; None when it succeeded."""

    @classmethod
    def failure(cls, kind: ToolErrorType, message: str) -> ToolOutcome:
        """A failed call: `message` as an `isError` result and as a `ToolError` of `kind`."""
        return cls(error_result(message), ToolError(error_type=kind, message=message))

    @property
    def outcome(self) -> str:
        """`ok`, or the failure's `ToolErrorType` value (the metrics' label)."""
        return "ok" if self.error is None else self.error.error_type.value

    def step_result(self) -> dict[str, Any] | None:
        """`CallToolObservation.result`: the result with `data`, None when the call failed."""
        return None if self.error is not None else self.result

    def mcp_result(self) -> dict[str, Any]:
        """MCP's `CallToolResult` JSON, without `data` (which only `step` carries)."""
        return {k: v for k, v in self.result.items() if k != "data"}
