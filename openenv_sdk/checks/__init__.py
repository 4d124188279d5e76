"""The rules `openenv validate` checks, one small `check_*` function each.

Static checks read an environment folder (`EnvFolder`): the manifest, the layout, the class,
its tools and the grader. Runtime checks speak the protocol to a running server
(`RuntimeProbe`): discovery routes, reset/step/state over `/ws`, typed errors, and MCP.
`validate_path`, `validate_url` and `validate_image` run them and return a `ValidationReport`;
`check_env` runs the class rules and the protocol rules on a class in-process, and raises.
`run_deep_checks` (`openenv validate --deep`) plays the environment and scores it; `load_oracle`
gives a folder's `oracle:` as a scripted policy. Both are imported on first use (they bring in the
evaluation runner and its clients).
"""

from typing import Any

from ._check_env import EnvCheckWarning, check_env
from ._result import CheckResult, CheckStatus, Severity, ValidationReport
from ._runtime import (
    DEFAULT_REQUEST_TIMEOUT_S,
    RUNTIME_CHECKS,
    RuntimeProbe,
    check_health,
    check_isolation,
    check_mcp_jsonrpc,
    check_mcp_official,
    check_metadata,
    check_openapi,
    check_schema,
    check_session_bounds,
    check_ws_close,
    check_ws_invalid_action,
    check_ws_request_id,
    check_ws_reset,
    check_ws_state,
    check_ws_step,
    run_runtime_checks,
)
from ._sample import SampleError, sample_from_schema
from ._static import (
    CLASS_CHECKS,
    STATIC_CHECKS,
    EnvClass,
    EnvFolder,
    EnvTarget,
    check_declared_tools,
    check_environment_declared,
    check_environment_imports,
    check_environment_subclass,
    check_grader,
    check_manifest,
    check_manifest_layout,
    check_manifest_warnings,
    check_models,
    check_readme,
    check_reserved_tool_names,
    check_steppable,
    check_tasks,
    check_tool_descriptions,
    check_tool_schemas,
    run_class_checks,
    run_static_checks,
)
from ._validate import DEFAULT_STARTUP_TIMEOUT_S, free_port, validate_image, validate_path, validate_url

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "CLASS_CHECKS",
    "RUNTIME_CHECKS",
    "STATIC_CHECKS",
    "CheckResult",
    "CheckStatus",
    "EnvCheckWarning",
    "EnvClass",
    "EnvFolder",
    "EnvTarget",
    "RuntimeProbe",
    "SampleError",
    "Severity",
    "ValidationReport",
    "check_env",
    "check_declared_tools",
    "check_environment_declared",
    "check_environment_imports",
    "check_environment_subclass",
    "check_grader",
    "check_health",
    "check_isolation",
    "check_manifest",
    "check_manifest_layout",
    "check_manifest_warnings",
    "check_mcp_jsonrpc",
    "check_mcp_official",
    "check_metadata",
    "check_models",
    "check_openapi",
    "check_readme",
    "check_reserved_tool_names",
    "check_schema",
    "check_session_bounds",
    "check_steppable",
    "check_tasks",
    "check_tool_descriptions",
    "check_tool_schemas",
    "check_ws_close",
    "check_ws_invalid_action",
    "check_ws_request_id",
    "check_ws_reset",
    "check_ws_state",
    "check_ws_step",
    "free_port",
    "run_class_checks",
    "run_runtime_checks",
    "run_static_checks",
    "sample_from_schema",
    "validate_image",
    "validate_path",
    "validate_url",
]

_DEEP = {"DeepOptions": "_deep", "DeepReport": "_deep", "Scorecard": "_deep", "run_deep_checks": "_deep",
         "load_oracle": "_oracle", "do_nothing_policy": "_oracle"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _DEEP:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_DEEP[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
