"""Helpers of the coding environment's tests (a uniquely named module: other environments'
tests have a `conftest.py` too, and pytest imports each of those as the module `conftest`)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

CODING_DIR = Path(__file__).resolve().parents[1]
AS_ROOT = os.geteuid() == 0


def _load(name: str, file: Path) -> ModuleType:
    # Unique module names: other environments have a `grader.py` too.
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


coding_env = _load("coding_env", CODING_DIR / "coding_env.py")
coding_grader = _load("coding_grader", CODING_DIR / "grader.py")


def reference(task_id: str) -> str:
    """The task's reference solution (host-side, from hidden/)."""
    return (CODING_DIR / "hidden" / task_id / "reference.py").read_text(encoding="utf-8")


def tool_text(result: Any) -> str:
    """The text of an MCP `CallToolResult`."""
    return "".join(getattr(part, "text", "") for part in result.content)


def connect(owner: Any) -> Any:
    """Another session on `owner`'s server (a `GenericEnvClient`), with the orchestrator's token
    (the server's orchestrator API requires it)."""
    from openenv_sdk.client import GenericEnvClient

    assert owner.base_url is not None
    token = owner.provider.orchestrator_token if owner.provider is not None else None
    return GenericEnvClient(owner.base_url, orchestrator_token=token)
