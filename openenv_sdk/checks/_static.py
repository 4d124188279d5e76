"""Static checks of an environment folder or class: one `check_*` function per rule.

Each check takes an `EnvFolder` (which loads the manifest, the class and the grader once, on
first use) and returns a `CheckResult`, or a list of them. A check whose prerequisite failed
returns a skipped result, so every rule is listed in every report.

The rules about the class itself (`CLASS_CHECKS`) take any `EnvTarget`: an `EnvFolder`, or an
`EnvClass` that wraps a class given directly (what `check_env` does). Both runners call these
same functions, so a folder and its class are held to one rule set.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from ..environment import Environment
from ..errors import EnvironmentDefinitionError, ManifestError
from ..loader import import_ref
from ..manifest import MANIFEST_FILENAME, Manifest, ManifestWarning, load_manifest
from ..tools import RESERVED_NAMES
from ..types import Action, Observation, State
from ._result import CheckResult

__all__ = [
    "CLASS_CHECKS",
    "STATIC_CHECKS",
    "EnvClass",
    "EnvFolder",
    "EnvTarget",
    "check_declared_tools",
    "check_environment_declared",
    "check_environment_imports",
    "check_environment_subclass",
    "check_grader",
    "check_manifest",
    "check_manifest_layout",
    "check_manifest_warnings",
    "check_models",
    "check_readme",
    "check_reserved_tool_names",
    "check_steppable",
    "check_tasks",
    "check_tool_descriptions",
    "check_tool_schemas",
    "run_class_checks",
    "run_static_checks",
]

_RESERVED_IN_ERROR = re.compile(r"cannot be named '(reset|step|state|close)'")
_UNSET: Any = object()


class EnvTarget(Protocol):
    """What the class rules (`CLASS_CHECKS`) read: an `EnvFolder`, or an `EnvClass`."""

    def env_cls(self) -> Any:
        """The object that should be the environment class; None when a folder's did not import."""
        ...

    def environment_class(self) -> type[Environment[Any, Any, Any]] | None:
        """The class, when it is an `Environment` subclass."""
        ...

    @property
    def env_error(self) -> Exception | None:
        """Why the class did not import (folders only)."""
        ...

    def manifest(self) -> Manifest | None:
        """The folder's manifest (None for a class given directly)."""
        ...


class EnvClass:
    """An environment class given directly (no folder, no manifest): the target of `check_env`.

    Args:
        obj: what should be an `openenv_sdk.Environment` subclass (anything is accepted; the
            rules report what is wrong with it).
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def env_cls(self) -> Any:
        return self.obj

    def environment_class(self) -> type[Environment[Any, Any, Any]] | None:
        obj = self.obj
        return obj if isinstance(obj, type) and issubclass(obj, Environment) else None

    @property
    def env_error(self) -> Exception | None:
        return None

    def manifest(self) -> Manifest | None:
        return None


class EnvFolder:
    """An environment folder under validation: loads each part once, remembering failures.

    Imports are isolated: a module of the same name imported earlier from another folder is
    set aside while this folder's is imported, and `close()` forgets the modules loaded from
    the folder and restores `sys.path`, so validating many folders in one process is sound.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self._manifest: Any = _UNSET
        self._manifest_error: ManifestError | None = None
        self.manifest_warnings: list[str] = []
        self._env_cls: Any = _UNSET
        self._env_error: Exception | None = None
        self._grader: Any = _UNSET
        self._grader_error: Exception | None = None
        self._saved_path = list(sys.path)
        self._set_aside: dict[str, Any] = {}
        self._modules_before = set(sys.modules)

    # --- loading ---------------------------------------------------------------------------

    @property
    def manifest_file(self) -> Path:
        return self.path / MANIFEST_FILENAME

    def manifest(self) -> Manifest | None:
        """The manifest, or None when it does not load (see `manifest_error`)."""
        if self._manifest is _UNSET:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ManifestWarning)
                try:
                    self._manifest = load_manifest(self.path)
                except ManifestError as e:
                    self._manifest, self._manifest_error = None, e
            self.manifest_warnings = [str(w.message) for w in caught if issubclass(w.category, ManifestWarning)]
        return self._manifest

    @property
    def manifest_error(self) -> ManifestError | None:
        self.manifest()
        return self._manifest_error

    def env_cls(self) -> Any:
        """What `environment:` names (any object), or None when it is unset or does not import."""
        if self._env_cls is _UNSET:
            manifest = self.manifest()
            self._env_cls = None
            if manifest is not None and manifest.environment:
                try:
                    self._env_cls = self._import(manifest.environment, "environment")
                except Exception as e:  # the author's module may raise anything at import
                    self._env_error = e
        return self._env_cls

    @property
    def env_error(self) -> Exception | None:
        self.env_cls()
        return self._env_error

    def environment_class(self) -> type[Environment[Any, Any, Any]] | None:
        """The class, when it imported and is an `Environment` subclass."""
        cls = self.env_cls()
        return cls if isinstance(cls, type) and issubclass(cls, Environment) else None

    def grader(self) -> Any:
        """What `grader:` names, or None when it is unset or does not import."""
        if self._grader is _UNSET:
            manifest = self.manifest()
            self._grader = None
            if manifest is not None and manifest.grader:
                try:
                    self._grader = self._import(manifest.grader, "grader")
                except Exception as e:
                    self._grader_error = e
        return self._grader

    @property
    def grader_error(self) -> Exception | None:
        self.grader()
        return self._grader_error

    def _import(self, ref: str, what: str) -> Any:
        module_name = ref.partition(":")[0]
        top = module_name.split(".")[0]
        provided_here = (self.path / top).is_dir() or (self.path / f"{top}.py").is_file() or self.path.name == top
        if provided_here:  # a module of that name from elsewhere (another folder) must not shadow this one
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                if not _is_inside(sys.modules[name], self.path):
                    self._set_aside[name] = sys.modules.pop(name)
        return import_ref(self.path, ref, what=what)

    def close(self) -> None:
        """Forget the modules imported from the folder; restore `sys.path` and set-aside modules."""
        for name in set(sys.modules) - self._modules_before:
            if _is_inside(sys.modules[name], self.path):
                del sys.modules[name]
        for name, module in self._set_aside.items():
            sys.modules.setdefault(name, module)
        self._set_aside.clear()
        sys.path[:] = self._saved_path

    def __enter__(self) -> EnvFolder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_inside(module: Any, folder: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        return Path(file).resolve().is_relative_to(folder)
    except OSError:
        return False


def _one_line(error: BaseException | str) -> str:
    text = str(error).strip() or type(error).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines)


def _skip(name: str, why: str, *, severity: Any = "error") -> CheckResult:
    return CheckResult(name=name, passed=False, skipped=True, message=f"skipped: {why}", severity=severity)


def _ok(name: str, message: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name=name, passed=True, message=message, **kwargs)


def _fail(name: str, message: str, fix: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name=name, passed=False, message=message, fix=fix, **kwargs)


# --- layout and manifest -----------------------------------------------------------------


def check_manifest_layout(env: EnvFolder) -> CheckResult:
    """The folder exists and holds `openenv.yaml`."""
    name = "layout.manifest"
    if not env.path.is_dir():
        return _fail(name, f"{env.path} is not a folder",
                     "Pass an environment folder, or create one: openenv init NAME")
    if not env.manifest_file.is_file():
        return _fail(name, f"no {MANIFEST_FILENAME} in {env.path}",
                     f"Add {MANIFEST_FILENAME} (see docs/manifest.md), or scaffold a folder: openenv init NAME")
    return _ok(name, f"{MANIFEST_FILENAME} found")


SCAFFOLD_README_MARK = "Made by `openenv init"
"""A line of the scaffold's README (both templates): still there, the README was never rewritten."""


def check_readme(env: EnvFolder) -> CheckResult:
    """A README.md is recommended: it becomes `/metadata`'s `readme_content` and the Space's page.
    One still holding the scaffold's text (`openenv init`) is flagged: it would be served as it is."""
    name = "layout.readme"
    readme = env.path / "README.md"
    if readme.is_file():
        if SCAFFOLD_README_MARK in " ".join(readme.read_text(encoding="utf-8", errors="replace").split()):
            return _fail(name, "README.md is still the scaffold's (served as /metadata readme_content and the Space page)",
                         "Rewrite README.md for your environment: what the agent does, its tools, how it is graded",
                         severity="warning")
        return _ok(name, "README.md found", severity="warning")
    return _fail(name, "no README.md (recommended: served as /metadata readme_content and the Space page)",
                 "Add a README.md that says what the agent does and how it is graded", severity="warning")


def check_manifest(env: EnvFolder) -> CheckResult:
    """`openenv.yaml` parses and every field has the right type."""
    name = "manifest.schema"
    if not env.manifest_file.is_file():
        return _skip(name, f"no {MANIFEST_FILENAME}")
    manifest = env.manifest()
    if manifest is None:
        return _fail(name, _one_line(env.manifest_error or "invalid manifest"),
                     f"Fix the fields named above in {MANIFEST_FILENAME} (reference: docs/manifest.md)")
    return _ok(name, f"valid manifest for {manifest.name!r}")


def check_manifest_warnings(env: EnvFolder) -> list[CheckResult]:
    """Each manifest warning (e.g. an unknown key) as a warning result."""
    name = "manifest.warnings"
    if env.manifest() is None:
        return [_skip(name, "the manifest did not load", severity="warning")]
    if not env.manifest_warnings:
        return [_ok(name, "no unknown keys", severity="warning")]
    prefix = f"{env.manifest_file}: "
    return [
        _fail(name, text.removeprefix(prefix), "Rename or remove the key (it is ignored as it is)", severity="warning")
        for text in env.manifest_warnings
    ]


# --- the environment class ----------------------------------------------------------------


def check_environment_declared(env: EnvFolder) -> CheckResult:
    """The manifest names an environment class (`environment: module:Class`)."""
    name = "environment.declared"
    manifest = env.manifest()
    if manifest is None:
        return _skip(name, "the manifest did not load")
    if manifest.environment:
        return _ok(name, f"environment: {manifest.environment}")
    if manifest.app:
        return _ok(name, f"OpenEnv app {manifest.app} (no environment class: class checks are skipped)")
    return _fail(name, "the manifest names nothing to serve",
                 "Add `environment: module:Class` (an openenv_sdk.Environment subclass) to openenv.yaml")


def check_environment_imports(env: EnvFolder) -> CheckResult:
    """The class named by `environment:` imports (and defines without breaking the contract)."""
    name = "environment.import"
    manifest = env.manifest()
    if manifest is None or not manifest.environment:
        return _skip(name, "no environment class declared")
    if env.env_cls() is None:
        error = env.env_error
        cause = error.__cause__ if isinstance(error, ManifestError) and error.__cause__ else error
        if isinstance(cause, EnvironmentDefinitionError):
            return _fail(name, f"the class breaks the authoring contract: {_one_line(cause)}",
                         "Fix the definition named above (the message says how)")
        return _fail(name, _one_line(error or "import failed"),
                     f"Make `{manifest.environment}` importable from {env.path} (module file name, class name, "
                     "its imports and dependencies)")
    return _ok(name, f"imported {manifest.environment}")


def check_environment_subclass(env: EnvTarget) -> CheckResult:
    """What `environment:` names is an `openenv_sdk.Environment` subclass."""
    name = "environment.subclass"
    cls = env.env_cls()
    if cls is None and isinstance(env, EnvFolder):
        return _skip(name, "the class did not import")
    if isinstance(cls, Environment):
        return _fail(name, f"{cls!r} is an instance, not the class",
                     f"Pass the class itself: {type(cls).__name__}, not {type(cls).__name__}()")
    if env.environment_class() is None:
        return _fail(name, f"{cls!r} is not an openenv_sdk.Environment subclass",
                     "Define it as `class MyEnv(Environment[MyAction, MyObservation, MyState])`")
    return _ok(name, f"{cls.__name__} subclasses openenv_sdk.Environment")


def check_models(env: EnvTarget) -> CheckResult:
    """The action, observation and state types are the SDK's models and have JSON Schemas."""
    name = "environment.models"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    problems = []
    for attr, base in (("action_type", Action), ("observation_type", Observation), ("state_type", State)):
        model = getattr(cls, attr)
        if not (isinstance(model, type) and issubclass(model, BaseModel) and issubclass(model, base)):
            problems.append(f"{attr} {model!r} is not an openenv_sdk.{base.__name__} subclass")
            continue
        try:
            json.dumps(model.model_json_schema())
        except Exception as e:
            problems.append(f"{attr} {model.__name__} has no JSON Schema: {_one_line(e)}")
    if problems:
        return _fail(name, "; ".join(problems),
                     "Use pydantic fields of JSON-representable types in your Action/Observation/State models")
    return _ok(name, f"{cls.action_type.__name__}, {cls.observation_type.__name__}, {cls.state_type.__name__}")


def check_steppable(env: EnvTarget) -> CheckResult:
    """`step` can do something: the class overrides it, or has tools for the default `step` to run."""
    name = "environment.step"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    if cls.handles_tool_calls_in_step() and not cls.tool_specs:
        return _fail(name, f"{cls.__name__} has no step() and no @tool methods: no action can do anything",
                     "Implement step(self, action), or mark the agent's tools with @tool")
    how = "tool calls (default step)" if cls.handles_tool_calls_in_step() else "its own step()"
    return _ok(name, f"steps with {how}")


def check_tool_schemas(env: EnvTarget) -> CheckResult:
    """Every tool's input schema is a valid JSON Schema of an object."""
    name = "tools.schemas"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    if not cls.tool_specs:
        return _ok(name, "no tools (the agent acts only through step)")
    problems = []
    for tool_name, spec in cls.tool_specs.items():
        try:
            schema = spec.input_schema
            json.dumps(schema)
        except Exception as e:
            problems.append(f"{tool_name}: no JSON Schema: {_one_line(e)}")
            continue
        if schema.get("type") != "object":
            problems.append(f"{tool_name}: its schema is not an object schema")
            continue
        error = _meta_schema_error(schema)
        if error:
            problems.append(f"{tool_name}: {error}")
    if problems:
        return _fail(name, "; ".join(problems),
                     "Annotate every tool parameter with a JSON-representable type (str, int, list[str], a pydantic model)")
    return _ok(name, f"{len(cls.tool_specs)} tool(s) with JSON Schemas: {', '.join(sorted(cls.tool_specs))}")


def _meta_schema_error(schema: dict[str, Any]) -> str | None:
    try:
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for
    except ImportError:  # optional: the structural checks above still ran
        return None
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as e:
        return f"invalid JSON Schema: {e.message}"
    return None


def check_tool_descriptions(env: EnvTarget) -> CheckResult:
    """Every tool has a description (the agent reads it to choose a tool)."""
    name = "tools.descriptions"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass", severity="warning")
    missing = sorted(n for n, spec in cls.tool_specs.items() if not spec.description.strip())
    if missing:
        return _fail(name, f"tool(s) without a description: {', '.join(missing)}",
                     "Give each tool a docstring (its first paragraph is the description; `Args:` documents parameters)",
                     severity="warning")
    return _ok(name, "every tool has a description" if cls.tool_specs else "no tools", severity="warning")


def check_reserved_tool_names(env: EnvTarget) -> CheckResult:
    """No tool takes a reserved name (`reset`, `step`, `state`, `close`)."""
    name = "tools.reserved_names"
    cause = env.env_error.__cause__ if env.env_error is not None else None
    match = _RESERVED_IN_ERROR.search(str(cause or ""))
    if isinstance(cause, EnvironmentDefinitionError) and match:
        return _fail(name, f"a tool is named {match.group(1)!r}, a reserved name (reset, step, state, close)",
                     "Rename the method, or pass @tool(name='another_name')")
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    clash = sorted(set(cls.tool_specs) & RESERVED_NAMES)
    if clash:
        return _fail(name, f"tool(s) named {clash}: reset, step, state and close are the orchestrator's",
                     "Rename them, e.g. @tool(name='submit')")
    return _ok(name, "no tool uses a reserved name")


def check_declared_tools(env: EnvTarget) -> CheckResult:
    """The tools the class serves match the manifest's `validation.capabilities.declared_tools`,
    when it has one (OpenEnv's validator checks the same list against the running server)."""
    name = "tools.declared"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    manifest = env.manifest()
    validation = manifest.validation if manifest is not None else None
    declared = set(validation.capabilities.declared_tools) if validation is not None else set()
    served = set(cls.tool_specs)
    if not declared:
        return _ok(name, "no declared_tools (optional)")
    if declared != served:
        problems = []
        if declared - served:
            problems.append(f"declared but not served: {', '.join(sorted(declared - served))}")
        if served - declared:
            problems.append(f"served but not declared: {', '.join(sorted(served - declared))}")
        return _fail(name, f"validation.capabilities.declared_tools does not match the class's tools ({'; '.join(problems)})",
                     f"Set declared_tools in {MANIFEST_FILENAME} to {sorted(served)}, or fix the class's @tool methods")
    return _ok(name, f"declared_tools match the {len(served)} served tool(s)")


def check_tasks(env: EnvTarget) -> CheckResult:
    """`tasks()` gives records with unique ids (the Task API serves them), and each split's count
    matches the manifest's `validation.capabilities.declared_task_count`, when it has one."""
    from ..tasks import TaskIndex

    name = "environment.tasks"
    cls = env.environment_class()
    if cls is None:
        return _skip(name, "no Environment subclass")
    try:
        splits = TaskIndex(cls.tasks()).splits()
    except Exception as e:
        return _fail(name, f"{cls.__name__}.tasks(): {_one_line(e)}",
                     "Return a list of openenv_sdk.tasks.TaskRecord with unique ids (see docs/tasks.md)")
    counts = {s.name: s.num_tasks for s in splits}
    manifest = env.manifest()
    validation = manifest.validation if manifest is not None else None
    declared = validation.capabilities.declared_task_count if validation is not None else {}
    if declared and declared != counts:
        return _fail(name, f"validation.capabilities.declared_task_count is {declared}, tasks() gives {counts}",
                     f"Set declared_task_count in {MANIFEST_FILENAME} to {counts}, or fix tasks()")
    if not counts:
        return _ok(name, "no tasks declared (optional: the Task API then lists no splits)")
    return _ok(name, ", ".join(f"{n}: {c} tasks" for n, c in counts.items()))


# --- the grader ---------------------------------------------------------------------------


def check_grader(env: EnvFolder) -> CheckResult:
    """The grader (`grader: module:attr`, optional) imports and is a Rubric, a Grader class, or a callable."""
    from ..rubric import Grader, Rubric

    name = "grader"
    manifest = env.manifest()
    if manifest is None:
        return _skip(name, "the manifest did not load")
    if not manifest.grader:
        return _ok(name, "no grader declared (optional: rewards then come from the environment alone)")
    grader = env.grader()
    if grader is None:
        return _fail(name, _one_line(env.grader_error or "import failed"),
                     f"Make `{manifest.grader}` importable from {env.path}")
    if isinstance(grader, Rubric):
        return _ok(name, f"{manifest.grader} is a Rubric ({type(grader).__name__})")
    if isinstance(grader, type):
        if not issubclass(grader, Rubric):
            return _fail(name, f"{manifest.grader} is the class {grader.__name__}, not a Rubric",
                         "Subclass openenv_sdk.rubric.Grader and tag its reward methods with @reward")
        try:
            instance = grader()
            if isinstance(instance, Grader):
                instance.rubric()
        except Exception as e:
            return _fail(name, f"{grader.__name__}(): {_one_line(e)}",
                         "A grader class must build with no arguments and have at least one @reward method")
        return _ok(name, f"{manifest.grader} is a {'Grader' if issubclass(grader, Grader) else 'Rubric'} class")
    if callable(grader):
        params = [p for p in inspect.signature(grader).parameters]
        return _ok(name, f"{manifest.grader} is a reward function of ({', '.join(params)})")
    return _fail(name, f"{manifest.grader} is a {type(grader).__name__}, not a Rubric or a callable",
                 "Point `grader:` at a Grader subclass, a Rubric instance, or a reward function")


CLASS_CHECKS: tuple[Callable[[EnvTarget], CheckResult], ...] = (
    check_environment_subclass,
    check_models,
    check_steppable,
    check_tool_schemas,
    check_tool_descriptions,
    check_reserved_tool_names,
    check_declared_tools,
    check_tasks,
)
"""The rules about the environment class, for a folder's class and for a class given directly."""

STATIC_CHECKS: tuple[Callable[[EnvFolder], CheckResult | list[CheckResult]], ...] = (
    check_manifest_layout,
    check_readme,
    check_manifest,
    check_manifest_warnings,
    check_environment_declared,
    check_environment_imports,
    *CLASS_CHECKS,
    check_grader,
)
"""Every static rule of a folder, in the order they are reported (`CLASS_CHECKS` among them)."""


def run_class_checks(env: EnvTarget) -> Iterator[CheckResult]:
    """Run `CLASS_CHECKS` over a class (an `EnvClass`) or a folder's class, yielding each result."""
    for check in CLASS_CHECKS:
        yield check(env)


def run_static_checks(env: EnvFolder) -> Iterator[CheckResult]:
    """Run `STATIC_CHECKS` over a folder, yielding each result."""
    for check in STATIC_CHECKS:
        outcome = check(env)
        yield from (outcome if isinstance(outcome, list) else [outcome])
