"""`openenv eval` and `collect` count failed tool calls and failed episodes by cause, in the
table, the JSON summary and the report; a run where tool calls failed never says "0 errors".

The environment is served on a real port; a scripted policy calls a tool that raises (the way
a thread-bound resource used from the wrong thread does), an unknown tool, and one that works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_sdk import Environment, create_app, tool
from openenv_sdk.cli.main import app
from openenv_sdk.evaluation import EpisodeLog, EpisodeRecord
from openenv_sdk.evaluation._metrics import summarize
from openenv_sdk.evaluation._report import markdown_report
from openenv_sdk.testing import serve_app

LOOKUP_CAUSE = "Tool 'lookup' failed: RuntimeError: objects created in thread N can only be used in that thread"


class Lookup(Environment):
    """A tool that always fails with a message naming a thread id, and one that works."""

    @tool
    def lookup(self, key: str) -> str:
        """Look a key up."""
        raise RuntimeError(f"objects created in thread {abs(hash(key)) % 100000} can only be used in that thread")

    @tool
    def echo(self, message: str) -> str:
        """Say it back."""
        return message


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Three tool calls on the first turn (one fails in the tool, one names no tool), then stop."""
    if context.turn == 0:
        return {"tool_calls": [
            {"name": "lookup", "arguments": {"key": context.key}},
            {"name": "nope", "arguments": {}},
            {"name": "echo", "arguments": {"message": "hi"}},
        ]}  # fmt: skip
    return "Done."


def grader(task: dict[str, Any], transcript: list[dict[str, Any]]) -> float:
    """Half a point for an echo that came back."""
    return 0.5 * any(e["tool"] == "echo" and e["output"] == "hi" for e in transcript)


@pytest.fixture
def lookup_url() -> Iterator[str]:
    with serve_app(create_app(Lookup)) as url:
        yield url


def _run(command: str, url: str, out: Path, *extra: str) -> Any:
    args = [command, url, "--policy", "scripted:tests.evaluation.test_tool_errors:act",
            "--grader", "tests.evaluation.test_tool_errors:grader", "-n", "4", "-c", "4", "-o", str(out), *extra]  # fmt: skip
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def test_eval_counts_failed_tool_calls_by_cause(lookup_url: str, tmp_path: Path) -> None:
    result = _run("eval", lookup_url, tmp_path / "run")
    assert result.exit_code == 0, result.output  # the episodes were graded: tool errors are data
    assert "0 errors" not in result.output
    assert "8 of 12 tool call(s) failed" in result.output
    assert "failed tool calls by cause" in result.output and LOOKUP_CAUSE in result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["graded"], summary["errors"], summary["mean_reward"]) == (4, 0, 0.5)
    assert (summary["tool_calls"], summary["tool_errors"]) == (12, 8)
    causes = summary["tool_errors_by_cause"]
    assert causes[LOOKUP_CAUSE] == 4  # four thread ids, one cause
    [unknown] = [cause for cause in causes if cause != LOOKUP_CAUSE]
    assert causes[unknown] == 4 and "Unknown tool 'nope'" in unknown
    assert [task["tool_errors"] for task in summary["per_task"]] == [2, 2, 2, 2]
    for record in EpisodeLog(tmp_path / "run" / "episodes.jsonl").load().values():
        assert (record.tool_calls, record.tool_errors, record.tool_error_causes[LOOKUP_CAUSE]) == (3, 2, 1)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| tool calls / failed tool calls | 12 / 8 |" in report
    assert f"| 4 | {LOOKUP_CAUSE} |" in report


def test_collect_json_summary_counts_failed_tool_calls_and_episodes_by_cause(lookup_url: str, tmp_path: Path) -> None:
    result = _run("collect", lookup_url, tmp_path / "run", "--json", "--episode-timeout-s", "30")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{") :])
    assert (summary["tool_calls"], summary["tool_errors"], summary["errors_by_cause"]) == (12, 8, {})
    assert summary["tool_errors_by_cause"][LOOKUP_CAUSE] == 4


def test_failed_episodes_are_counted_by_cause() -> None:
    records = [
        EpisodeRecord(key=f"t{i}#0", task_id=f"t{i}", error=f"[HTTP_502] POST http://10.0.0.{i}:8000/v1: bad gateway")
        for i in range(3)
    ] + [EpisodeRecord(key="t9#0", task_id="t9", error="the episode did not end within 5 s (episode_timeout_s)")]
    records.append(EpisodeRecord(key="ok#0", task_id="ok", reward=1.0, passed=True, tool_calls=2, tool_errors=1,
                                 tool_error_causes={"error: Unknown tool 'x'": 1}))  # fmt: skip
    summary = summarize(records, ks=[1], pass_threshold=1.0, command="eval", env="e", policy="p", model="m",
                        split=None, tasks=5, rollouts_per_task=1)  # fmt: skip
    assert summary.errors_by_cause == {
        "[HTTP_N] POST http://N.N.N.N:N/vN: bad gateway": 3,
        "the episode did not end within N s (episode_timeout_s)": 1,
    }
    assert (summary.tool_calls, summary.tool_errors, summary.tool_errors_by_cause) == (2, 1, {"error: Unknown tool 'x'": 1})
    report = markdown_report(summary, records)
    assert "| graded / failed episodes | 1 / 4 |" in report
    assert "## Failed episodes by cause" in report and "| 3 | [HTTP_N] POST http://N.N.N.N:N/vN: bad gateway |" in report
