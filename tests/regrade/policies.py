"""Scripted policies for the regrade tests (`--policy scripted:tests.regrade.policies:...`).

Each solves its task on even attempts (the environment's oracle) and leaves it undone on odd
ones, so that a run holds both rewards; the attack policies play the forgeries of
tests/security as the agent's turn.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


def _oracle(env: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_regrade_oracle_{env}", ENVIRONMENTS / env / "oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TERMINAL = _oracle("terminal")
_CODING = _oracle("coding")


def terminal_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    if context.attempt % 2 == 0:
        return _TERMINAL.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    return {"content": None, "tool_calls": [{"name": "bash", "arguments": {"command": "echo nothing done > notes.txt"}}]}


def coding_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> Any:
    if context.attempt % 2 == 0:
        return _CODING.act(messages, tools, context)
    if context.turn > 0:
        return "Done."
    solution_file = context.task.get("solution_file") or "solution.py"
    return {"content": None, "tool_calls": [{"name": "write_file", "arguments": {"path": solution_file, "content": "x = 1\n"}}]}
