"""The suite's actions: built from `/schema` and the tool list, valid or invalid as promised.

These run without a server (they check the suite, not the server under test). The values come
from the SDK's sampler, which `tests/cli/test_sample.py` checks on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from .instances import SampleError, invalid_action, is_tool_action_schema, valid_action

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
CALL_TOOL_SCHEMA: dict[str, Any] = {
    "action": {
        "type": "object",
        "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["tool_name"],
    }
}
TOOLS = [
    {"name": "bump", "inputSchema": {"type": "object", "properties": {"by": {"type": "integer"}}, "required": ["by"]}}
]


def test_plain_action() -> None:
    assert valid_action(ECHO_SCHEMA, TOOLS) == {"message": "hello"}
    assert invalid_action(ECHO_SCHEMA, TOOLS) == {}


def test_tool_action() -> None:
    assert valid_action(TOOL_SCHEMA, TOOLS) == {"type": "call_tool", "tool_name": "bump", "arguments": {"by": 0}}
    assert invalid_action(TOOL_SCHEMA, TOOLS) == {"type": "call_tool", "arguments": {"by": 0}}


def test_openenv_call_tool_action_is_a_tool_action() -> None:
    assert is_tool_action_schema(CALL_TOOL_SCHEMA["action"], [])
    assert valid_action(CALL_TOOL_SCHEMA, TOOLS)["tool_name"] == "bump"
    with pytest.raises(SampleError, match="the server lists no tools"):
        valid_action(CALL_TOOL_SCHEMA, [])


def test_action_with_nothing_required_and_no_tools() -> None:
    assert valid_action(TOOL_SCHEMA, []) == {}
    assert invalid_action(TOOL_SCHEMA, []) == {"__conformance_unknown_field__": 1}


def test_an_action_that_cannot_be_invalid_is_reported() -> None:
    open_schema = {"action": {"type": "object", "properties": {"metadata": {"type": "object"}}}}
    with pytest.raises(SampleError, match="no action is invalid"):
        invalid_action(open_schema, [])


def test_an_action_schema_the_sampler_cannot_satisfy_names_the_keyword() -> None:
    patterned = {"action": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
                            "required": ["code"]}}
    with pytest.raises(SampleError, match="cannot generate a string matching pattern"):
        valid_action(patterned, [])
