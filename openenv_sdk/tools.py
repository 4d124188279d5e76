"""Agent tools: the `@tool` decorator, and the specs the server builds from it.

The decorator only tags the function; `collect_tools` reads the tags when a class is
defined. A tool's JSON Schema comes from a pydantic model of its signature; its description
and parameter descriptions come from the docstring (Google style `Args:` section).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .errors import EnvironmentDefinitionError
from .types import ToolSchema

__all__ = ["RESERVED_NAMES", "ToolSpec", "collect_tools", "tool", "tool_result"]

F = TypeVar("F", bound=Callable[..., Any])

RESERVED_NAMES = frozenset({"reset", "step", "state", "close"})
"""Names no tool may take: they are the orchestrator's verbs."""

_TOOL_TAG = "__openenv_tool__"
_ORCHESTRATOR_TAG = "__openenv_orchestrator__"


@dataclass(frozen=True)
class _ToolTag:
    name: str | None
    description: str | None
    timeout_s: float | None


def tool(
    fn: F | None = None, *, name: str | None = None, description: str | None = None, timeout_s: float | None = None
) -> Any:
    """Mark an environment method as a tool the agent can call over MCP (and through `step`).

    Use bare (`@tool`) or with options (`@tool(name="run", timeout_s=30)`). The function is
    returned unchanged. Sync and `async def` methods both work.

    Args:
        fn: the method (when used bare).
        name: the tool's name; defaults to the method's name.
        description: the tool's description; defaults to the docstring's summary.
        timeout_s: the most a call may take; defaults to the server's tool timeout.
    """

    def mark(f: F) -> F:
        if not callable(f):
            raise EnvironmentDefinitionError(f"@tool must decorate a function, got {type(f).__name__}")
        setattr(f, _TOOL_TAG, _ToolTag(name=name, description=description, timeout_s=timeout_s))
        return f

    return mark(fn) if fn is not None else mark


def orchestrator(fn: F) -> F:
    """Mark a method as an orchestrator-only call (for graders): reachable over `/ws` and HTTP
    `POST /call/{name}`, never over MCP, never listed as a tool.

    Use it for what a host-side grader needs from inside the sandbox (run a check, read a file).
    """
    setattr(fn, _ORCHESTRATOR_TAG, True)
    return fn


@dataclass(frozen=True)
class ToolSpec:
    """One tool of an environment class."""

    name: str
    description: str
    method_name: str
    arguments_model: type[BaseModel]
    is_async: bool
    timeout_s: float | None

    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, input_schema=self.input_schema)

    @property
    def input_schema(self) -> dict[str, Any]:
        return _input_schema(self.arguments_model)

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate and coerce arguments; raises `pydantic.ValidationError` naming the bad field."""
        parsed = self.arguments_model.model_validate(arguments)
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}


_schema_cache: dict[type[BaseModel], dict[str, Any]] = {}


def _input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = _schema_cache.get(model)
    if schema is None:
        schema = model.model_json_schema()
        schema.pop("title", None)
        _schema_cache[model] = schema
    return schema


def collect_tools(cls: type) -> dict[str, ToolSpec]:
    """Every `@tool` method of `cls` and its bases, by tool name (subclasses override bases)."""
    specs: dict[str, ToolSpec] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            tag = getattr(value, _TOOL_TAG, None)
            if isinstance(tag, _ToolTag):
                spec = _build_spec(cls, attr, value, tag)
                specs = {k: v for k, v in specs.items() if v.method_name != attr}
                specs[spec.name] = spec
    for spec in specs.values():
        # an override without @tool would run with the base's argument schema: refuse it
        final = inspect.getattr_static(cls, spec.method_name, None)
        if not isinstance(getattr(final, _TOOL_TAG, None), _ToolTag):
            owner = next(k for k in cls.__mro__ if spec.method_name in vars(k))
            raise EnvironmentDefinitionError(
                f"{owner.__name__}.{spec.method_name} overrides the tool {spec.name!r} without @tool: its "
                f"arguments would be checked against the base's schema. Decorate the override with @tool "
                f"(it may change the arguments), or give the method another name."
            )
    return specs


def collect_orchestrator_calls(cls: type) -> dict[str, str]:
    """Names of `@orchestrator` methods of `cls` and its bases."""
    return {
        attr: attr
        for klass in reversed(cls.__mro__)
        for attr, value in vars(klass).items()
        if getattr(value, _ORCHESTRATOR_TAG, False)
    }


def _build_spec(cls: type, attr: str, fn: Callable[..., Any], tag: _ToolTag) -> ToolSpec:
    name = tag.name or attr
    where = f"{cls.__name__}.{attr}"
    if name in RESERVED_NAMES:
        raise EnvironmentDefinitionError(
            f"{where}: a tool cannot be named {name!r}: reset, step, state and close are the "
            f"orchestrator's verbs and are never exposed to the agent. Rename the method, or pass "
            f"@tool(name=...) with another name."
        )
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}", name):
        raise EnvironmentDefinitionError(f"{where}: tool name {name!r} must match [A-Za-z_][A-Za-z0-9_.-]*")
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "self":
        raise EnvironmentDefinitionError(f"{where}: @tool marks methods; the first parameter must be `self`")
    hints = _type_hints(fn, where)
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise EnvironmentDefinitionError(f"{where}: tools take named parameters only, not *{p.name}")
        annotation = hints.get(p.name, Any)
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (annotation, Field(default=default, description=param_docs.get(p.name)))
    model_name = "".join(part.title() for part in re.split(r"[_.-]", name)) + "Arguments"
    model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    try:
        _input_schema(model)
    except Exception as e:  # a hint pydantic cannot express as JSON Schema
        raise EnvironmentDefinitionError(f"{where}: cannot build a JSON Schema for its parameters: {e}") from e
    return ToolSpec(
        name=name,
        description=tag.description or summary,
        method_name=attr,
        arguments_model=model,
        is_async=inspect.iscoroutinefunction(fn),
        timeout_s=tag.timeout_s,
    )


def _type_hints(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception as e:
        raise EnvironmentDefinitionError(f"{where}: cannot resolve its type hints: {e}") from e


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and `Args:` entries."""
    lines = doc.splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line.strip())
        if header and not line.startswith((" ", "\t")):
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            entry = re.match(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and (current is None or _indent(line) <= _indent_of_entries(lines, section)):
                current = entry.group(1).lstrip("*")
                params[current] = entry.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of_entries(lines: list[str], section: str) -> int:
    seen = False
    for line in lines:
        if line.strip() == f"{section}:":
            seen = True
        elif seen and line.strip():
            return _indent(line)
    return 0


def tool_result(value: Any) -> dict[str, Any]:
    """A tool's return value as MCP's `CallToolResult` JSON, plus `data` (the value itself)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(value, dict):
        result["structuredContent"] = value
    elif not isinstance(value, str):
        result["structuredContent"] = {"result": value}
    result["data"] = value
    return result


def error_result(message: str) -> dict[str, Any]:
    """A failed tool call as MCP's `CallToolResult` JSON (`isError: true`)."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def validation_message(e: ValidationError) -> str:
    """pydantic's errors as one line per field: `path: message`."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors())
