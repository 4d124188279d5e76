"""pytest plugin of `run_hidden_tests`: each test's outcome, written as JSON when the run ends.

Loaded with `-p openenv_sdk.grading._pytest_report` in the trusted pytest process (which never
imports the solution: its calls go to a sandboxed worker), so the report is written by trusted
code into the run's private directory, which the solution cannot reach. A test that passes but
took longer than `--grading-test-timeout` seconds counts as failed (one call that hangs is cut
earlier, by the remote plugin's per-call timeout).

The report: `{"exitstatus": int, "collected": [nodeid, ...], "outcomes": {nodeid: "passed" |
"failed" | "error" | "skipped"}, "messages": {nodeid: text}, "collect_errors": {nodeid: text}}`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

__all__: list[str] = []

MESSAGE_CHARS = 1500
"""Characters kept of each failure's text (its tail)."""
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grading-report", "per-test outcomes as JSON (openenv_sdk.grading.pytest_run)")
    group.addoption("--grading-report", help="file the JSON report is written to")
    group.addoption(
        "--grading-test-timeout", type=float, default=0.0,
        help="a passing test that took longer than this many seconds counts as failed (0: no limit)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("grading_report")
    if path:
        config.pluginmanager.register(_Report(path, config.getoption("grading_test_timeout")), "grading-report")


class _Report:
    """The run's outcomes, gathered by hooks and written at the end."""

    def __init__(self, path: str, limit_s: float) -> None:
        self.path = path
        self.limit_s = limit_s
        self.collected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.messages: dict[str, str] = {}
        self.collect_errors: dict[str, str] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid or "<session>"] = report.longreprtext[-MESSAGE_CHARS:]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            outcome = "passed" if report.passed else "failed" if report.failed else "skipped"
            if outcome == "passed" and self.limit_s and report.duration > self.limit_s:
                outcome = "failed"
                self.messages[report.nodeid] = f"the test took {report.duration:.1f} s, longer than {self.limit_s:g} s"
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "skipped"
        else:
            return
        if report.failed and report.nodeid not in self.messages:
            self.messages[report.nodeid] = report.longreprtext[-MESSAGE_CHARS:]
        if _RANK[outcome] >= _RANK[self.outcomes.get(report.nodeid, "passed")]:
            self.outcomes[report.nodeid] = outcome

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        report: dict[str, Any] = {
            "exitstatus": int(exitstatus),
            "collected": self.collected,
            "outcomes": self.outcomes,
            "messages": self.messages,
            "collect_errors": self.collect_errors,
        }
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(report, f)
