"""Make a small value that satisfies a JSON Schema (for probing a server with a valid action)."""

from __future__ import annotations

from typing import Any

__all__ = ["SampleError", "sample_from_schema"]

_MAX_DEPTH = 12


class SampleError(ValueError):
    """The schema has a construct this sampler cannot satisfy (e.g. a `pattern`, or a cycle)."""


def sample_from_schema(schema: dict[str, Any], *, root: dict[str, Any] | None = None) -> Any:
    """A minimal value valid against `schema`: required properties only, defaults where given.

    Handles `$ref` into `$defs`/`definitions`, `anyOf`/`oneOf`/`allOf`, `enum`, `const`, and the
    length and range bounds of strings, numbers and arrays.

    Raises:
        SampleError: the schema needs something this sampler does not generate.
    """
    return _sample(schema, root if root is not None else schema, 0)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise SampleError(f"cannot follow the non-local $ref {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise SampleError(f"$ref {ref!r} points nowhere")
        node = node[part]
    if not isinstance(node, dict):
        raise SampleError(f"$ref {ref!r} is not a schema")
    return node


def _sample(schema: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SampleError("the schema nests too deeply (a recursive model?)")
    if schema is True or schema == {}:
        return "x"
    if not isinstance(schema, dict):
        raise SampleError(f"not a schema: {schema!r}")
    if "$ref" in schema:
        return _sample({**_resolve(schema["$ref"], root), **{k: v for k, v in schema.items() if k != "$ref"}},
                       root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = schema[key]
            # Prefer a concrete value to null, so the probe exercises the field.
            ordered = [o for o in options if o.get("type") != "null"] + [o for o in options if o.get("type") == "null"]
            return _sample(ordered[0], root, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part["$ref"], root) if "$ref" in part else part)
        return _sample(merged, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _sample(properties.get(name, {}), root, depth + 1) for name in schema.get("required", [])}
    if kind == "array":
        count = int(schema.get("minItems", 0))
        items = schema.get("items", {})
        return [_sample(items, root, depth + 1) for _ in range(count)]
    if kind == "string":
        if "pattern" in schema or "format" in schema and schema["format"] not in ("uri", "email", "date-time"):
            raise SampleError(f"cannot generate a string for pattern/format in {schema!r}")
        fixed = {"uri": "http://example.com", "email": "agent@example.com", "date-time": "2024-01-01T00:00:00Z"}
        if schema.get("format") in fixed:
            return fixed[schema["format"]]
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        text = "hello"
        if len(text) < low:
            text = text + "x" * (low - len(text))
        if high is not None:
            text = text[: int(high)]
        return text
    if kind in ("integer", "number"):
        value: float = 0
        if "minimum" in schema:
            value = max(value, schema["minimum"])
        if "exclusiveMinimum" in schema:
            value = max(value, schema["exclusiveMinimum"] + 1)
        if "maximum" in schema:
            value = min(value, schema["maximum"])
        if "exclusiveMaximum" in schema:
            value = min(value, schema["exclusiveMaximum"] - 1)
        if kind == "integer":
            return int(value)
        return float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    raise SampleError(f"unknown type {kind!r}")
