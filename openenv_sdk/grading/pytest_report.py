"""pytest plugin: each test's outcome as one JSON file, written by the trusted pytest process.

Load it with `-p openenv_sdk.grading.pytest_report --grading-report PATH` in a run whose tests
call the solution only through `openenv_sdk.grading.pytest_remote` (the solution never runs in this
process, so nothing of its can change what this plugin writes). PATH should be in a directory the
solution cannot reach; the caller reads it after the run. A run that was killed, or crashed,
leaves no file (the caller says "report missing").

The file: {"finished": true, "exitstatus": int, "collected": [node ids], "outcomes": {node id:
"passed" | "failed" | "error" | "skipped"}, "messages": {node id: the tail of the failure},
"collect_errors": {node id: the tail of the error}}. A test that passed but ran longer than
`--grading-test-timeout` seconds counts as failed (one call that hangs is cut earlier, by the
remote plugin's per-call timeout).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

__all__: list[str] = []

_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_MESSAGE_CHARS = 1500
_STATE = pytest.StashKey[dict[str, Any]]()
_CONFIG: list[pytest.Config] = []
"""The run's config (report hooks get no config of their own)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grading-report", "each test's outcome as JSON (openenv_sdk.grading)")
    group.addoption("--grading-report", help="where to write the JSON report (required to write one)")
    group.addoption("--grading-test-timeout", type=float, default=0.0, help="a passing test longer than this fails")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = {"collected": [], "outcomes": {}, "messages": {}, "collect_errors": {}}
    _CONFIG[:] = [config]


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_STATE]["collected"] = [item.nodeid for item in session.items]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        state = _state()
        if state is not None:
            state["collect_errors"][report.nodeid or "<session>"] = report.longreprtext[-_MESSAGE_CHARS:]


def _state() -> dict[str, Any] | None:
    return _CONFIG[0].stash.get(_STATE, None) if _CONFIG else None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _state()
    if state is None:
        return
    limit = _CONFIG[0].getoption("grading_test_timeout")
    messages, outcomes = state["messages"], state["outcomes"]
    if report.when == "call":
        outcome = "passed" if report.passed else "failed" if report.failed else "skipped"
        if outcome == "passed" and limit and report.duration > limit:
            outcome = "failed"
            messages[report.nodeid] = f"the test took {report.duration:.1f} s, longer than {limit:g} s"
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    if report.failed and report.nodeid not in messages:
        messages[report.nodeid] = report.longreprtext[-_MESSAGE_CHARS:]
    if _RANK[outcome] >= _RANK[outcomes.get(report.nodeid, "passed")]:
        outcomes[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = session.config.getoption("grading_report")
    if not path:
        return
    state = session.config.stash[_STATE]
    report = {"finished": True, "exitstatus": int(exitstatus), **state}
    temporary = f"{path}.part"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(report, f)
    os.replace(temporary, path)  # whole or absent
