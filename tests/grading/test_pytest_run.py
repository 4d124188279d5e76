"""`run_hidden_tests`: hidden pytest files against a real session sandbox's solution, with a real
trusted pytest process and a real sandboxed worker (no mocks). The controls (a right solution
passes, a stub fails) come first, then what an agent's solution would try, then the limits."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.grading.pytest_run import MAX_SOLUTION_BYTES, HiddenTestRun, check_solution_file, run_hidden_tests
from openenv_sdk.sandbox import Sandbox

TESTS = {
    "test_add.py": (
        "from solution import add\n\n"
        "def test_small():\n    assert add(1, 2) == 3\n\n"
        "def test_negative():\n    assert add(-1, -2) == -3\n"
    )
}
IDS = ["test_add.py::test_small", "test_add.py::test_negative"]
RIGHT = "def add(a, b):\n    return a + b\n"
STUB = "def add(a, b):\n    raise NotImplementedError\n"


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(name="pytest-run-test") as box:
        yield box


def plant(sandbox: Sandbox, files: dict[str, str]) -> None:
    for name, text in files.items():
        (sandbox.workspace / name).write_text(text, encoding="utf-8")
    sandbox.give(sandbox.workspace)


def nothing_passed(run: HiddenTestRun) -> None:
    assert not run.all_passed() and run.passed() == [] and run.fraction_passed(IDS) == 0.0, run


# --- controls ------------------------------------------------------------------------------------


def test_a_right_solution_passes_every_test(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": RIGHT})
    run = run_hidden_tests(sandbox, TESTS, ["solution.py"])
    assert run.all_passed() and run.all_passed(IDS) and run.fraction_passed() == 1.0
    assert (run.exit_code, run.timed_out, run.report_read) == (0, False, True)
    assert run.collected == IDS and run.outcomes == dict.fromkeys(IDS, "passed")
    assert run.solution_files == {"solution.py": "copied"}
    assert HiddenTestRun.model_validate(run.model_dump()) == run  # what crosses the wire


def test_a_stub_fails_every_test_with_its_message(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": STUB})
    run = run_hidden_tests(sandbox, TESTS, ["solution.py"])
    nothing_passed(run)
    assert run.report_read and run.exit_code == 1 and run.outcomes == dict.fromkeys(IDS, "failed")
    assert "NotImplementedError" in run.messages[IDS[0]]


def test_an_expected_test_that_never_ran_fails_the_verdict(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": RIGHT})
    run = run_hidden_tests(sandbox, TESTS, ["solution.py"])
    assert run.all_passed() and not run.all_passed([*IDS, "test_add.py::test_gone"]) and not run.all_passed([])
    assert run.fraction_passed([*IDS, "test_add.py::test_gone"]) == 2 / 3


# --- what a solution tries --------------------------------------------------------------------

_ATTACKS = {
    "pytest monkeypatch": "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n" + STUB,
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n" + STUB,
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "fake pass lines": "import sys\nfor out in (sys.stdout, sys.__stdout__, sys.stderr):\n"
    "    out.write('test_add.py::test_small PASSED\\n===== 2 passed in 0.01s =====\\n')\n" + STUB,
    "lying __eq__": "class Yes:\n    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n\ndef add(a, b):\n    return Yes()\n",
    "int subclass with a lying __eq__": "class Yes(int):\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = int.__hash__\n\ndef add(a, b):\n    return Yes(0)\n",
    "report written everywhere": "import glob\nfor d in ['.', '..', '/tmp'] + glob.glob('/tmp/*'):\n    try:\n"
    "        open(d + '/.openenv_grading_report.json', 'w').write('{\"exitstatus\": 0}')\n    except OSError:\n"
    "        pass\n" + STUB,
}


@pytest.mark.parametrize("attack", list(_ATTACKS))
def test_a_solution_cannot_forge_a_pass(sandbox: Sandbox, attack: str) -> None:
    plant(sandbox, {"solution.py": _ATTACKS[attack]})
    nothing_passed(run_hidden_tests(sandbox, TESTS, ["solution.py"]))


@pytest.mark.parametrize(
    "planted",
    [
        {"conftest.py": "import pytest\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                        "    report = yield\n    report.outcome = 'passed'\n    return report\n"},
        {"pytest.ini": "[pytest]\naddopts = --co\n"},
        {"sitecustomize.py": "import os\nos._exit(0)\n", "x.pth": "import os; os._exit(0)\n"},
        {"test_add.py": "def test_small():\n    pass\n"},
    ],
    ids=["conftest.py", "pytest.ini", "startup files", "a test file of its own"],
)
def test_files_beside_the_solution_are_never_read(sandbox: Sandbox, planted: dict[str, str]) -> None:
    plant(sandbox, {"solution.py": STUB, **planted})
    nothing_passed(run_hidden_tests(sandbox, TESTS, ["solution.py"]))


def test_a_symlink_is_not_followed_and_a_missing_or_huge_file_is_not_copied(sandbox: Sandbox) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".py") as outside:
        outside.write(RIGHT)
        outside.flush()
        (sandbox.workspace / "solution.py").symlink_to(outside.name)
        run = run_hidden_tests(sandbox, TESTS, ["solution.py"])
    nothing_passed(run)
    assert run.solution_files == {"solution.py": "a symbolic link (not followed)"}
    (sandbox.workspace / "solution.py").unlink()
    assert run_hidden_tests(sandbox, TESTS, ["solution.py"]).solution_files == {"solution.py": "missing"}
    plant(sandbox, {"solution.py": RIGHT + "#" * MAX_SOLUTION_BYTES})
    run = run_hidden_tests(sandbox, TESTS, ["solution.py"])
    nothing_passed(run)
    assert run.solution_files == {"solution.py": f"too large (over {MAX_SOLUTION_BYTES} bytes)"}


def test_a_hanging_call_fails_its_test_alone(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": "def add(a, b):\n    while a < 0:\n        pass\n    return a + b\n"})
    run = run_hidden_tests(sandbox, TESTS, ["solution.py"], call_timeout_s=1.0, timeout_s=30.0)
    assert run.outcomes == {IDS[0]: "passed", IDS[1]: "failed"} and not run.all_passed()
    assert "RemoteTimeout" in run.messages[IDS[1]]


def test_a_run_past_its_limit_is_killed_and_fails(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": RIGHT})
    slow = {"test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(30)\n"}
    run = run_hidden_tests(sandbox, {**TESTS, **slow}, ["solution.py"], timeout_s=3.0, call_timeout_s=1.0)
    assert run.timed_out and not run.report_read and not run.all_passed() and run.duration_s < 10


def test_a_passing_test_slower_than_its_limit_fails(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": RIGHT})
    slow = {"test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(1.5)\n"}
    run = run_hidden_tests(sandbox, slow, ["solution.py"], test_timeout_s=1.0)
    assert run.outcomes == {"test_slow.py::test_slow": "failed"} and "longer than 1 s" in run.messages["test_slow.py::test_slow"]


def test_nothing_of_the_run_is_left(sandbox: Sandbox) -> None:
    plant(sandbox, {"solution.py": RIGHT})
    folders = {Path(tempfile.gettempdir()), sandbox.root.parent}  # the trusted directory's, the worker's

    def leftovers() -> set[Path]:
        return {path for folder in folders for path in folder.glob("openenv-grading-*")}

    before = leftovers()
    assert run_hidden_tests(sandbox, TESTS, ["solution.py"]).all_passed()
    assert leftovers() == before


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tests": {"../test_x.py": "x"}}, "'../test_x.py' must be a relative path without '.' or '..' parts"),
        ({"tests": {"/tmp/test_x.py": "x"}}, "'/tmp/test_x.py' must be a relative path"),
        ({"tests": {"solution.py": "x"}}, "tests may not hold 'solution.py'"),
        ({"tests": {}}, "tests is empty"),
        ({"solution_files": ["pkg/solution.py"]}, "solution file 'pkg/solution.py' must be a module file"),
        ({"solution_files": ["json.py"]}, "'json' would shadow a module the trusted side needs"),
        ({"solution_files": []}, "solution_files must be a non-empty list"),
        ({"timeout_s": 0}, "timeout_s must be in (0, 300], got 0"),
        ({"call_timeout_s": 100.0}, "call_timeout_s must be in (0, timeout_s], got 100.0"),
    ],
)
def test_bad_arguments_are_refused_by_name(sandbox: Sandbox, kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"tests": TESTS, "solution_files": ["solution.py"], **kwargs}
    with pytest.raises(ValueError) as refused:
        run_hidden_tests(sandbox, **arguments)  # type: ignore[arg-type]
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("pkg/solution.py", "must be a module file in the working directory"),
        ("solution", "must be a module file"),
        ("2fast.py", "must be a module file"),
        ("json.py", "'json' would shadow a module the trusted side needs"),
        ("pytest.py", "'pytest' would shadow"),
        ("conftest.py", "'conftest' would shadow"),
        ("openenv_sdk.py", "'openenv_sdk' would shadow"),
    ],
)
def test_a_solution_file_is_checked_alone_by_the_same_rule(name: str, message: str) -> None:
    assert check_solution_file("lru_cache.py") == "lru_cache.py"
    with pytest.raises(ValueError, match=message):
        check_solution_file(name)
