"""Hidden pytest tests against an agent's solution, graded where the agent's code never runs: one call.

On the server, in an orchestrator-only call (never a tool), with the session's `Sandbox`:

    from openenv_sdk.grading.pytest_run import run_hidden_tests

    run = run_hidden_tests(session_sandbox, {"test_add.py": hidden_text}, ["solution.py"])
    run.outcomes            # {"test_add.py::test_small": "passed", ...}
    run.all_passed()        # True only when the run completed and every collected test passed
    return run.model_dump() # the host-side grader reads it back: HiddenTestRun.model_validate(...)

What one call does (the grading rule of docs/grading.md):

1. reads each solution file from the session's working directory as the session's user, inside
   its sandbox, never through a symbolic link (regular files of at most `MAX_SOLUTION_BYTES`);
2. writes the grader's `tests` into a fresh private directory of the server's (0700, outside
   every sandbox) with an empty `pytest.ini`: no file of the agent's is ever there;
3. makes a second, fresh sandbox (its own uid, no network) holding only read-only copies of the
   solution files;
4. runs `python -I -m pytest` in the private directory, as the server's user, with the remote
   plugin (`openenv_sdk.grading.pytest_remote`) and a report plugin: a trusted process that never
   imports the agent's code and reads no configuration but the grader's. A test's
   `from solution import f` gets a proxy whose calls go over a pipe to a worker (`python -I -S`)
   that imports the copies in the second sandbox; values come back decoded with bounds, and a
   worker object is a proxy whose `==` is identity (a lying `__eq__` does not pass);
5. reads each test's outcome back from the private directory, then removes both directories and
   every process of the worker's sandbox.

So nothing the solution does reaches the verdict but the values its functions return: not
monkeypatching pytest, not exiting at import, not printing "passed" lines, not a conftest.py or
pytest.ini beside it, not writing a report file.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from openenv_sdk.grading.remote import DEFAULT_TIMEOUT_S, RemoteSession
from openenv_sdk.sandbox import Isolation, Sandbox, SandboxLimits, run_command

__all__ = [
    "DEFAULT_RUN_TIMEOUT_S",
    "MAX_RUN_TIMEOUT_S",
    "MAX_SOLUTION_BYTES",
    "MAX_TESTS_BYTES",
    "HiddenTestRun",
    "Outcome",
    "check_solution_file",
    "run_hidden_tests",
]

DEFAULT_RUN_TIMEOUT_S = 60.0
"""Wall-clock limit of one whole run (collection and every test), in seconds."""
MAX_RUN_TIMEOUT_S = 300.0
MAX_SOLUTION_BYTES = 1024 * 1024
"""Largest solution file copied; a larger one is not copied (its tests then fail)."""
MAX_TESTS_BYTES = 8 * 1024 * 1024
"""Largest total size of the grader's files."""
REPORT_FILE = ".openenv_grading_report.json"
REPORT_LIMIT_BYTES = 4 * 1024 * 1024
OUTPUT_TAIL_CHARS = 4000
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PYTHON = os.path.abspath(sys.executable)
"""The interpreter of both processes (the sandbox mounts the runtime at the same path)."""

_SOLUTION_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$")

Outcome = Literal["passed", "failed", "error", "skipped"]


class HiddenTestRun(BaseModel):
    """What one run of the hidden tests gave: per-test outcomes, and how the run ended.

    It crosses the wire as a dict (`model_dump()` on the server, `model_validate` in the grader).
    """

    exit_code: int = Field(description="pytest's exit status (0: every test passed); 124 when the run timed out.")
    timed_out: bool = Field(default=False, description="The run hit its wall-clock limit and was killed.")
    duration_s: float = Field(default=0.0, description="Wall time of the run, in seconds.")
    report_read: bool = Field(
        default=False, description="The report was written and read back (False: the run broke before its end)."
    )
    collected: list[str] = Field(default_factory=list, description="Test ids pytest collected, in order.")
    outcomes: dict[str, Outcome] = Field(default_factory=dict, description="Test id -> its outcome.")
    messages: dict[str, str] = Field(default_factory=dict, description="Test id -> the tail of its failure.")
    collect_errors: dict[str, str] = Field(default_factory=dict, description="Test file -> why it did not collect.")
    solution_files: dict[str, str] = Field(
        default_factory=dict,
        description='Solution file -> "copied", "missing", "a symbolic link (not followed)", "not a regular file", '
        '"too large (...)" or "not readable (...)".',
    )
    output_tail: str = Field(default="", description="The tail of pytest's output (and the solution's, on failures).")

    def passed(self) -> list[str]:
        """The ids of the tests that passed."""
        return [test for test, outcome in self.outcomes.items() if outcome == "passed"]

    def all_passed(self, expected: Collection[str] | None = None) -> bool:
        """Whether the run completed and every test passed: the report was read, pytest exited 0
        within its limit, nothing failed to collect, at least one test ran and every collected
        test passed. With `expected` (test ids, e.g. collected once against a reference), every
        one of them must be among those that passed too (and there must be at least one)."""
        passed = set(self.passed())
        complete = (
            self.report_read
            and self.exit_code == 0
            and not self.timed_out
            and not self.collect_errors
            and len(self.collected) > 0
            and all(test in passed for test in self.collected)
        )
        if expected is not None:
            return complete and len(expected) > 0 and all(test in passed for test in expected)
        return complete

    def fraction_passed(self, expected: Collection[str] | None = None) -> float:
        """The share of `expected` (default: the collected tests) that passed; 0.0 when there are none."""
        tests = list(expected) if expected is not None else self.collected
        if not tests:
            return 0.0
        passed = set(self.passed())
        return sum(test in passed for test in tests) / len(tests)


def run_hidden_tests(
    sandbox: Sandbox,
    tests: Mapping[str, str],
    solution_files: Sequence[str],
    *,
    pytest_args: Sequence[str] = (),
    timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
    call_timeout_s: float = DEFAULT_TIMEOUT_S,
    test_timeout_s: float | None = None,
    worker_limits: SandboxLimits | None = None,
) -> HiddenTestRun:
    """Run the grader's pytest files against the solution files of `sandbox`'s working directory,
    in a trusted process that never imports them (see the module's docstring). Blocks until the
    run ends (at most about `timeout_s`); never raises for anything the solution does.

    Args:
        sandbox: the agent's session sandbox; the solution files are read from its `workspace`.
        tests: relative path -> text: the hidden test files, and any conftest.py or data file of
            the grader's (a `pytest.ini` among them replaces the empty one).
        solution_files: the graded files, `<module>.py` in the working directory (e.g.
            `["solution.py"]`); the tests import them by module name.
        pytest_args: more pytest arguments (e.g. `["-x"]`, or the test files to run; by default
            pytest collects every `test_*.py` of `tests`).
        timeout_s: wall-clock limit of the whole run, in seconds; then every process is killed
            and the run's tests that had not passed count as not run.
        call_timeout_s: limit of one call into the solution, in seconds (that call then raises
            `RemoteTimeout` in the test, and the next call starts a fresh worker).
        test_timeout_s: a test that passes but took longer fails (default: `call_timeout_s`).
        worker_limits: the worker's memory, process and file-size limits (default: the
            session sandbox's limits).

    Returns:
        The run's outcomes; `HiddenTestRun.all_passed()` is the usual verdict.

    Raises:
        ValueError: a bad path or size among `tests`, a solution file that is not a top-level
            module file or would shadow a module the trusted side needs, or a bad timeout.
    """
    modules = _check_arguments(tests, solution_files, pytest_args, timeout_s, call_timeout_s, test_timeout_s)
    limits = worker_limits or sandbox.limits
    status, contents = _read_solution_files(sandbox, solution_files)
    trusted = Path(tempfile.mkdtemp(prefix="openenv-grading-"))  # 0700, the server's own
    worker: Sandbox | None = None
    try:
        (trusted / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # no configuration found above it
        for name, text in tests.items():
            target = trusted / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        worker = Sandbox(limits=limits, name="grading-worker", base_dir=sandbox.root.parent)
        worker.make_dir("work", writable=False)  # the worker writes nothing there
        for name, data in contents.items():
            copy = worker.workspace / name
            copy.write_bytes(data)
            copy.chmod(0o444)  # the server's: the worker reads it, nobody changes it
        argv = [
            PYTHON, "-I", "-m", "pytest", "-p", "openenv_sdk.grading.pytest_remote",
            "-p", "openenv_sdk.grading._pytest_report",
            "--remote-modules", ",".join(modules), "--remote-dir", str(worker.workspace),
            "--remote-spawn-prefix", json.dumps(_worker_prefix(worker, limits)), "--remote-python", _python_of(worker),
            "--remote-timeout", f"{call_timeout_s:g}",
            "--grading-report", REPORT_FILE, "--grading-test-timeout", f"{test_timeout_s or call_timeout_s:g}",
            "-c", "pytest.ini", "--rootdir", ".", "-p", "no:cacheprovider", "-q", *pytest_args,
        ]  # fmt: skip
        result = run_command(
            argv,
            cwd=trusted,
            env={"PATH": SYSTEM_PATH, "HOME": str(trusted), "LANG": "C.UTF-8", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                 "PYTHONDONTWRITEBYTECODE": "1"},
            limits=SandboxLimits(timeout_s=timeout_s, max_output_bytes=64 * 1024, memory_bytes=None,
                                 max_processes=None, max_file_bytes=None, sandbox_user=None),
        )  # fmt: skip
        report = _read_report(trusted / REPORT_FILE)
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(trusted, ignore_errors=True)
    run = HiddenTestRun(
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=round(result.duration_s, 3),
        solution_files=status,
        output_tail=(result.stdout + result.stderr)[-OUTPUT_TAIL_CHARS:],
    )
    if report is not None:
        run = run.model_copy(update={**report, "report_read": True})
    return run


# --- checks -----------------------------------------------------------------------------------


def _check_arguments(
    tests: Mapping[str, str],
    solution_files: Sequence[str],
    pytest_args: Sequence[str],
    timeout_s: float,
    call_timeout_s: float,
    test_timeout_s: float | None,
) -> list[str]:
    """The solution's module names, once every argument is checked."""
    if not 0 < timeout_s <= MAX_RUN_TIMEOUT_S:
        raise ValueError(f"timeout_s must be in (0, {MAX_RUN_TIMEOUT_S:g}], got {timeout_s}")
    if not 0 < call_timeout_s <= timeout_s:
        raise ValueError(f"call_timeout_s must be in (0, timeout_s], got {call_timeout_s}")
    if test_timeout_s is not None and not 0 < test_timeout_s <= timeout_s:
        raise ValueError(f"test_timeout_s must be in (0, timeout_s], got {test_timeout_s}")
    if isinstance(pytest_args, str) or not all(isinstance(word, str) for word in pytest_args):
        raise ValueError("pytest_args must be a list of strings")
    if isinstance(solution_files, str) or not solution_files:
        raise ValueError('solution_files must be a non-empty list of file names, e.g. ["solution.py"]')
    modules = [check_solution_file(name).removesuffix(".py") for name in solution_files]
    if not tests:
        raise ValueError("tests is empty: give at least one test file")
    size = 0
    for name, text in tests.items():
        if not isinstance(text, str):
            raise ValueError(f"tests[{name!r}] must be text")
        path = PurePosixPath(name)
        if not name or path.is_absolute() or any(part in ("", ".", "..") for part in path.parts) or "\\" in name:
            raise ValueError(f"{name!r} must be a relative path without '.' or '..' parts")
        if path.parts[0] in (REPORT_FILE, *solution_files, *modules):
            raise ValueError(f"tests may not hold {name!r}: that name is the solution's or the report's")
        size += len(text.encode("utf-8"))
    if size > MAX_TESTS_BYTES:
        raise ValueError(f"tests hold {size} bytes, more than {MAX_TESTS_BYTES}")
    return modules


# --- the solution's files ------------------------------------------------------------------------


def check_solution_file(name: str) -> str:
    """`name`, if `run_hidden_tests` can grade it: a module file of the working directory
    (`<identifier>.py`) whose module shadows nothing the trusted side imports (the standard
    library, pytest, pluggy, conftest, openenv_sdk). An environment can check its tasks' solution
    files with it when it loads them, by the same rule.

    Raises:
        ValueError: naming the problem.
    """
    if not isinstance(name, str) or not _SOLUTION_FILE.match(name):
        raise ValueError(f"solution file {name!r} must be a module file in the working directory, e.g. 'solution.py'")
    RemoteSession([name.removesuffix(".py")], ".")  # its own check of the name (it starts nothing)
    return name


_READER = r"""
import base64, errno, json, os, stat, sys
limit, out = int(sys.argv[1]), {}
for name in sys.argv[2:]:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        out[name] = ["missing"]
        continue
    except OSError as e:
        out[name] = ["a symbolic link (not followed)" if e.errno == errno.ELOOP else f"not readable ({e.strerror})"]
        continue
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            out[name] = ["not a regular file"]
            continue
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            out[name] = [f"too large (over {limit} bytes)"]
        else:
            out[name] = ["copied", base64.b64encode(b"".join(chunks)).decode()]
    finally:
        os.close(fd)
sys.stdout.write(json.dumps(out))
"""


def _read_solution_files(sandbox: Sandbox, names: Sequence[str]) -> tuple[dict[str, str], dict[str, bytes]]:
    """Each file's status and the content of those copied. Read as the session's user, in its
    sandbox (in a container root has no CAP_DAC_OVERRIDE, and reading as the owner never reads
    more than the owner could), by `python -I -S` (no site, no agent-planted startup file)."""
    if not sandbox.workspace.is_dir():
        return dict.fromkeys(names, "missing (the working directory is gone)"), {}
    limits = sandbox.limits.model_copy(update={
        "timeout_s": 30.0, "max_output_bytes": len(names) * (2 * MAX_SOLUTION_BYTES + 256) + 1024, "max_processes": None,
    })  # fmt: skip
    result = sandbox.run(
        [_python_of(sandbox), "-I", "-S", "-c", _READER, str(MAX_SOLUTION_BYTES), *names],
        env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
        limits=limits,
    )
    try:
        answer = json.loads(result.stdout) if result.exit_code == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        why = f"not read (the reader exited {result.exit_code}: {result.stderr.strip()[-200:]})"
        return dict.fromkeys(names, why), {}
    status: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    for name in names:
        entry = answer.get(name)
        if not (isinstance(entry, list) and entry and isinstance(entry[0], str)):
            status[name] = "not read"
            continue
        status[name] = entry[0]
        if entry[0] == "copied":
            try:
                contents[name] = base64.b64decode(entry[1], validate=True)
            except (IndexError, TypeError, binascii.Error):
                status[name] = "not read"
    return status, contents


# --- the worker and the report -------------------------------------------------------------------


def _worker_prefix(worker: Sandbox, limits: SandboxLimits) -> list[str]:
    """What goes before the worker's command: its kernel limits, then its sandbox (bubblewrap:
    no network, its folder holding only the solution's copies; or, with the operator's opt-out,
    only a switch to the sandbox's user)."""
    prefix = ["prlimit", "--core=0"]
    if limits.memory_bytes is not None:
        prefix.append(f"--as={limits.memory_bytes}")
    if limits.max_file_bytes is not None:
        prefix.append(f"--fsize={limits.max_file_bytes}")
    if limits.max_processes is not None:
        # RLIMIT_NPROC counts every process of the uid: a uid of its own counts only the worker's
        extra = 0 if worker.privileged else _threads_of(worker.uid) + 8
        prefix.append(f"--nproc={limits.max_processes + extra}")
    prefix.append("--")
    if worker.isolation is Isolation.BWRAP:
        prefix += worker.wrap([], cwd=worker.workspace)
    elif worker.privileged:
        prefix += ["setpriv", f"--reuid={worker.uid}", f"--regid={worker.gid}", "--clear-groups", "--"]
    return prefix


def _threads_of(uid: int) -> int:
    """Threads `uid` runs now (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError as e:  # the process ended meanwhile
                if e.errno not in (errno.ENOENT, errno.ESRCH):
                    raise
    return count


def _python_of(sandbox: Sandbox) -> str:
    """The interpreter a command in `sandbox` runs: this one, which bubblewrap mounts. With the
    operator's opt-out as root the sandbox user may not reach it (a runtime under /root): then the
    system's `python3` (the reader and the worker need only the standard library)."""
    if sandbox.isolation is Isolation.BWRAP or not sandbox.privileged:
        return PYTHON
    return shutil.which("python3", path=SYSTEM_PATH) or PYTHON


def _read_report(path: Path) -> dict[str, object] | None:
    """The report the trusted run wrote, as HiddenTestRun fields; None when missing or malformed."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > REPORT_LIMIT_BYTES:
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
        fields = {key: raw[key] for key in ("collected", "outcomes", "messages", "collect_errors")}
        checked = HiddenTestRun.model_validate({"exit_code": raw["exitstatus"], **fields})
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None
    return {key: getattr(checked, key) for key in fields}
