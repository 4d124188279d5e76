"""A pytest plugin that records the episodes the security tests play, for the monitor's benchmark.

Run the attack tests with it (`-p tests.monitor.record_attacks`, `OPENENV_RECORD_EPISODES=out.jsonl`):
every session's tool calls (name, arguments, the text the agent got back, whether it was a tool
error) and the reward its grading gave are written, one episode per line, under the test's id.
The episodes are the real ones: real servers, real sandboxes, the agent's tool calls over MCP.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from openenv_sdk import rubric
from openenv_sdk.client import _sync

OUT_ENV = "OPENENV_RECORD_EPISODES"
_lock = threading.Lock()
_current: dict[str, str] = {"test": ""}
_episodes: dict[int, dict[str, Any]] = {}  # id(client) -> the episode it plays now
_done: list[dict[str, Any]] = []


def _episode(client: Any) -> dict[str, Any]:
    with _lock:
        episode = _episodes.get(id(client))
        if episode is None:
            episode = _episodes[id(client)] = {"test": _current["test"], "task_id": None, "calls": [], "reward": None}
        return episode


def _flush(client: Any) -> None:
    with _lock:
        episode = _episodes.pop(id(client), None)
        if episode is not None and episode["calls"]:
            _done.append(episode)


_reset, _call_tool, _close, _grade = _sync.EnvClient.reset, _sync.EnvClient.call_tool, _sync.EnvClient.close, rubric.grade


def _recording_reset(self: Any, **kwargs: Any) -> Any:
    _flush(self)
    _episode(self)["task_id"] = kwargs.get("task_id")
    return _reset(self, **kwargs)


def _recording_call_tool(self: Any, name: str, /, **arguments: Any) -> Any:
    result = _call_tool(self, name, **arguments)
    text = "".join(getattr(part, "text", "") for part in result.content)
    _episode(self)["calls"].append({"name": name, "arguments": arguments, "output": text, "is_error": bool(result.is_error)})
    return result


def _recording_close(self: Any) -> None:
    _flush(self)
    _close(self)


def _recording_grade(grader: Any, client: Any) -> Any:
    score = _grade(grader, client)
    _episode(client)["reward"] = score.value
    return score


def pytest_configure(config: pytest.Config) -> None:
    _sync.EnvClient.reset = _recording_reset  # type: ignore[method-assign]
    _sync.EnvClient.call_tool = _recording_call_tool  # type: ignore[method-assign]
    _sync.EnvClient.close = _recording_close  # type: ignore[method-assign]
    rubric.grade = _recording_grade  # type: ignore[assignment]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _current["test"] = item.nodeid
    yield
    with _lock:  # a module-scoped client keeps its session across tests: one episode per test
        _done.extend(episode for episode in _episodes.values() if episode["calls"])
        _episodes.clear()


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get(OUT_ENV)
    if not out:
        return
    with _lock, open(out, "w", encoding="utf-8") as f:
        for episode in _done + [e for e in _episodes.values() if e["calls"]]:
            f.write(json.dumps(episode) + "\n")
