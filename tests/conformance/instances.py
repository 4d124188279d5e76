"""The actions the suite sends, built from a server's `/schema` (and its tool list).

`valid_action` and `invalid_action` turn them into a `step` payload, whatever the environment
is. The values come from the SDK's schema sampler (`openenv_sdk.checks.sample_from_schema`, the
one `openenv validate` uses): the smallest value valid against a JSON Schema, required
properties only. A schema it cannot satisfy raises `SampleError` naming the keyword.
"""

from __future__ import annotations

from typing import Any

from openenv_sdk.checks import SampleError, sample_from_schema

__all__ = ["SampleError", "invalid_action", "is_tool_action_schema", "minimal_instance", "valid_action"]

minimal_instance = sample_from_schema  # the name test_websocket.py uses


def is_tool_action_schema(action_schema: dict[str, Any], tools: list[dict[str, Any]]) -> bool:
    """True when `step` takes tool calls: OpenEnv's `CallToolAction` schema (a `tool_name`
    field), or an action with no required fields of its own on a server that lists tools."""
    props = action_schema.get("properties", {})
    if "tool_name" in props:
        return True
    required = [name for name in action_schema.get("required", []) if name != "metadata"]
    return not required and bool(tools)


def valid_action(schema_doc: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A `step` payload the server should accept.

    Tool environments get OpenEnv's spelling of a call to their first tool,
    `{"type": "call_tool", "tool_name": ..., "arguments": {...}}`, with minimal arguments from
    the tool's input schema; other environments get a minimal instance of the action schema.
    """
    action_schema = schema_doc["action"]
    if is_tool_action_schema(action_schema, tools):
        if not tools:
            raise SampleError("the action is a tool call but the server lists no tools")
        first = tools[0]
        input_schema = first.get("inputSchema") or first.get("input_schema") or {"type": "object"}
        return {"type": "call_tool", "tool_name": first["name"], "arguments": sample_from_schema(input_schema)}
    value = sample_from_schema(action_schema)
    if not isinstance(value, dict):
        raise SampleError(f"the action schema is not an object schema: {action_schema.get('type')!r}")
    return value


def invalid_action(schema_doc: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A `step` payload that must fail validation: the valid action without its first required
    field, or, when nothing is required, with a field the schema forbids."""
    action = valid_action(schema_doc, tools)
    if action.get("type") == "call_tool":
        action.pop("tool_name")
        return action
    required = [name for name in schema_doc["action"].get("required", []) if name in action]
    if required:
        action.pop(required[0])
        return action
    if schema_doc["action"].get("additionalProperties", True) is not False:
        raise SampleError("the action schema requires nothing and allows any field: no action is invalid")
    action["__conformance_unknown_field__"] = 1
    return action
