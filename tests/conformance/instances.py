"""Minimal valid instances of JSON Schemas, and the actions the suite sends.

`minimal_instance(schema)` builds the smallest value that validates against a JSON Schema as
pydantic emits them (`$ref`/`$defs`, `anyOf`, `enum`, `const`, bounds). It fills only required
properties. `valid_action` and `invalid_action` turn a server's `/schema` (and its tool list)
into a `step` payload, whatever the environment is.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SchemaError", "invalid_action", "is_tool_action_schema", "minimal_instance", "valid_action"]

_SAMPLE_TEXT = "conformance"


class SchemaError(ValueError):
    """The schema cannot be instantiated by this generator (say which keyword, so it can be added)."""


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise SchemaError(f"only local $ref are supported, got {ref!r}")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
        if seen > 32:
            raise SchemaError(f"$ref cycle at {ref!r}")
    return schema


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None, _depth: int = 0) -> Any:
    """The smallest value valid against `schema` (only required properties are filled).

    Raises:
        SchemaError: the schema uses a construct the generator cannot satisfy (e.g. `pattern`).
    """
    root = schema if root is None else root
    if _depth > 16:
        raise SchemaError("schema nests deeper than 16 levels")
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(o, root) for o in schema[key]]
            non_null = [o for o in options if o.get("type") != "null"]
            return minimal_instance((non_null or options)[0], root, _depth + 1)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        return minimal_instance(merged, root, _depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {}), root, _depth + 1) for name in schema.get("required", [])}
    if kind == "array":
        prefix = schema.get("prefixItems")
        items = schema.get("items", {})
        if isinstance(items, list):  # draft 7 tuple form
            prefix, items = items, {}
        if prefix is not None:  # a tuple: every position is required
            return [minimal_instance(item, root, _depth + 1) for item in prefix]
        count = int(schema.get("minItems", 0))
        return [minimal_instance(items, root, _depth + 1) for _ in range(count)]
    if kind == "string":
        if "pattern" in schema:
            raise SchemaError(f"cannot generate a string matching pattern {schema['pattern']!r}")
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        text = _SAMPLE_TEXT.ljust(low, "x")
        return text[:high] if high is not None else text
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    raise SchemaError(f"unsupported schema type {kind!r}")


def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")

    def fits(x: float) -> bool:
        return (
            (minimum is None or x >= minimum)
            and (maximum is None or x <= maximum)
            and (above is None or x > above)
            and (below is None or x < below)
        )

    lows = [b for b in (minimum, above) if b is not None]
    highs = [b for b in (maximum, below) if b is not None]
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    value: float = 1
    if not fits(value):
        if low is not None and high is not None:
            value = (low + high) / 2
        elif low is not None:
            value = low + 1
        else:
            value = high - 1  # type: ignore[operator]
    if integer:
        value = math.floor(value) if fits(math.floor(value)) else math.ceil(value)
    if "multipleOf" in schema:
        step = schema["multipleOf"]
        value = math.ceil(value / step) * step
    if not fits(value):
        raise SchemaError(f"cannot find a {'integer' if integer else 'number'} within the bounds of {schema!r}")
    return int(value) if integer else float(value)


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
            raise SchemaError("the action is a tool call but the server lists no tools")
        first = tools[0]
        input_schema = first.get("inputSchema") or first.get("input_schema") or {"type": "object"}
        return {"type": "call_tool", "tool_name": first["name"], "arguments": minimal_instance(input_schema)}
    value = minimal_instance(action_schema)
    if not isinstance(value, dict):
        raise SchemaError(f"the action schema is not an object schema: {action_schema.get('type')!r}")
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
        raise SchemaError("the action schema requires nothing and allows any field: no action is invalid")
    action["__conformance_unknown_field__"] = 1
    return action
