"""`@tool`: tagging only, schemas from signatures, descriptions from docstrings, results as MCP JSON."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from fixtures.envs import ProbeEnv
from pydantic import BaseModel, ValidationError

from openenv_sdk import Environment, EnvironmentDefinitionError, tool
from openenv_sdk.tools import RESERVED_NAMES, tool_result


def test_reserved_names() -> None:
    assert frozenset({"reset", "step", "state", "close"}) == RESERVED_NAMES


def test_decorator_returns_the_function_unchanged() -> None:
    def f(self: Any) -> int:
        return 1

    assert tool(f) is f
    assert tool(timeout_s=3)(f) is f


def test_decorator_refuses_a_non_function() -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:
        tool(3)
    assert str(refused.value) == "@tool must decorate a function, got int"


# --- specs --------------------------------------------------------------------------------------


def test_sync_and_async_tools_are_told_apart() -> None:
    specs = ProbeEnv.tool_specs
    assert specs["echo"].is_async is False
    assert specs["aecho"].is_async is True


def test_timeout_option() -> None:
    assert ProbeEnv.tool_specs["slow"].timeout_s == 0.2
    assert ProbeEnv.tool_specs["echo"].timeout_s is None


def test_schema_from_signature_and_docstring() -> None:
    class Env(Environment):
        @tool
        def search(self, query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast") -> list[str]:
            """Search the corpus.

            Returns the best matches first.

            Args:
                query: what to look for,
                    over two lines.
                limit (int): the most results.

            Returns:
                The matches.
            """
            return []

    spec = Env.tool_specs["search"]
    assert spec.description == "Search the corpus.\n\nReturns the best matches first."
    assert spec.input_schema == {
        "additionalProperties": False,
        "properties": {
            "query": {"description": "what to look for, over two lines.", "title": "Query", "type": "string"},
            "limit": {"default": 10, "description": "the most results.", "title": "Limit", "type": "integer"},
            "mode": {"default": "fast", "enum": ["fast", "exact"], "title": "Mode", "type": "string"},
        },
        "required": ["query"],
        "type": "object",
    }
    assert spec.schema().model_dump() == {
        "name": "search",
        "description": "Search the corpus.\n\nReturns the best matches first.",
        "input_schema": spec.input_schema,
    }


def test_name_and_description_options() -> None:
    class Env(Environment):
        @tool(name="run.code", description="Run it.")
        def run_code(self) -> None:
            """Ignored."""

    assert list(Env.tool_specs) == ["run.code"]
    assert Env.tool_specs["run.code"].description == "Run it."
    assert Env.tool_specs["run.code"].method_name == "run_code"


def test_an_override_keeps_being_a_tool_only_with_the_decorator() -> None:
    class Base(Environment):
        @tool
        def guess(self, word: str) -> str:
            """Guess a word."""
            return word

    class Decorated(Base):
        @tool
        def guess(self, word: str, strict: bool = False) -> str:
            """Guess a word, strictly."""
            return word.upper()

    assert set(Decorated.tool_specs["guess"].input_schema["properties"]) == {"word", "strict"}
    assert Decorated.tool_specs["guess"].description == "Guess a word, strictly."

    with pytest.raises(EnvironmentDefinitionError) as refused:

        class Plain(Base):
            def guess(self, word: str, strict: bool = False) -> str:
                return word

    assert "Plain.guess overrides the tool 'guess' without @tool" in str(refused.value)


def test_validate_arguments_coerces_and_refuses() -> None:
    spec = ProbeEnv.tool_specs["add"]
    assert spec.validate_arguments({"a": "2"}) == {"a": 2, "b": 0}
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        spec.validate_arguments({"a": 1, "c": 2})
    with pytest.raises(ValidationError, match="Field required"):
        spec.validate_arguments({})


# --- misuse is refused at class definition --------------------------------------------------------


def _define(method: Any, name: str = "f") -> None:
    type("Env", (Environment,), {name: method})


@pytest.mark.parametrize(
    ("method", "message"),
    [
        (tool(lambda self, *args: None), "Env.f: tools take named parameters only, not *args"),
        (tool(lambda self, **kw: None), "Env.f: tools take named parameters only, not *kw"),
        (tool(lambda x: None), "Env.f: @tool marks methods; the first parameter must be `self`"),
        (tool(name="bad name")(lambda self: None), "Env.f: tool name 'bad name' must match [A-Za-z_][A-Za-z0-9_.-]*"),
    ],
)
def test_misuse_is_refused(method: Any, message: str) -> None:
    with pytest.raises(EnvironmentDefinitionError) as refused:
        _define(method)
    assert str(refused.value) == message


def test_unresolvable_hint_is_refused() -> None:
    def f(self: Any, x: Undefined) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Broken hint."""

    with pytest.raises(EnvironmentDefinitionError) as refused:
        _define(tool(f))
    assert str(refused.value) == "Env.f: cannot resolve its type hints: name 'Undefined' is not defined"


# --- results --------------------------------------------------------------------------------------------


class Point(BaseModel):
    x: int


def _result(text: str, data: Any, structured: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    result["data"] = data
    return result


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text", _result("text", "text")),
        ({"a": 1}, _result('{"a": 1}', {"a": 1}, {"a": 1})),
        (3, _result("3", 3, {"result": 3})),
        (None, _result("null", None, {"result": None})),
        (Point(x=1), _result('{"x": 1}', {"x": 1}, {"x": 1})),
    ],
)
def test_tool_result_shapes(value: Any, expected: dict[str, Any]) -> None:
    assert tool_result(value) == expected
