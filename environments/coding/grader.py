"""The coding environment's host-side grader: the task's hidden pytest tests.

It runs with the client or trainer, outside the container. After an episode it reads the
task's hidden tests from `hidden/<task_id>/test_*.py` on the host and sends them, with a small
report plugin (as `conftest.py`), to the environment's orchestrator-only call `run_checks`.
That call runs pytest in a trusted process that never imports the agent's code, in a fresh
private directory holding only these files: the tests' `from solution import f` gets a proxy
whose calls run in a worker that imports a copy of the solution file, in a sandbox of its own
(`openenv_sdk.grading`). The plugin writes each test's outcome to a JSON report in that
directory, which the solution cannot reach; `run_checks` reads it back.

Reward (binary by default):

- `all_passed`: 1.0 when pytest exits 0 and every expected test (`hidden/expected_tests.json`)
  passed; else 0.0;
- `partial`: the fraction of expected tests that passed (a component for analysis; it counts in
  the reward only with `CodingGrader(partial_credit=p)`: reward = (1 - p) * all_passed + p * partial).

The score's evidence lists each test's outcome, the failures' messages, collection errors and
the tail of pytest's output, for debugging.

Maintenance: `python grader.py --update-expected` rewrites `hidden/expected_tests.json` from the
hidden tests (collected against each task's reference solution).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from openenv_sdk.rubric import Grader, Rubric, Score, reward

__all__ = ["HIDDEN_DIR_ENV", "REPORT_PLUGIN", "CodingGrader", "collect_expected_tests"]

HERE = Path(__file__).resolve().parent
HIDDEN_DIR_ENV = "OPENENV_CODING_HIDDEN_DIR"
"""Where the hidden tests are on the host, when not in `hidden/` next to this file."""
EXPECTED_FILE = "expected_tests.json"
REPORT_FILE = "openenv_report.json"

REPORT_PLUGIN = r'''"""pytest plugin of the coding grader (the run's conftest.py): each test's outcome, as JSON.

It runs in the trusted pytest process, which never imports the solution (its calls go to a
sandboxed worker), and writes into a directory the solution cannot reach. A test that passes
but took longer than `--openenv-test-timeout` seconds counts as failed (one call that hangs is
cut earlier, by the remote plugin's per-call timeout).
"""

import json

_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_outcomes = {}
_messages = {}
_collect_errors = {}
_collected = []
_limit = 0.0


def pytest_addoption(parser):
    parser.addoption("--openenv-report", default="openenv_report.json")
    parser.addoption("--openenv-test-timeout", type=float, default=0.0)


def pytest_collection_finish(session):
    _collected[:] = [item.nodeid for item in session.items]


def pytest_collectreport(report):
    if report.failed:
        _collect_errors[report.nodeid or "<session>"] = report.longreprtext[-1500:]


def pytest_configure(config):
    global _limit
    _limit = config.getoption("openenv_test_timeout")


def pytest_runtest_logreport(report):
    if report.when == "call":
        outcome = "passed" if report.passed else "failed" if report.failed else "skipped"
        if outcome == "passed" and _limit and report.duration > _limit:
            outcome = "failed"
            _messages[report.nodeid] = f"the test took {report.duration:.1f} s, longer than {_limit:g} s"
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    else:
        return
    if report.failed and report.nodeid not in _messages:
        _messages[report.nodeid] = report.longreprtext[-1500:]
    if _RANK[outcome] >= _RANK[_outcomes.get(report.nodeid, "passed")]:
        _outcomes[report.nodeid] = outcome


def pytest_sessionfinish(session, exitstatus):
    report = {
        "exitstatus": int(exitstatus),
        "collected": _collected,
        "outcomes": _outcomes,
        "messages": _messages,
        "collect_errors": _collect_errors,
    }
    with open(session.config.getoption("openenv_report"), "w", encoding="utf-8") as f:
        json.dump(report, f)
'''


class CodingGrader(Grader):
    """1.0 when every hidden test of the task passes, else 0.0; `partial` is the fraction passed."""

    def __init__(
        self,
        hidden_dir: str | Path | None = None,
        *,
        partial_credit: float = 0.0,
        timeout_s: float = 45.0,
        test_timeout_s: float = 10.0,
    ) -> None:
        """Configure the grader.

        Args:
            hidden_dir: the hidden tests on the host (default `$OPENENV_CODING_HIDDEN_DIR`, else
                `hidden/` next to this file).
            partial_credit: weight of the fraction of tests passed in the reward, from 0 (binary
                reward, the default) to 1 (the fraction alone).
            timeout_s: wall-clock limit of the whole test run, in seconds; keep it below the
                client's `timeout_s` (60 s by default), so that a run that hangs scores 0 rather
                than failing the call.
            test_timeout_s: limit of each test, in seconds: a test that takes longer fails, and
                a call into the solution that runs longer is cut (its worker is restarted).
        """
        if not 0.0 <= partial_credit <= 1.0:
            raise ValueError(f"partial_credit must be in [0, 1], got {partial_credit}")
        self.hidden_dir = Path(hidden_dir or os.environ.get(HIDDEN_DIR_ENV) or HERE / "hidden")
        self.partial_credit = partial_credit
        self.timeout_s = timeout_s
        self.test_timeout_s = test_timeout_s
        self._lock = threading.Lock()
        self._expected: dict[str, list[str]] | None = None

    # --- what is sent --------------------------------------------------------------------

    def test_files(self, task_id: str) -> dict[str, str]:
        """The task's hidden test files, by name."""
        folder = self.hidden_dir / task_id
        files = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("test_*.py"))}
        if not files:
            raise FileNotFoundError(f"no hidden tests for task {task_id!r} in {folder}")
        return files

    def expected_tests(self, task_id: str) -> list[str]:
        """The node ids of the task's hidden tests, as collected against its reference."""
        with self._lock:
            if self._expected is None:
                path = self.hidden_dir / EXPECTED_FILE
                self._expected = json.loads(path.read_text(encoding="utf-8"))
        if task_id not in self._expected:
            raise KeyError(
                f"{task_id!r} is not in {self.hidden_dir / EXPECTED_FILE}; "
                f"regenerate it: python grader.py --update-expected"
            )
        return self._expected[task_id]

    def check_request(self, task_id: str) -> dict[str, Any]:
        """The arguments of the `run_checks` call for `task_id`."""
        tests = self.test_files(task_id)
        pytest_args = ["-q", "--openenv-report", REPORT_FILE, "--openenv-test-timeout", f"{self.test_timeout_s:g}"]
        return {
            "files": {**tests, "conftest.py": REPORT_PLUGIN},
            "pytest_args": [*pytest_args, *sorted(tests)],
            "timeout_s": self.timeout_s,
            "call_timeout_s": min(self.test_timeout_s, self.timeout_s),
            "collect": [REPORT_FILE],
        }

    # --- the reward --------------------------------------------------------------------------

    def rubric(self) -> Rubric:
        """The hidden tests, as the one part: the score's components and evidence stay flat."""
        return self.parts()["hidden_tests"][0]

    @reward(weight=1.0)
    async def hidden_tests(self, state: Mapping[str, Any], env: Any) -> Score:
        task_id = state.get("task_id")
        if not task_id:
            raise ValueError("the episode has no task_id: grade after reset()")
        run = env.call("run_checks", **self.check_request(task_id))
        if inspect.isawaitable(run):
            run = await run
        return self.score(task_id, run)

    def score(self, task_id: str, run: Mapping[str, Any]) -> Score:
        """The score of one `run_checks` result."""
        expected = self.expected_tests(task_id)
        report = _parse_report((run.get("collected") or {}).get(REPORT_FILE))
        outcomes: dict[str, str] = report.get("outcomes", {}) if report else {}
        tests = {nodeid: outcomes.get(nodeid, "not run") for nodeid in expected}
        passed = sum(outcome == "passed" for outcome in tests.values())
        all_passed = (
            report is not None
            and run.get("exit_code") == 0
            and report.get("exitstatus") == 0
            and not run.get("timed_out")
            and not report.get("collect_errors")
            and passed == len(expected) > 0
        )
        partial = passed / len(expected) if expected else 0.0
        value = (1.0 - self.partial_credit) * float(all_passed) + self.partial_credit * partial
        messages = report.get("messages", {}) if report else {}
        evidence: dict[str, Any] = {
            "task_id": task_id,
            "passed": passed,
            "total": len(expected),
            "tests": tests,
            "failures": {k: str(v)[-600:] for k, v in messages.items()},
            "collect_errors": report.get("collect_errors", {}) if report else {},
            "unexpected_tests": sorted(set(outcomes) - set(expected)),
            "solution_file": run.get("solution_files"),
            "exit_code": run.get("exit_code"),
            "timed_out": run.get("timed_out"),
            "duration_s": run.get("duration_s"),
            "report": "ok" if report is not None else "missing or unreadable",
            "output_tail": (str(run.get("stdout") or "") + str(run.get("stderr") or ""))[-2000:],
        }
        return Score(value=value, components={"all_passed": float(all_passed), "partial": partial}, evidence=evidence)


def _parse_report(text: Any) -> dict[str, Any] | None:
    """The report the trusted run wrote; None when it is missing or malformed."""
    if not isinstance(text, str):
        return None
    try:
        report = json.loads(text)
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("outcomes"), dict):
        return None
    return report


# --- maintenance: expected test ids ---------------------------------------------------------------


def collect_expected_tests(env_dir: Path = HERE, *, python: str = sys.executable) -> dict[str, list[str]]:
    """Collect every task's hidden tests against its reference solution (on this host)."""
    out: dict[str, list[str]] = {}
    for task_file in sorted((env_dir / "tasks").glob("*.yaml")):
        task = yaml.safe_load(task_file.read_text(encoding="utf-8"))
        hidden = env_dir / "hidden" / task["id"]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for test in hidden.glob("test_*.py"):
                shutil.copy(test, folder / test.name)
            shutil.copy(hidden / "reference.py", folder / task["solution_file"])
            (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
            run = subprocess.run(
                [python, "-m", "pytest", "--collect-only", "-q", "-c", "pytest.ini", "--rootdir", ".", "--noconftest",
                 "-p", "no:cacheprovider"],
                cwd=folder, capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            )  # fmt: skip
            if run.returncode != 0:
                raise RuntimeError(f"collecting {task['id']} failed:\n{run.stdout}\n{run.stderr}")
            out[task["id"]] = [line for line in run.stdout.splitlines() if "::" in line]
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--update-expected"]:
        sys.exit("usage: python grader.py --update-expected")
    expected = collect_expected_tests()
    target = HERE / "hidden" / EXPECTED_FILE
    target.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {sum(map(len, expected.values()))} test ids of {len(expected)} tasks to {target}")
