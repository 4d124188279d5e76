"""The suite's own generator: minimal instances validate against the schemas they came from.

These run without a server (they check the suite, not the server under test).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from .instances import SchemaError, invalid_action, minimal_instance, valid_action


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


def test_minimal_instance_validates() -> None:
    instance = minimal_instance(Everything.model_json_schema())
    Everything.model_validate(instance)
    assert "optional_ignored" not in instance


def test_pattern_is_reported() -> None:
    class Patterned(BaseModel):
        code: Annotated[str, Field(pattern=r"^[A-Z]{3}$")]

    with pytest.raises(SchemaError, match="cannot generate a string matching pattern"):
        minimal_instance(Patterned.model_json_schema())


ECHO_SCHEMA: dict[str, Any] = {
    "action": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"metadata": {"type": "object"}, "message": {"type": "string"}},
        "required": ["message"],
    }
}
TOOL_SCHEMA: dict[str, Any] = {
    "action": {"type": "object", "additionalProperties": False, "properties": {"metadata": {"type": "object"}}}
}
TOOLS = [
    {"name": "bump", "inputSchema": {"type": "object", "properties": {"by": {"type": "integer"}}, "required": ["by"]}}
]


def test_plain_action() -> None:
    assert valid_action(ECHO_SCHEMA, TOOLS) == {"message": "conformance"}
    assert invalid_action(ECHO_SCHEMA, TOOLS) == {}


def test_tool_action() -> None:
    assert valid_action(TOOL_SCHEMA, TOOLS) == {"type": "call_tool", "tool_name": "bump", "arguments": {"by": 1}}
    assert invalid_action(TOOL_SCHEMA, TOOLS) == {"type": "call_tool", "arguments": {"by": 1}}


def test_action_with_nothing_required_and_no_tools() -> None:
    assert valid_action(TOOL_SCHEMA, []) == {}
    assert invalid_action(TOOL_SCHEMA, []) == {"__conformance_unknown_field__": 1}
