"""The coding environment's host-side grader: the task's hidden pytest tests.

It runs with the client or trainer, outside the container. After an episode it reads the
task's hidden tests from `hidden/<task_id>/test_*.py` on the host and sends them to the
environment's orchestrator-only call `run_checks`, which hands them to the SDK's
`openenv_sdk.grading.pytest_run.run_hidden_tests`: pytest runs them in a trusted process that
never imports the agent's code, in a fresh private directory holding only these files; the
tests' `from solution import f` gets a proxy whose calls run in a worker that imports a copy of
the solution file, in a sandbox of its own. What comes back is a `HiddenTestRun`: each test's
outcome, written by trusted code where the solution cannot reach.

Reward (binary by default):

- `all_passed`: 1.0 when the run completed (pytest exited 0 within its limit, nothing failed to
  collect) and every expected test (`hidden/expected_tests.json`) passed
  (`HiddenTestRun.all_passed(expected)`); else 0.0;
- `partial`: the fraction of expected tests that passed (`HiddenTestRun.fraction_passed(expected)`;
  a component for analysis; it counts in the reward only with `CodingGrader(partial_credit=p)`:
  reward = (1 - p) * all_passed + p * partial).

The score's evidence lists each expected test's outcome, the failures' messages, collection
errors and the tail of pytest's output, for debugging.

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

from openenv_sdk.grading.pytest_run import HiddenTestRun
from openenv_sdk.rubric import Grader, Rubric, Score, reward

__all__ = ["HIDDEN_DIR_ENV", "CodingGrader", "collect_expected_tests"]

HERE = Path(__file__).resolve().parent
HIDDEN_DIR_ENV = "OPENENV_CODING_HIDDEN_DIR"
"""Where the hidden tests are on the host, when not in `hidden/` next to this file."""
EXPECTED_FILE = "expected_tests.json"


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
        """The arguments of the `run_checks` call for `task_id`: its hidden tests, run in name order."""
        tests = self.test_files(task_id)
        per_test_s = min(self.test_timeout_s, self.timeout_s)
        return {
            "files": tests,
            "pytest_args": sorted(tests),
            "timeout_s": self.timeout_s,
            "call_timeout_s": per_test_s,
            "test_timeout_s": per_test_s,
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

    def score(self, task_id: str, answer: Mapping[str, Any] | HiddenTestRun) -> Score:
        """The score of one `run_checks` answer (a `HiddenTestRun`, or the dict it crossed the wire as)."""
        expected = self.expected_tests(task_id)
        run = HiddenTestRun.model_validate(answer)
        all_passed = run.all_passed(expected)
        partial = run.fraction_passed(expected)
        value = (1.0 - self.partial_credit) * float(all_passed) + self.partial_credit * partial
        tests = {test: run.outcomes.get(test, "not run") for test in expected}
        evidence: dict[str, Any] = {
            "task_id": task_id,
            "passed": sum(outcome == "passed" for outcome in tests.values()),
            "total": len(expected),
            "tests": tests,
            "failures": {test: message[-600:] for test, message in run.messages.items()},
            "collect_errors": run.collect_errors,
            "unexpected_tests": sorted(set(run.outcomes) - set(expected)),
            "solution_file": run.solution_files,
            "exit_code": run.exit_code,
            "timed_out": run.timed_out,
            "duration_s": run.duration_s,
            "report": "ok" if run.report_read else "missing or unreadable",
            "output_tail": run.output_tail[-2000:],
        }
        return Score(value=value, components={"all_passed": float(all_passed), "partial": partial}, evidence=evidence)


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
