"""Make a small value that satisfies a JSON Schema (for probing a server with a valid action).

The one generator of the repository: `openenv validate`'s runtime checks and the conformance
suite (`tests/conformance/instances.py`) both build their actions with it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import OpenEnvError

__all__ = ["SampleError", "sample_from_schema"]

_MAX_DEPTH = 32  # levels of objects, arrays, `$ref`s and combinators before sampling gives up

_TEXT = "hello"  # five lowercase letters: also a word a word game accepts
_FORMATS: dict[str, str | None] = {  # a fixed sample per format; None: any string will do
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "duration": "PT1S",
    "email": "agent@example.com",
    "idn-email": "agent@example.com",
    "uri": "http://example.com",
    "uri-reference": "http://example.com",
    "iri": "http://example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "uuid4": "00000000-0000-4000-8000-000000000000",
    "password": None,
    "binary": None,
    "path": None,
}
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


class SampleError(OpenEnvError, ValueError):
    """The schema has a construct this sampler cannot satisfy; the message names the keyword
    (`pattern`, an unknown `format`, a required `$ref` cycle, bounds no number fits, ...)."""


def sample_from_schema(schema: dict[str, Any], *, root: dict[str, Any] | None = None) -> Any:
    """A minimal value valid against `schema`: required properties only, defaults where given.

    Handles what pydantic emits and a little more: `$ref` (local, into `$defs`/`definitions`),
    `anyOf`/`oneOf` (a non-null option first, the next when one cannot be generated, so a
    required `Node | None` self-reference ends in `None`), `allOf`, `enum`, `const`, `default`,
    string length bounds and common `format`s, numeric bounds (inclusive, exclusive, draft-4
    boolean exclusives) and `multipleOf`, arrays with `minItems`, `prefixItems` or draft-7
    tuple `items`, and `uniqueItems`.

    Args:
        schema: the JSON Schema to satisfy.
        root: the document that `$ref`s point into (default: `schema` itself).

    Raises:
        SampleError: the schema needs something this sampler does not generate (a `pattern`,
            an unknown `format`, a required self-reference, unsatisfiable bounds), or nests
            deeper than 32 levels.
    """
    return _sample(schema, root if root is not None else schema, 0, ())


def _resolve(ref: Any, root: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#/"):
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


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema that asks for all of `parts`: `required` lists and `properties` are united."""
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key == "required":
                merged[key] = list(dict.fromkeys([*merged.get(key, []), *value]))
            elif key == "properties":
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
    return merged


def _sample(schema: Any, root: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
    if depth > _MAX_DEPTH:
        raise SampleError(f"the schema nests deeper than {_MAX_DEPTH} levels")
    if schema is True:
        schema = {}
    if schema is False:
        raise SampleError("the schema is `false`: no value is valid")
    if not isinstance(schema, dict):
        raise SampleError(f"not a schema: {schema!r}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in refs:
            raise SampleError(f"$ref {ref!r} requires itself (a recursive model whose self-reference is required)")
        rest = {key: value for key, value in schema.items() if key != "$ref"}
        return _sample(_merge([_resolve(ref, root), rest]), root, depth + 1, (*refs, ref))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        if not schema["enum"]:
            raise SampleError("`enum` is empty: no value is valid")
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _first_option(schema, key, root, depth, refs)
    if "allOf" in schema:
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        parts = [_resolve(part["$ref"], root) if isinstance(part, dict) and "$ref" in part else part
                 for part in schema["allOf"]]
        return _sample(_merge([rest, *(p for p in parts if isinstance(p, dict))]), root, depth + 1, refs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        if "properties" in schema or "required" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"
        else:
            kind = "string"
    if kind == "object":
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        return {
            name: _sample(properties.get(name, extra if isinstance(extra, dict) else {}), root, depth + 1, refs)
            for name in schema.get("required", [])
        }
    if kind == "array":
        return _array(schema, root, depth, refs)
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    raise SampleError(f"unknown type {kind!r}")


def _first_option(schema: dict[str, Any], key: str, root: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
    """The first option of `anyOf`/`oneOf` that can be generated, a non-null one preferred
    (so a probe exercises the field). Sibling keywords apply to every option."""
    options = schema[key]
    if not isinstance(options, list) or not options:
        raise SampleError(f"`{key}` must be a non-empty list, got {options!r}")
    rest = {k: v for k, v in schema.items() if k != key}
    is_null = [isinstance(option, dict) and option.get("type") == "null" for option in options]
    ordered = [o for o, null in zip(options, is_null, strict=True) if not null]
    ordered += [o for o, null in zip(options, is_null, strict=True) if null]
    errors: list[SampleError] = []
    for option in ordered:
        try:
            return _sample(_merge([rest, option]) if isinstance(option, dict) else option, root, depth + 1, refs)
        except SampleError as e:
            errors.append(e)
    raise errors[0]  # the preferred option's reason


def _array(schema: dict[str, Any], root: dict[str, Any], depth: int, refs: tuple[str, ...]) -> list[Any]:
    prefix = schema.get("prefixItems") or []
    items = schema.get("items", {})
    if isinstance(items, list):  # draft 7's tuple form; `additionalItems` holds the rest
        prefix, items = items, schema.get("additionalItems", {})
    values = [_sample(item, root, depth + 1, refs) for item in prefix]  # a tuple: fill every position
    if "maxItems" in schema:
        values = values[: int(schema["maxItems"])]
    count = int(schema.get("minItems", 0))
    if len(values) < count:
        if items is False:
            raise SampleError(f"`minItems` {count} asks for more items than `prefixItems` and `items` is false")
        values += [_sample(items, root, depth + 1, refs) for _ in range(count - len(values))]
    if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
        raise SampleError(f"cannot generate {len(values)} distinct items for `uniqueItems`")
    return values


def _string(schema: dict[str, Any]) -> str:
    if "pattern" in schema:
        raise SampleError(f"cannot generate a string matching pattern {schema['pattern']!r}")
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    fmt = schema.get("format")
    if fmt is not None and fmt not in _FORMATS:
        raise SampleError(f"cannot generate a string in format {fmt!r}")
    fixed = _FORMATS.get(fmt) if fmt is not None else None
    if fixed is None:
        if high is not None and int(high) < low:
            raise SampleError(f"`minLength` {low} exceeds `maxLength` {high}")
        text = _TEXT.ljust(low, "x")
        return text[: int(high)] if high is not None else text
    if len(fixed) < low or (high is not None and len(fixed) > int(high)):
        raise SampleError(f"the {fmt!r} sample {fixed!r} does not fit `minLength`/`maxLength` {low}..{high}")
    return fixed


def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
    """0 when it fits, else the bound nearest to it that fits (a midpoint between exclusive
    bounds), moved onto an integer and a multiple of `multipleOf`."""
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(above, bool):  # draft 4: a flag on `minimum`
        above, minimum = (minimum, None) if above else (None, minimum)
    if isinstance(below, bool):
        below, maximum = (maximum, None) if below else (None, maximum)
    step = schema.get("multipleOf")

    def fits(x: float) -> bool:
        return (
            (minimum is None or x >= minimum)
            and (maximum is None or x <= maximum)
            and (above is None or x > above)
            and (below is None or x < below)
            and (not step or (x / step).is_integer())
        )

    lows = [b for b in (minimum, above) if b is not None]
    highs = [b for b in (maximum, below) if b is not None]
    candidates: list[float] = [0, *(b for b in (minimum, maximum) if b is not None)]
    candidates += [above + 1] if above is not None else []
    candidates += [below - 1] if below is not None else []
    candidates += [(max(lows) + min(highs)) / 2] if lows and highs else []
    for candidate in candidates:
        for value in _multiples(candidate, step) if step else [candidate]:
            for x in ([math.floor(value), math.ceil(value)] if integer else [value]):
                if fits(x):
                    return int(x) if integer else float(x)
    bounds = {k: schema[k] for k in _NUMBER_KEYWORDS if k in schema}
    raise SampleError(f"no {'integer' if integer else 'number'} satisfies {bounds}")


def _multiples(value: float, step: float) -> list[float]:
    """Multiples of `step` near `value`, nearest first, that a strict validator accepts (`x / step`
    exactly an integer: in floating point 0.3 is no multiple of 0.1, while 0.4 is)."""
    start = math.ceil(value / step)
    near = [n for i in range(16) for n in (start + i, start - 1 - i)]
    return [x for n in near for x in dict.fromkeys((n * step, round(n * step, 12))) if (x / step).is_integer()]
