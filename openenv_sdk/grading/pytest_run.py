"""Hidden pytest tests against an agent's solution, graded where the agent's code never runs: one call.

On the server, in an orchestrator-only call (never a tool), with the session's `Sandbox`:

    from openenv_sdk.grading.pytest_run import run_hidden_tests

    run = run_hidden_tests(session_sandbox, {"test_add.py": hidden_text}, ["solution.py"])
    run.outcomes            # {"test_add.py::test_small": "passed", ...}
    run.all_passed()        # True only when the run completed and every collected test passed
    return run.model_dump() # the host-side grader reads it back: HiddenTestRun.model_validate(...)

What one call does (the grading rule of docs/grading.md):

1. reads each solution file (`<module>.py`) or package folder (`<package>/`) from the session's
   working directory as the session's user, inside its sandbox, never through a symbolic link
   (regular files of at most `MAX_SOLUTION_BYTES`; of a package, its `.py` and data files, at
   most `MAX_PACKAGE_BYTES` and `MAX_PACKAGE_FILES` in all);
2. writes the grader's `tests` into a fresh private directory of the server's (0700, outside
   every sandbox) with an empty `pytest.ini`: no file of the agent's is ever there;
3. makes a second, fresh sandbox (its own uid, no network) holding only read-only copies of the
   solution files;
4. runs `python -I -m pytest` in the private directory, as the server's user, with the remote
   plugin (`openenv_sdk.grading.pytest_remote`) and a report plugin: a trusted process that never
   imports the agent's code and reads no configuration but the grader's. A test's
   `from solution import f` gets a proxy whose calls go over a pipe to a worker (`python -I -S`)
   that imports the copies in the second sandbox; values come back decoded with bounds, and a
   worker object is a proxy whose `==` is identity (a lying `__eq__` does not pass; with
   `remote_equality`, two of the solution's objects compare by the solution's `__eq__`, never
   one of them with a local value);
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
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from openenv_sdk.grading.remote import DEFAULT_TIMEOUT_S, RemoteSession
from openenv_sdk.sandbox import Sandbox, SandboxLimits, run_command

__all__ = [
    "DEFAULT_RUN_TIMEOUT_S",
    "MAX_PACKAGE_BYTES",
    "MAX_PACKAGE_FILES",
    "MAX_RUN_TIMEOUT_S",
    "MAX_SOLUTION_BYTES",
    "MAX_TESTS_BYTES",
    "PACKAGE_DATA_SUFFIXES",
    "HiddenTestRun",
    "Outcome",
    "check_solution_file",
    "run_hidden_tests",
]

DEFAULT_RUN_TIMEOUT_S = 60.0
"""Wall-clock limit of one whole run (collection and every test), in seconds."""
MAX_RUN_TIMEOUT_S = 600.0
"""Largest `timeout_s` of one run (a repository's whole suite may take minutes)."""
MAX_SOLUTION_BYTES = 1024 * 1024
"""Largest solution file copied; a larger one is not copied (its tests then fail)."""
MAX_PACKAGE_BYTES = 16 * 1024 * 1024
"""Largest total size of the files copied from one package folder; past it nothing of it is copied."""
MAX_PACKAGE_FILES = 2000
"""Most entries (files, folders, links) read in one package folder; past it nothing of it is copied."""
MAX_PACKAGE_DEPTH = 16
"""Deepest subfolder of a package read; deeper ones are skipped."""
PACKAGE_DATA_SUFFIXES = frozenset({
    ".json", ".txt", ".csv", ".tsv", ".toml", ".ini", ".cfg", ".yaml", ".yml", ".xml", ".html", ".md", ".rst",
    ".typed", ".dat",
})  # fmt: skip
"""Besides `.py`, what a package's files may end with to be copied: data a library reads beside
its code. Bytecode (`.pyc`, which would be imported instead of its source), native extensions
and every other file stay behind, as does `conftest.py` (never library code)."""
MAX_TESTS_BYTES = 8 * 1024 * 1024
"""Largest total size of the grader's files."""
REPORT_FILE = ".openenv_grading_report.json"
REPORT_LIMIT_BYTES = 4 * 1024 * 1024
OUTPUT_TAIL_CHARS = 4000
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PYTHON = os.path.abspath(sys.executable)
"""The interpreter of both processes (the sandbox mounts the runtime at the same path)."""

_SOLUTION_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.py|/)$")

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
        description='Solution file or package folder -> "copied", "missing", "a symbolic link (not followed)", '
        '"not a regular file", "not a directory", "too large (...)" or "not readable (...)".',
    )
    skipped_files: dict[str, str] = Field(
        default_factory=dict,
        description="A package's file or folder that was not copied (e.g. `pkg/conftest.py`) -> why.",
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
    remote_equality: bool = False,
    workdir: str | Path | None = None,
) -> HiddenTestRun:
    """Run the grader's pytest files against the solution files of `sandbox`'s working directory,
    in a trusted process that never imports them (see the module's docstring). Blocks until the
    run ends (at most about `timeout_s`); never raises for anything the solution does.

    Args:
        sandbox: the agent's session sandbox; the solution files are read from its `workspace`
            (or `workdir`).
        tests: relative path -> text: the hidden test files, and any conftest.py or data file of
            the grader's (a `pytest.ini` among them replaces the empty one).
        solution_files: what is graded, in the working directory: module files `<module>.py`
            (e.g. `["solution.py"]`) and package folders `<package>/` (e.g. `["intervals/"]`:
            its `.py` files and data files, `PACKAGE_DATA_SUFFIXES`, in every subfolder but
            `__pycache__` and hidden ones; symbolic links, `conftest.py` and other files skipped,
            see `HiddenTestRun.skipped_files`). The tests import them by name (`import
            intervals.ops` too).
        pytest_args: more pytest arguments (e.g. `["-x"]`, or the test files to run; by default
            pytest collects every `test_*.py` of `tests`).
        timeout_s: wall-clock limit of the whole run, in seconds; then every process is killed
            and the run's tests that had not passed count as not run.
        call_timeout_s: limit of one call into the solution, in seconds (that call then raises
            `RemoteTimeout` in the test, and the next call starts a fresh worker).
        test_timeout_s: a test that passes but took longer fails (default: `call_timeout_s`).
        worker_limits: the worker's memory, process and file-size limits (default: the
            session sandbox's limits).
        remote_equality: `==`, `!=` and `hash()` between two of the solution's objects are the
            solution's own `__eq__`, `__ne__` and `__hash__` (a library's value types); off, they
            are identity. Never asked between the solution's object and a local value.
        workdir: the folder of `sandbox` holding the solution (default: its `workspace`); it
            must lie in the sandbox's folder.

    Returns:
        The run's outcomes; `HiddenTestRun.all_passed()` is the usual verdict.

    Raises:
        ValueError: a bad path or size among `tests`, a solution file that is not a top-level
            module file or package folder or would shadow a module the trusted side needs, a
            `workdir` outside the sandbox's folder, or a bad timeout.
    """
    modules = _check_arguments(tests, solution_files, pytest_args, timeout_s, call_timeout_s, test_timeout_s)
    folder = _check_workdir(sandbox, workdir)
    limits = worker_limits or sandbox.limits
    copied = _read_solution_files(sandbox, folder, solution_files)
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
        _write_copies(worker.workspace, copied)
        argv = [
            PYTHON, "-I", "-m", "pytest", "-p", "openenv_sdk.grading.pytest_remote",
            "-p", "openenv_sdk.grading._pytest_report",
            "--remote-modules", ",".join(modules), "--remote-dir", str(worker.workspace),
            "--remote-spawn-prefix", json.dumps(_worker_prefix(worker, limits)), "--remote-python", worker.python(),
            "--remote-timeout", f"{call_timeout_s:g}", *(["--remote-equality"] if remote_equality else []),
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
        solution_files=copied.status,
        skipped_files=copied.skipped,
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
        raise ValueError('solution_files must be a non-empty list of file names, e.g. ["solution.py"] or ["mypkg/"]')
    modules = [_module_of(check_solution_file(name)) for name in solution_files]
    if len(set(modules)) < len(modules):
        raise ValueError(f"solution_files name a module twice: {list(solution_files)}")
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
    """`name`, if `run_hidden_tests` can grade it: a module file (`<identifier>.py`) or a package
    folder (`<identifier>/`) of the working directory, whose module shadows nothing the trusted
    side imports (the standard library, pytest, pluggy, conftest, openenv_sdk). An environment can
    check its tasks' solution files with it when it loads them, by the same rule.

    Raises:
        ValueError: naming the problem.
    """
    if not isinstance(name, str) or not _SOLUTION_FILE.match(name):
        raise ValueError(
            f"solution file {name!r} must be a module file in the working directory, e.g. 'solution.py', "
            "or a package folder there, e.g. 'mypkg/'"
        )
    RemoteSession([_module_of(name)], ".")  # its own check of the name (it starts nothing)
    return name


def _module_of(name: str) -> str:
    """The module a checked solution file or package folder gives."""
    return name.removesuffix(".py").removesuffix("/")


def _check_workdir(sandbox: Sandbox, workdir: str | Path | None) -> Path:
    """The folder the solution is read from: `workdir`, if it lies in the sandbox's folder."""
    if workdir is None:
        return sandbox.workspace
    folder = Path(os.path.normpath(os.path.abspath(workdir)))
    if folder != sandbox.root and sandbox.root not in folder.parents:
        raise ValueError(f"workdir {str(workdir)!r} must lie in the sandbox's folder {str(sandbox.root)!r}")
    return folder


_READER = r"""
import base64, errno, json, os, stat, sys
file_limit, tree_bytes, tree_entries, tree_depth = map(int, sys.argv[1:5])
data_suffixes = set(json.loads(sys.argv[5]))
FILE, FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY

class TooLarge(Exception):
    pass

def refusal(e):
    return "a symbolic link (not followed)" if e.errno == errno.ELOOP else f"not readable ({e.strerror})"

def read(fd, limit):  # the regular file's bytes, or None past `limit`
    chunks, size = [], 0
    while size <= limit and (chunk := os.read(fd, 1 << 16)):
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)

def read_file(name):
    try:
        fd = os.open(name, FILE)
    except FileNotFoundError:
        return ["missing"]
    except OSError as e:
        return [refusal(e)]
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ["not a regular file"]
        data = read(fd, file_limit)
        return ["copied", base64.b64encode(data).decode()] if data is not None else [f"too large (over {file_limit} bytes)"]
    finally:
        os.close(fd)

def kept(name):  # why a package's file is not copied (None: it is)
    if name == "conftest.py":
        return "a conftest.py (never copied)"
    if name.endswith(".py") or os.path.splitext(name)[1] in data_suffixes:
        return None
    return "not a .py or data file"

def walk(dfd, prefix, depth, out):
    for name in sorted(os.listdir(dfd)):
        out["entries"] += 1
        if out["entries"] > tree_entries:
            raise TooLarge
        try:
            name.encode()
            usual = name.isprintable()
        except UnicodeEncodeError:
            usual = False
        if not usual:
            out["skipped"][prefix + ascii(name)] = "an unusual name (not copied)"
            continue
        path = prefix + name
        try:
            info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            out["skipped"][path] = refusal(e)
            continue
        if stat.S_ISDIR(info.st_mode):
            if name == "__pycache__" or name.startswith("."):
                continue  # bytecode and caches: never library code
            if depth >= tree_depth:
                out["skipped"][path + "/"] = f"too deep (over {tree_depth} folders)"
                continue
            try:
                sub = os.open(name, FOLDER, dir_fd=dfd)
            except OSError as e:
                out["skipped"][path + "/"] = refusal(e)
                continue
            try:
                walk(sub, path + "/", depth + 1, out)
            finally:
                os.close(sub)
            continue
        why = "a symbolic link (not followed)" if stat.S_ISLNK(info.st_mode) else (
            "not a regular file" if not stat.S_ISREG(info.st_mode) else kept(name))
        if why is None:
            try:
                fd = os.open(name, FILE, dir_fd=dfd)
            except OSError as e:
                why = refusal(e)
            else:
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        why = "not a regular file"
                    else:
                        data = read(fd, out["left"])
                        if data is None:
                            raise TooLarge
                        out["left"] -= len(data)
                        out["files"][path] = base64.b64encode(data).decode()
                finally:
                    os.close(fd)
        if why is not None:
            out["skipped"][path] = why

def read_package(folder):
    name = folder.rstrip("/")
    try:
        mode = os.stat(name, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            return ["a symbolic link (not followed)"]
        top = os.open(name, FOLDER)  # O_NOFOLLOW: a link put there meanwhile is refused too
    except FileNotFoundError:
        return ["missing"]
    except NotADirectoryError:
        return ["not a directory"]
    except OSError as e:
        return [refusal(e)]
    out = {"entries": 0, "left": tree_bytes, "files": {}, "skipped": {}}
    try:
        walk(top, name + "/", 1, out)
    except TooLarge:
        return [f"too large (over {tree_bytes} bytes or {tree_entries} entries)"]
    finally:
        os.close(top)
    return ["copied", out["files"], out["skipped"]]

answer = {name: read_package(name) if name.endswith("/") else read_file(name) for name in sys.argv[6:]}
sys.stdout.write(json.dumps(answer))
"""


@dataclass
class _Copies:
    """What was read of the solution: each file's or package's status, the copied files (path in
    the working directory -> bytes) and the package files left behind (path -> why)."""

    status: dict[str, str] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _read_solution_files(sandbox: Sandbox, folder: Path, names: Sequence[str]) -> _Copies:
    """Read the solution's files and packages in `folder`, as the session's user, in its sandbox
    (in a container root has no CAP_DAC_OVERRIDE, and reading as the owner never reads more than
    the owner could), by `python -I -S` (no site, no agent-planted startup file). What it answers
    is checked again here: paths, sizes, counts."""
    copies = _Copies()
    if not folder.is_dir():
        copies.status = dict.fromkeys(names, "missing (the working directory is gone)")
        return copies
    output = sum(
        2 * MAX_PACKAGE_BYTES + 512 * MAX_PACKAGE_FILES if name.endswith("/") else 2 * MAX_SOLUTION_BYTES + 256
        for name in names
    ) + 1024  # fmt: skip
    limits = sandbox.limits.model_copy(update={
        "timeout_s": 30.0, "max_output_bytes": output, "max_processes": None,
        "kill_after_output_bytes": max(sandbox.limits.kill_after_output_bytes, 2 * output),
    })  # fmt: skip
    bounds = (MAX_SOLUTION_BYTES, MAX_PACKAGE_BYTES, MAX_PACKAGE_FILES, MAX_PACKAGE_DEPTH)
    result = sandbox.run(
        [sandbox.python(), "-I", "-S", "-c", _READER, *map(str, bounds), json.dumps(sorted(PACKAGE_DATA_SUFFIXES)), *names],
        cwd=folder,
        env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
        limits=limits,
    )
    try:
        answer = json.loads(result.stdout) if result.exit_code == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        why = f"not read (the reader exited {result.exit_code}: {result.stderr.strip()[-200:]})"
        copies.status = dict.fromkeys(names, why)
        return copies
    for name in names:
        entry = answer.get(name)
        if not (isinstance(entry, list) and entry and isinstance(entry[0], str)):
            copies.status[name] = "not read"
            continue
        copies.status[name] = entry[0]
        if entry[0] != "copied":
            continue
        try:
            found = _package_entry(name, entry) if name.endswith("/") else {name: _decode(entry[1])}
        except (IndexError, TypeError, ValueError, binascii.Error):
            copies.status[name] = "not read"
            continue
        copies.contents.update(found)
        if name.endswith("/"):
            copies.skipped.update({str(path): str(why) for path, why in entry[2].items()})
    return copies


def _package_entry(name: str, entry: list[object]) -> dict[str, bytes]:
    """A package's files from the reader's answer, each path checked to lie in the package."""
    files, skipped = entry[1], entry[2]
    if not isinstance(files, dict) or not isinstance(skipped, dict) or len(files) + len(skipped) > MAX_PACKAGE_FILES:
        raise ValueError("a malformed package entry")
    found: dict[str, bytes] = {}
    for path, text in files.items():
        parts = PurePosixPath(path).parts
        if not path.startswith(name) or "\0" in path or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"a path outside the package: {path!r}")
        found[path] = _decode(text)
    if sum(len(data) for data in found.values()) > MAX_PACKAGE_BYTES:
        raise ValueError("a package over its bound")
    return found


def _decode(text: object) -> bytes:
    if not isinstance(text, str):
        raise TypeError("not base64 text")
    return base64.b64decode(text, validate=True)


def _write_copies(folder: Path, copies: _Copies) -> None:
    """Write the copies into the worker's folder as the server's, read-only: folders 0755, files
    0444 (the worker reads them, nobody changes them). The folder is the server's and fresh, so
    nothing in it is a link."""
    for name, status in copies.status.items():
        if status == "copied" and name.endswith("/"):
            _make_dirs(folder, folder / name)
    for path, data in copies.contents.items():
        target = folder / path
        try:
            _make_dirs(folder, target.parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        except OSError as e:  # e.g. a file and a folder of one name
            copies.skipped[path] = f"not copied ({e.strerror})"
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(target, 0o444)


def _make_dirs(top: Path, folder: Path) -> None:
    missing = []
    while folder != top and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        path.chmod(0o755)  # whatever the server's umask


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
    return prefix + worker.wrap([], cwd=worker.workspace)  # the sandbox's own command line, privilege drop included


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
