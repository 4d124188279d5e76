"""Remote grading: the codec, the worker and the proxies, with real worker processes (no mocks)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import openenv_sdk.grading as grading
from openenv_sdk.grading import (
    ChannelError,
    CodecError,
    Limits,
    NotSendable,
    ProtocolError,
    RemoteError,
    RemoteSession,
    RemoteTimeout,
    SolutionImportError,
    StaleHandle,
    WorkerDied,
    install_remote_modules,
    spawn_subprocess,
)
from openenv_sdk.grading._codec import Codec

SOLUTION = '''
import os, sys, time

class Symbol(str):
    """A str subclass."""

class CycleError(ValueError):
    pass

class Quit(SystemExit):
    pass

def double(x):
    return x * 2

def rotate_in_place(matrix):
    n = len(matrix)
    matrix[:] = [list(row) for row in zip(*matrix[::-1])]

def sort_and_return(items):
    items.sort()
    return items

def add_key(d, key):
    d[key] = len(d)

def fill(s):
    s.add("x")

def bump_all(items):
    for i in range(len(items)):
        items[i] += 1

def total(items):
    return sum(items)

def cycle():
    raise CycleError("a -> b -> a")

def missing(d, key):
    return d[key]

def quit():
    raise Quit(3)

def symbols():
    return [Symbol("a"), Symbol("b"), "c"]

def numbers():
    yield from range(3)

def hang():
    while True:
        time.sleep(0.01)

def die():
    os._exit(7)

def chatty():
    print("hello on stdout" * 10000)
    sys.stdout.flush()
    os.write(1, b'{"id": 999, "ok": 1}\\n')
    return "quiet"

class AlwaysEqual:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__

def cheat():
    return AlwaysEqual()

class LRUCache:
    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._d = {}

    def get(self, key, default=None):
        if key not in self._d:
            return default
        self._d[key] = self._d.pop(key)
        return self._d[key]

    def put(self, key, value):
        self._d.pop(key, None)
        self._d[key] = value
        if len(self._d) > self.capacity:
            del self._d[next(iter(self._d))]

    def keys(self):
        return list(self._d)

    def __len__(self):
        return len(self._d)

    def __contains__(self, key):
        return key in self._d

    def __iter__(self):
        return iter(self._d)

    def __getitem__(self, key):
        return self._d[key]

ANSWER = 42
'''


@pytest.fixture
def session(tmp_path: Path) -> Iterator[RemoteSession]:
    (tmp_path / "solution.py").write_text(SOLUTION, encoding="utf-8")
    with install_remote_modules(["solution"], tmp_path, timeout_s=3.0) as remote:
        yield remote


def test_exported_api() -> None:
    assert sorted(grading.__all__) == sorted([
        "DEFAULT_TIMEOUT_S", "ChannelError", "CodecError", "Limits", "NotSendable", "ProtocolError",
        "RemoteCallable", "RemoteError", "RemoteModule", "RemoteObject", "RemoteSession", "RemoteTimeout", "RemoteValue",
        "SolutionImportError", "Spawn", "StaleHandle", "WorkerDied", "install_remote_modules",
        "prefixed_spawn", "spawn_subprocess",
    ])  # fmt: skip


# --- the codec -------------------------------------------------------------------------------------


def _plain_codec(limits: Limits | None = None) -> Codec:
    def refuse(*args: object) -> None:
        raise CodecError("not a core value")

    return Codec(limits or Limits(), refuse, refuse)


def _round_trip(value: object, limits: Limits | None = None) -> object:
    codec = _plain_codec(limits)
    return codec.decode(codec.loads(codec.dumps(codec.encode(value))))


@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 0, -(10**3999), 10**3999 - 1, 1.5, "ü\x00\n\ud800", b"\x00\xff", [], (), {}, set(),
        frozenset({1, 2}), [1, [2, (3, 4)]], {(1, "a"): {frozenset({1}): None}, 2: [b"x"]}, {3, "x", (1, 2)},
        slice(1, None, -1), list(range(100)), [0.5] * 20, ["s"] * 20,
    ],
)  # fmt: skip
def test_codec_round_trip(value: object) -> None:
    out = _round_trip(value)
    assert out == value and type(out) is type(value)
    if isinstance(value, dict):
        assert list(out) == list(value)  # type: ignore[call-overload]


def test_codec_floats() -> None:
    out = _round_trip([float("inf"), float("-inf"), float("nan"), -0.0, 1e308])
    assert out[:2] == [math.inf, -math.inf] and math.isnan(out[2])  # type: ignore[index]
    assert math.copysign(1.0, out[3]) == -1.0 and out[4] == 1e308  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (10**4000, "more than 4000 digits"),
        ([[[[1]]]], "nested deeper than 3 levels"),
        (list(range(50)), "more than 40 items"),
        ("x" * 2000, "more than the limit of 1000"),
    ],
)
def test_codec_bounds_when_encoding(value: object, message: str) -> None:
    codec = _plain_codec(Limits(max_depth=3, max_items=40, max_message_bytes=1000))
    with pytest.raises(CodecError, match=message):
        codec.dumps(codec.encode(value))


def test_codec_refuses_itself_referring_values() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CodecError, match="nested deeper"):
        _plain_codec().encode(loop)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"[1, 2", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"1" * 5000, "more than 4000 digits"),
        (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
        (b"NaN", "not allowed"),
        (b'{"$": "zz", "v": 1}', "not a core value"),
        (b'{"v": 1}', "without a string '\\$' tag"),
        (b'{"$": "b", "v": "***"}', "not valid base64"),
        (b'{"$": "d", "v": [[1], 2]}', "unhashable"),
        (b'{"$": "s", "v": [{"$": "d", "v": []}]}', "unhashable"),
        (b'{"$": "f", "v": "1e400"}', "bad non-finite float"),
        (b'{"$": "sl", "v": [1, 2]}', "three ints"),
    ],
)
def test_codec_refuses_hostile_messages(line: bytes, message: str) -> None:
    codec = _plain_codec()
    with pytest.raises(CodecError, match=message):
        codec.decode(codec.loads(line))


# --- the worker, through the proxies ------------------------------------------------------------------


def test_functions_values_and_constants(session: RemoteSession) -> None:
    import solution  # type: ignore[import-not-found]
    from solution import double  # type: ignore[import-not-found]

    assert double(21) == 42 and double("ab") == "abab" and double((1,)) == (1, 1)
    assert solution.ANSWER == 42 and callable(double) and callable(solution.LRUCache)
    with pytest.raises(ImportError):
        from solution import nothing_here  # type: ignore[import-not-found]  # noqa: F401


def test_in_place_mutation_reaches_the_callers_objects(session: RemoteSession) -> None:
    from solution import add_key, fill, rotate_in_place, sort_and_return

    matrix = [[1, 2], [3, 4]]
    assert rotate_in_place(matrix) is None
    assert matrix == [[3, 1], [4, 2]]
    items = [3, 1, 2]
    assert sort_and_return(items) is items and items == [1, 2, 3]
    d = {"a": 0}
    add_key(d, key="b")
    assert d == {"a": 0, "b": 1}
    s: set[str] = set()
    fill(s)
    assert s == {"x"}


def test_long_lists_are_sent_once_and_follow_changes(session: RemoteSession) -> None:
    from solution import bump_all, total

    items = list(range(5000))
    assert total(items) == sum(items)
    items[0] = 10**6  # a change between calls is seen
    assert total(items) == sum(items)
    bump_all(items)  # a change by the solution comes back
    assert items[:2] == [10**6 + 1, 2] and total(items) == sum(items)


def test_exceptions(session: RemoteSession) -> None:
    from solution import CycleError, cycle, missing, quit

    with pytest.raises(CycleError, match="a -> b -> a") as caught:
        cycle()
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, RemoteError)
    assert caught.value.type_name == "solution.CycleError"
    with pytest.raises(KeyError) as key_error:
        missing({}, "k")
    assert key_error.value.args == ("k",)
    with pytest.raises(RemoteError, match="Quit: 3") as quitting:
        quit()
    assert not isinstance(quitting.value, SystemExit)


def test_a_class_with_state(session: RemoteSession) -> None:
    from solution import LRUCache

    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"] and len(cache) == 2 and "a" in cache and "b" not in cache
    assert list(cache) == ["a", "c"] and cache["c"] == 3 and cache.capacity == 2
    assert type(cache).__name__ == "LRUCache"
    with pytest.raises(ValueError):
        LRUCache(0)


def test_subclass_values_generators_and_local_equality(session: RemoteSession) -> None:
    from solution import Symbol, cheat, numbers, symbols

    out = symbols()
    assert out == ["a", "b", "c"] and [type(x).__name__ for x in out] == ["Symbol", "Symbol", "str"]
    assert type(Symbol("q")) is type(out[0])
    assert list(numbers()) == [0, 1, 2]
    assert cheat() != [1, 2]  # an object whose __eq__ always says yes is not equal to local values


def test_a_hang_times_out_and_the_next_call_gets_a_fresh_worker(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text(SOLUTION, encoding="utf-8")
    with install_remote_modules(["solution"], tmp_path, timeout_s=0.5) as remote:
        from solution import LRUCache, double, hang

        cache = LRUCache(1)
        with pytest.raises(RemoteTimeout, match="did not answer within 0.5 s"):
            with pytest.raises(Exception):  # noqa: B017  (a hang is never the exception a test expects)
                hang()
        assert double(2) == 4 and remote.generation == 2
        with pytest.raises(StaleHandle):
            cache.get("a")


def test_a_dying_solution(session: RemoteSession) -> None:
    from solution import die, double

    with pytest.raises(WorkerDied, match="exited with code 7"):
        die()
    assert double(1) == 2


def test_printing_does_not_corrupt_the_channel(session: RemoteSession) -> None:
    from solution import chatty, double

    assert chatty() == "quiet" and double(5) == 10
    assert "hello on stdout" in session.output()
    assert '{"id": 999' in session.output()


def test_a_solution_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text("def f(:\n", encoding="utf-8")
    with install_remote_modules(["solution"], tmp_path) as remote:
        with pytest.raises(SolutionImportError, match="SyntaxError"):
            remote.get(("p", ("solution",)), "f")


def test_arguments_that_cannot_be_sent(session: RemoteSession) -> None:
    from solution import double

    with pytest.raises(NotSendable, match="object cannot be sent"):
        double(object())
    with pytest.raises(NotSendable, match="type cannot be sent"):
        double(type("Local", (), {}))  # a class of the trusted side's
    assert issubclass(NotSendable, ChannelError) and not issubclass(ChannelError, Exception)


def test_module_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shadow"):
        RemoteSession(["json"], tmp_path)
    with pytest.raises(ValueError, match="not a module name"):
        RemoteSession(["a.b"], tmp_path)


# --- a hostile worker -----------------------------------------------------------------------------------

HOSTILE = """
import os, sys
request = sys.stdin.readline()
rid = __import__("json").loads(request)["id"]
sys.stdout.write(sys.argv[1].replace("RID", str(rid)) + "\\n")
sys.stdout.flush()
sys.stdin.readline()
"""


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("not json", "not valid JSON"),
        ('{"id": RID, "ok": ' + "9" * 5000 + "}", "more than 4000 digits"),
        ('{"id": RID, "ok": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
        ('{"id": RID, "ok": {"$": "pickle", "v": "cos\\nsystem\\n"}}', "unknown tag 'pickle'"),
        ('{"id": 12345, "ok": 1}', "for request 12345"),
        ('{"id": RID}', "neither 'ok' nor 'err'"),
        ('{"id": RID, "ok": {"$": "o", "h": 1, "y": 9}}', "unknown remote type id 9"),
        ('{"id": RID, "ok": {"$": "p", "p": ["os", "system"], "y": 1, "t": {"m": "x", "q": "y", "f": []}}}', "bad path"),
        ('{"id": RID, "ok": 1, "mut": [[0, [1]]]}', "bad 'mut'"),
        ('{"id": RID, "err": {"kind": "raised", "cls": {"m": "builtins", "q": "x" }, "msg": 5}}', "message"),
    ],
)
def test_hostile_replies_are_refused(tmp_path: Path, reply: str, error: str) -> None:
    def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        return spawn_subprocess([sys.executable, "-I", "-c", HOSTILE, reply], cwd)

    with RemoteSession(["solution"], tmp_path, spawn=spawn, timeout_s=5) as remote:
        with pytest.raises(ProtocolError, match=error):
            remote.call(("p", ("solution", "f")), None, (), {})
        assert remote._channel is None  # the worker was killed


def test_hostile_exception_classes_are_never_the_trusted_sides(tmp_path: Path) -> None:
    reply = json.dumps(
        {"id": 0, "err": {"kind": "raised", "type": "SystemExit", "msg": "bye",
                          "cls": {"m": "os", "q": "system", "b": [{"m": "builtins", "q": "KeyboardInterrupt"}]}}}
    ).replace('"id": 0', '"id": RID')  # fmt: skip

    def spawn(argv: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        return spawn_subprocess([sys.executable, "-I", "-c", HOSTILE, reply], cwd)

    with RemoteSession(["solution"], tmp_path, spawn=spawn) as remote:
        with pytest.raises(RemoteError) as caught:
            remote.call(("p", ("solution", "f")), None, (), {})
    assert type(caught.value).__mro__[1:] == (RemoteError, Exception, BaseException, object)


# --- the pytest plugin, with a solution that attacks the trusted side -------------------------------------

ATTACK = '''
import builtins, sys
sys.path.append(SITE_PACKAGES)  # -S left pytest out of the worker: bring it in, to patch it
import _pytest.python
_pytest.python.Function.runtest = lambda self: None
builtins.abs = lambda x: 3

def f(x):
    return x + 1
'''

ATTACKED_TESTS = '''
from solution import f

def test_right():
    assert f(1) == 2 and abs(-1) == 1

def test_wrong():
    assert f(1) == 3
'''


def _run_plugin(tmp_path: Path, solution: str, tests: str, *extra: str) -> subprocess.CompletedProcess[str]:
    sol, trusted = tmp_path / "sol", tmp_path / "trusted"
    sol.mkdir()
    trusted.mkdir()
    (sol / "solution.py").write_text(solution, encoding="utf-8")
    (trusted / "test_hidden.py").write_text(tests, encoding="utf-8")
    command = [
        sys.executable, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
        "-p", "openenv_sdk.grading.pytest_remote", "--remote-modules", "solution", "--remote-dir", str(sol),
        "--remote-spawn-prefix", "[]", "--remote-timeout", "5", *extra, ".",
    ]  # fmt: skip
    return subprocess.run(command, cwd=trusted, capture_output=True, text=True, timeout=60, check=False)


def test_monkeypatching_pytest_in_the_worker_changes_nothing_here(tmp_path: Path) -> None:
    site_packages = str(Path(pytest.__file__).resolve().parents[1])
    run = _run_plugin(tmp_path, ATTACK.replace("SITE_PACKAGES", repr(site_packages)), ATTACKED_TESTS)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout


def test_the_plugin_shows_the_solutions_output(tmp_path: Path) -> None:
    run = _run_plugin(tmp_path, "def f(x):\n    print('debug me')\n    return x\n", ATTACKED_TESTS)
    assert run.returncode == 1 and "solution output (tail)" in run.stdout and "debug me" in run.stdout


# --- every coding task's hidden tests, through the proxy ---------------------------------------------------

CODING = Path(__file__).resolve().parents[2] / "environments" / "coding"
SLOW_TESTS = (
    "test_lru_cache.py::test_many_operations_are_fast",
    "test_min_stack.py::test_many_operations_are_fast",
    "test_median_stream.py::test_large_stream",
    "test_rate_limiter.py::test_many_requests",
)
"""Tests that make 100,000 to 800,000 calls on one object: through the proxy each call is a round
trip (tens of microseconds), so they take 5 to 40 s. Run them with OPENENV_GRADING_SLOW=1."""

DRIVER = textwrap.dedent(
    """
    import json, sys, pytest

    class Count:
        def __init__(self):
            self.passed = self.failed = 0

        def pytest_runtest_logreport(self, report):
            if report.when == "call" and report.passed:
                self.passed += 1
            elif report.failed:
                self.failed += 1

    results = {}
    for run in json.loads(sys.argv[1]):
        count = Count()
        code = pytest.main(run["args"], plugins=[count])
        results[run["task"]] = [int(code), count.passed, count.failed]
    print("RESULTS " + json.dumps(results))
    """
)


def _start_hidden_runs(root: Path, variant: str, deselect: tuple[str, ...]) -> subprocess.Popen[str]:
    """One trusted pytest process (`-I`, the plugin, no conftest) that runs every task's hidden tests
    against its reference or its stub, one `pytest.main` per task."""
    import shutil

    import yaml

    runs = []
    for task_file in sorted((CODING / "tasks").glob("*.yaml")):
        task = yaml.safe_load(task_file.read_text(encoding="utf-8"))
        hidden = CODING / "hidden" / task["id"]
        trusted, sol = root / variant / task["id"] / "tests", root / variant / task["id"] / "sol"
        trusted.mkdir(parents=True)
        sol.mkdir()
        for test in hidden.glob("test_*.py"):
            shutil.copy(test, trusted / test.name)
        target = sol / task["solution_file"]
        if variant == "reference":
            shutil.copy(hidden / "reference.py", target)
        else:
            target.write_text(task["files"][task["solution_file"]], encoding="utf-8")
        args = [
            str(trusted), "-q", "-p", "no:cacheprovider", "--noconftest", "--rootdir", str(trusted),
            "-p", "openenv_sdk.grading.pytest_remote", "--remote-modules", task["solution_file"][:-3],
            "--remote-dir", str(sol), "--remote-timeout", "20",
        ]  # fmt: skip
        for node in deselect:
            args += ["--deselect", str(trusted / node)]
        runs.append({"task": task["id"], "args": args})
    return subprocess.Popen(
        [sys.executable, "-I", "-c", DRIVER, json.dumps(runs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
    )  # fmt: skip


def _results(process: subprocess.Popen[str]) -> dict[str, list[int]]:
    stdout, stderr = process.communicate(timeout=600)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, stdout[-3000:] + stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS ") :])


@pytest.fixture(scope="module")
def hidden_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[int]]]:
    """Each task's [exit code, passed, failed] with its reference and with its stub (both variants
    run at once, in two trusted pytest processes)."""
    import os

    deselect = () if os.environ.get("OPENENV_GRADING_SLOW") == "1" else SLOW_TESTS
    root = tmp_path_factory.mktemp("hidden")
    processes = {variant: _start_hidden_runs(root, variant, deselect) for variant in ("reference", "stub")}
    return {variant: _results(process) for variant, process in processes.items()}


@pytest.mark.timeout(600)  # 50 tasks' runs: minutes on a loaded 2-core machine
def test_every_tasks_hidden_tests_pass_with_the_reference(hidden_results: dict[str, dict[str, list[int]]]) -> None:
    results = hidden_results["reference"]
    assert len(results) == len(list((CODING / "tasks").glob("*.yaml"))) >= 50
    failing = {task: r for task, r in results.items() if r[0] != 0 or r[2] or not r[1]}
    assert not failing


@pytest.mark.timeout(600)  # 50 tasks' runs: minutes on a loaded 2-core machine
def test_every_tasks_hidden_tests_fail_with_the_stub(hidden_results: dict[str, dict[str, list[int]]]) -> None:
    results = hidden_results["stub"]
    assert len(results) >= 50
    passing = {task: r for task, r in results.items() if r[0] != 1 or not r[2]}
    assert not passing
