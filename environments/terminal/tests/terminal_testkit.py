"""What the terminal environment's tests share: its modules, solutions as tool calls, a replay.

The environment's modules are loaded under names of their own (`terminal_env`,
`terminal_grader`), so they never collide with another environment's `grader` in one pytest run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ENV_DIR = Path(__file__).resolve().parents[1]
HIDDEN_DIR = ENV_DIR / "hidden"
IS_ROOT = os.geteuid() == 0
BLOCK_SEPARATOR = re.compile(r"(?m)^# ---[ \t]*$")


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


terminal_env = _load("terminal_env", ENV_DIR / "terminal_env.py")
terminal_grader = _load("terminal_grader", ENV_DIR / "grader.py")


def client_of(owner: Any) -> Any:
    """Another client (so another session) of the server that `owner` started, with the server's
    orchestrator token when it has one."""
    from openenv_sdk.client import GenericEnvClient

    token = getattr(owner.provider, "orchestrator_token", None)
    auth = {"orchestrator_token": token} if token else {}
    return GenericEnvClient(owner.base_url, **auth)


def script_blocks(task_id: str, kind: str) -> list[str]:
    """`hidden/<task_id>/<kind>.sh` as the bash tool calls it is replayed as (blocks between
    `# ---` lines); no file, or an empty one, is no call at all."""
    path = HIDDEN_DIR / task_id / f"{kind}.sh"
    if not path.is_file():
        return []
    return [block.strip("\n") for block in BLOCK_SEPARATOR.split(path.read_text()) if block.strip()]


@dataclass
class Outcome:
    task_id: str
    kind: str
    score: float
    evidence: dict[str, Any]
    tool_errors: list[str]


def play(client: Any, task_id: str, kind: str) -> Outcome:
    """One episode through a client: reset, each block through the agent's MCP `bash` tool, grade."""
    from openenv_sdk.rubric import grade

    client.reset(task_id=task_id)
    errors = []
    for block in script_blocks(task_id, kind):
        result = client.call_tool("bash", command=block)
        if result.is_error:
            errors.append(result.content[0].text)
    score = grade(terminal_grader.TerminalGrader(), client)
    return Outcome(task_id, kind, score.value, score.evidence.get("check_passes", {}), errors)


def replay_in_parallel(
    make_client: Callable[[], Any], jobs: list[tuple[str, str]], *, threads: int = 4
) -> list[Outcome]:
    """Play `(task_id, kind)` jobs on `threads` clients at once (one client, one session, per thread)."""
    local = threading.local()
    made: list[Any] = []
    lock = threading.Lock()

    def run(job: tuple[str, str]) -> Outcome:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = make_client()
            with lock:
                made.append(client)
        return play(client, *job)

    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="replay") as pool:
            return list(pool.map(run, jobs))
    finally:
        for client in made:
            client.close()


def describe_failures(outcomes: list[Outcome], want: dict[str, float]) -> list[str]:
    """One line per episode whose score is not what its kind should score."""
    return [
        f"{o.task_id} ({o.kind}): score {o.score}, want {want[o.kind]}; failed: {o.evidence.get('failed')}; "
        f"tool errors: {o.tool_errors}; output: {o.evidence.get('output', '')[-600:]}"
        for o in outcomes
        if o.score != want[o.kind]
    ]
