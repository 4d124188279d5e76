"""TRL `GRPOTrainer(environment_factory=...)` adapter: any environment as a TRL environment class.

    factory = EnvironmentFactory(EnvSource(env_dir="environments/wordle"))
    trainer = GRPOTrainer(model, environment_factory=factory, callbacks=[factory.closer()], ...)

`factory()` returns an instance of a class made for the environment: its public methods are the
environment's MCP tools (name, arguments, types and descriptions taken from the tools' JSON
Schemas, so TRL renders them into the prompt and parses calls to them); `reset(**row)` starts an
episode with the dataset row's task fields; `get_reward()` grades the episode host-side with the
environment's grader. Instances are TRL's pool: each holds one session on the source's server
(a fleet's least-loaded one, for `EnvSource(fleet=...)`), reused across batches; a session whose
server is gone is replaced at the next `reset`. `close()` (or the `closer()` callback at the end
of training) closes every session and the server.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import keyword
import operator
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, Self

from openenv_sdk.errors import ToolFailure, TransportError
from openenv_sdk.rubric import Score, grade

from .chat import tool_result_text
from .sources import EnvSource

__all__ = ["TRL_COLUMNS", "EnvironmentFactory", "python_tool_signature"]

TRL_COLUMNS = frozenset({"prompt", "completion", "images", "image", "environment"})
"""Dataset columns TRL reads itself; they are never passed to the environment's `reset`."""

_RESERVED = frozenset({"reset", "get_reward"})


def _hint(schema: Mapping[str, Any]) -> Any:
    """A Python type hint whose `transformers.get_json_schema` rendering matches a JSON Schema."""
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return functools.reduce(operator.or_, [_hint(s) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return functools.reduce(operator.or_, [_hint({**schema, "type": k}) for k in kind])
    if kind == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, Mapping) and items else list  # type: ignore[misc]  # a hint built at run time
    return {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict, "null": type(None)}.get(
        str(kind), Any
    )


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def python_tool_signature(name: str, description: str, input_schema: Mapping[str, Any]) -> tuple[inspect.Signature, dict[str, Any], str]:
    """The signature, annotations and Google-style docstring of a method standing for an MCP tool.

    TRL builds each tool's schema from its method with `transformers.get_json_schema`; these make
    that schema carry the tool's own names, types, descriptions and required arguments.

    Raises:
        ValueError: an argument name is not a Python identifier.
    """
    properties: Mapping[str, Any] = input_schema.get("properties") or {}
    required = set(input_schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_lines = []
    for arg, prop in properties.items():
        if not arg.isidentifier() or keyword.iskeyword(arg) or arg == "self":
            raise ValueError(f"tool {name!r}: argument {arg!r} is not a Python identifier, so TRL cannot call it")
        hint = _hint(prop)
        default = inspect.Parameter.empty if arg in required else prop.get("default")
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[arg] = hint
        arg_lines.append(f"    {arg}: {_one_line(prop.get('description') or prop.get('title') or arg)}")
    doc = _one_line(description) or f"The {name} tool."
    if arg_lines:
        doc += "\n\nArgs:\n" + "\n".join(arg_lines)
    return inspect.Signature(params), annotations, doc


class _ToolEnvironment:
    """Base of the generated classes: one session on the factory's server."""

    _factory: EnvironmentFactory

    def __init__(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self.last_score: Score | None = None
        """The last `get_reward()`'s score, with its components and evidence."""

    def reset(self, **row: Any) -> str | None:
        """Start an episode with the row's task fields; returns text for the prompt, or None."""
        factory = self._factory
        task = factory.task_from_row(row)
        with self._lock:
            if self._client is None or self._client.is_closed:
                self._client = factory.source.client()
            try:
                result = self._client.reset(**task)
            except TransportError:
                # Its server is gone (a fleet's lost node, a restarted server): once, a new
                # session, which a fleet opens on a live server.
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = factory.source.client()
                result = self._client.reset(**task)
        self.last_score = None
        return factory.observation_text(result.observation) if factory.observation_text else None

    def get_reward(self) -> float:
        """Grade the episode with the host-side grader."""
        with self._lock:
            if self._client is None:
                raise RuntimeError("get_reward() before reset()")
            self.last_score = grade(self._factory.rubric, self._client)
        return self.last_score.value

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        with self._lock:
            if self._client is None:
                raise RuntimeError(f"tool {name!r} called before reset()")
            result = self._client.call_tool(name, **arguments)
        text, failed = tool_result_text(result)
        if failed:  # TRL shows the policy {"error": text} and counts a failed call
            # The SDK's own class: these methods are TRL's tools, and a tool reports a failure so.
            # MCP results carry no failure type, so `error_type` stays execution_error.
            raise ToolFailure(text)
        return text

    def _close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _tool_method(name: str, description: str, input_schema: Mapping[str, Any]) -> Callable[..., str]:
    signature, annotations, doc = python_tool_signature(name, description, input_schema)

    def method(self: _ToolEnvironment, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    return method


class EnvironmentFactory:
    """Makes TRL environment instances for one environment; owns their sessions and its server.

    Example:
        >>> factory = EnvironmentFactory(EnvSource(env_dir="environments/wordle"))  # doctest: +SKIP
        >>> env = factory()
        >>> env.reset(task_id=3)
        >>> env.guess(word="crane")
        >>> env.get_reward()
    """

    def __init__(
        self,
        source: EnvSource,
        *,
        rubric: Any | None = None,
        task_fields: list[str] | None = None,
        observation_text: Callable[[dict[str, Any]], str | None] | None = None,
        class_name: str | None = None,
    ) -> None:
        """Start the source's server and build the environment's class from its tools.

        Args:
            source: where the environment runs (`EnvSource(base_url | env_dir= | image=)`).
            rubric: the host-side grader; default the one the source's `openenv.yaml` names.
            task_fields: the dataset columns passed to `reset`; default every column but TRL's
                own (`prompt`, `completion`, `images`, `image`, `environment`).
            observation_text: turns `reset`'s observation into text appended to the prompt (TRL
                appends what `reset` returns); default nothing is appended.
            class_name: the generated class's name (TRL logs `get_reward` under it).

        Raises:
            ValueError: a tool is named `reset` or `get_reward`, starts with `_`, or has an
                argument that is not a Python identifier; or no rubric could be found.
        """
        self.source = source
        self.rubric = rubric if rubric is not None else source.grader()
        self.task_fields = list(task_fields) if task_fields is not None else None
        self.observation_text = observation_text
        self.tools = source.tools()
        namespace: dict[str, Any] = {"_factory": self}
        for tool in self.tools:
            if tool.name in _RESERVED or tool.name.startswith("_"):
                raise ValueError(f"tool {tool.name!r} cannot be a TRL environment method (reserved or private name)")
            namespace[tool.name] = _tool_method(tool.name, tool.description, tool.input_schema)
        name = class_name or _class_name(source.name)
        self.env_class: type[_ToolEnvironment] = type(name, (_ToolEnvironment,), namespace)
        self.instances: list[_ToolEnvironment] = []
        self._lock = threading.Lock()

    def __call__(self) -> _ToolEnvironment:
        """A new environment instance (TRL pools them: one per concurrent rollout)."""
        instance = self.env_class()
        with self._lock:
            self.instances.append(instance)
        return instance

    def task_from_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The `reset` arguments a dataset row carries."""
        if self.task_fields is not None:
            missing = [k for k in self.task_fields if k not in row]
            if missing:
                raise KeyError(f"the dataset row has no task field(s) {missing}; it has {sorted(row)}")
            return {k: row[k] for k in self.task_fields}
        return {k: v for k, v in row.items() if k not in TRL_COLUMNS}

    @staticmethod
    def tool_method(name: str, description: str, input_schema: Mapping[str, Any]) -> Callable[..., str]:
        """The method standing for one MCP tool (what `transformers.get_json_schema` reads)."""
        return _tool_method(name, description, input_schema)

    def close(self) -> None:
        """Close every instance's session and the source's server. Safe to call twice."""
        with self._lock:
            instances, self.instances = self.instances, []
        try:
            for instance in instances:
                instance._close()
        finally:
            self.source.close()

    def closer(self) -> Any:
        """A `transformers.TrainerCallback` that calls `close()` when training ends."""
        from transformers import TrainerCallback

        factory = self

        class _Closer(TrainerCallback):
            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                factory.close()

        return _Closer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _class_name(label: str) -> str:
    base = re.sub(r"[^0-9A-Za-z]+", " ", label.rsplit("/", 1)[-1]).title().replace(" ", "")
    return (base or "Environment") + "Env" if not base.endswith("Env") else base
