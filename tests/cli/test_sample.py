"""`sample_from_schema`, the one JSON Schema sampler (`openenv validate`'s runtime checks and the
conformance suite build their actions with it): every sample validates against its schema, and
what it cannot generate is refused with the keyword named."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

from openenv_sdk.checks import SampleError, sample_from_schema

DRAFT_4 = "http://json-schema.org/draft-04/schema#"
DRAFT_7 = "http://json-schema.org/draft-07/schema#"


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: Annotated[int, Field(ge=3, le=5)]


class Everything(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Field(min_length=20, max_length=30)]
    short: Annotated[str, Field(max_length=3)]
    count: Annotated[int, Field(gt=7)]
    ratio: Annotated[float, Field(gt=0, lt=0.5)]
    step: Annotated[int, Field(ge=5, multiple_of=4)]
    fraction: Annotated[float, Field(ge=0.25, multiple_of=0.1)]
    flag: bool
    color: Color
    mode: Literal["a", "b"]
    fixed: Literal["only"]
    maybe: int | None
    inner: Inner
    inners: Annotated[list[Inner], Field(min_length=2)]
    pair: tuple[int, str]
    mapping: dict[str, int]
    optional_ignored: str = "x"


class Node(BaseModel):
    label: str
    next: Node | None


class Tree(BaseModel):
    children: list[Tree]


def test_a_pydantic_model_sample_validates() -> None:
    schema = Everything.model_json_schema()
    instance = sample_from_schema(schema)
    Everything.model_validate(instance)
    jsonschema.validate(instance, schema)
    assert "optional_ignored" not in instance
    assert instance["pair"] == [0, "hello"]
    assert (instance["count"], instance["ratio"], instance["step"], instance["fraction"]) == (8, 0.25, 8, 0.4)


@pytest.mark.parametrize("model", [Node, Tree])
def test_recursive_models_end(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    instance = sample_from_schema(schema)
    model.model_validate(instance)
    jsonschema.validate(instance, schema)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, "hello"),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, 1),
        ({"type": "integer", "minimum": 0.5, "maximum": 1.5}, 1),
        ({"$schema": DRAFT_4, "type": "number", "minimum": 2, "exclusiveMinimum": True}, 3.0),
        ({"type": "integer", "multipleOf": 3, "minimum": 1}, 3),
        ({"type": "string", "format": "date-time"}, "2024-01-01T00:00:00Z"),
        ({"type": "string", "format": "password", "minLength": 6}, "hellox"),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"const": "b"}], "items": False}, [0, "b"]),
        ({"$schema": DRAFT_7, "type": "array", "items": [{"type": "boolean"}], "additionalItems": {"type": "null"},
          "minItems": 2},
         [False, None]),
        ({"type": "array", "items": {"enum": [1, 2]}, "minItems": 1, "uniqueItems": True}, [1]),
        ({"type": "object", "properties": {"a": {"type": "integer", "default": 5}}, "required": ["a"]}, {"a": 5}),
        ({"type": "object", "additionalProperties": {"type": "integer"}, "required": ["k"]}, {"k": 0}),
        ({"allOf": [{"$ref": "#/$defs/A"}, {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}],
          "$defs": {"A": {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}}},
         {"a": 1, "b": False}),
        ({"anyOf": [{"type": "string", "pattern": "^x$"}, {"type": "integer"}]}, 0),
        ({"type": ["null", "boolean"]}, False),
    ],
)
def test_sample(schema: dict[str, Any], expected: Any) -> None:
    value = sample_from_schema(schema)
    assert value == expected
    assert type(value) is type(expected)
    jsonschema.validate(value, schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "pattern": "^[A-Z]{3}$"}, "cannot generate a string matching pattern '^[A-Z]{3}$'"),
        ({"type": "string", "format": "ulid"}, "cannot generate a string in format 'ulid'"),
        ({"type": "string", "format": "email", "maxLength": 3}, "does not fit `minLength`/`maxLength` 0..3"),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, "no integer satisfies"),
        ({"type": "number", "minimum": 1, "maximum": 2, "multipleOf": 5}, "no number satisfies"),
        ({"type": "array", "items": {"const": 1}, "minItems": 2, "uniqueItems": True}, "`uniqueItems`"),
        ({"type": "array", "prefixItems": [{}], "items": False, "minItems": 2}, "`minItems` 2"),
        ({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
                                                "required": ["n"]}}}, "$ref '#/$defs/N' requires itself"),
        ({"$ref": "other.json#/A"}, "non-local $ref 'other.json#/A'"),
        ({"$ref": "#/$defs/Missing"}, "$ref '#/$defs/Missing' points nowhere"),
        ({"enum": []}, "`enum` is empty"),
        ({"anyOf": []}, "`anyOf` must be a non-empty list"),
        ({"type": "widget"}, "unknown type 'widget'"),
        ({"not": {}, "type": "object", "properties": {"x": False}, "required": ["x"]}, "the schema is `false`"),
    ],
)
def test_what_cannot_be_generated_is_refused_with_the_keyword(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(SampleError) as caught:
        sample_from_schema(schema)
    assert message in str(caught.value)


def test_depth_is_bounded() -> None:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(40):
        schema = {"type": "array", "items": schema, "minItems": 1}
    with pytest.raises(SampleError, match="the schema nests deeper than 32 levels"):
        sample_from_schema(schema)


def test_refs_resolve_against_the_given_root() -> None:
    root = {"$defs": {"Word": {"type": "string", "minLength": 5, "maxLength": 5}}}
    assert sample_from_schema({"$ref": "#/$defs/Word"}, root=root) == "hello"
