"""`run_hidden_tests`: hidden pytest files against a real session sandbox's solution, with a real
trusted pytest process and a real sandboxed worker (no mocks). The controls (a right solution
passes, a stub fails) come first, then what an agent's solution would try, then the limits."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.grading.pytest_run import (
    MAX_PACKAGE_BYTES,
    MAX_PACKAGE_FILES,
    MAX_SOLUTION_BYTES,
    HiddenTestRun,
    _read_report,
    check_solution_file,
    run_hidden_tests,
)
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


def test_nothing_of_the_run_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this run's folders are looked at: the trusted directory is made in a temp dir of this
    test's, the worker's beside a session sandbox made in another (other runs of the machine make
    `openenv-grading-*` folders of their own in the system's temp dir meanwhile)."""
    own = Path(tempfile.mkdtemp(prefix="pytest-run-own-"))
    try:
        own.chmod(0o711)  # the worker's sandbox user passes through to its folder
        trusted, sessions = own / "trusted", own / "sessions"
        for folder in (trusted, sessions):
            folder.mkdir(mode=0o711)
        monkeypatch.setattr(tempfile, "tempdir", str(trusted))  # where the trusted directory is made
        with Sandbox(name="pytest-run-test", base_dir=sessions) as box:
            plant(box, {"solution.py": RIGHT})
            run = run_hidden_tests(box, TESTS, ["solution.py"])
            assert run.all_passed(), run
            assert list(sessions.iterdir()) == [box.root]  # no worker folder beside it
        assert [path.name for path in trusted.iterdir() if path.name.startswith("openenv-grading-")] == []
    finally:
        monkeypatch.undo()
        shutil.rmtree(own, ignore_errors=True)


# --- packages ------------------------------------------------------------------------------------

PACKAGE = {
    "textkit/__init__.py": "from textkit.words import count\nfrom textkit.version import Version\n",
    "textkit/words.py": (
        "import os\n\n"
        "STOP = open(os.path.join(os.path.dirname(__file__), 'data', 'stop.txt')).read().split()\n\n"
        "def count(text):\n    return len([w for w in text.split() if w not in STOP])\n"
    ),
    "textkit/data/stop.txt": "a\nthe\n",
    "textkit/version.py": (
        "class Version:\n    def __init__(self, text):\n        self.parts = tuple(map(int, text.split('.')))\n"
        "    def __eq__(self, other):\n        return isinstance(other, Version) and self.parts == other.parts\n"
        "    def __hash__(self):\n        return hash(self.parts)\n"
    ),
}
PACKAGE_TESTS = {
    "tests/test_words.py": (
        "import textkit.words\nfrom textkit import count\n\n"
        "def test_count():\n    assert count('the cat and a dog') == 3\n\n"
        "def test_submodule():\n    assert textkit.words.count('a') == 0\n"
    ),
    "tests/test_version.py": (
        "from textkit import Version\n\n"
        "def test_equal():\n    assert Version('1.2') == Version('1.2') and Version('1.2') != Version('1.3')\n\n"
        "def test_never_equal_to_a_local_value():\n    assert Version('1.2') != (1, 2)\n"
    ),
}
PACKAGE_IDS = [
    "tests/test_version.py::test_equal", "tests/test_version.py::test_never_equal_to_a_local_value",
    "tests/test_words.py::test_count", "tests/test_words.py::test_submodule",
]  # fmt: skip


def plant_tree(sandbox: Sandbox, files: dict[str, str]) -> None:
    for name, text in files.items():
        (sandbox.workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (sandbox.workspace / name).write_text(text, encoding="utf-8")
    sandbox.give(sandbox.workspace)


def test_a_package_is_served_with_its_submodules_and_data(sandbox: Sandbox) -> None:
    plant_tree(sandbox, PACKAGE)
    run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"], remote_equality=True)
    assert run.all_passed(PACKAGE_IDS), run
    assert run.solution_files == {"textkit/": "copied"} and run.skipped_files == {}


def test_without_remote_equality_two_of_the_packages_objects_are_equal_only_if_identical(sandbox: Sandbox) -> None:
    plant_tree(sandbox, PACKAGE)
    run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"])
    assert run.outcomes["tests/test_version.py::test_equal"] == "failed"
    assert run.outcomes["tests/test_version.py::test_never_equal_to_a_local_value"] == "passed"


def test_with_remote_equality_a_lying_eq_still_fails_against_a_local_value(sandbox: Sandbox) -> None:
    lying = "class Version:\n    def __init__(self, text):\n        pass\n    def __eq__(self, other):\n        return True\n"
    plant_tree(sandbox, {**PACKAGE, "textkit/version.py": lying})
    tests = {"tests/test_lie.py": "from textkit import Version\n\ndef test_lie():\n    assert Version('1') == (1,)\n"}
    run = run_hidden_tests(sandbox, tests, ["textkit/"], remote_equality=True)
    assert run.outcomes == {"tests/test_lie.py::test_lie": "failed"}


def test_a_packages_links_conftest_bytecode_and_other_files_stay_behind(sandbox: Sandbox) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".py") as outside:
        outside.write("def count(text):\n    return 3\n")
        outside.flush()
        plant_tree(sandbox, {
            **PACKAGE, "textkit/conftest.py": "raise SystemExit('never loaded')\n", "textkit/native.so": "x",
            "textkit/__pycache__/words.cpython-311.pyc": "x", "textkit/.hidden/x.py": "x",
        })  # fmt: skip
        (sandbox.workspace / "textkit" / "leak.py").symlink_to(outside.name)
        (sandbox.workspace / "textkit" / "linked").symlink_to(os.path.dirname(outside.name))
        os.mkfifo(sandbox.workspace / "textkit" / "pipe.txt")
        sandbox.give(sandbox.workspace)
        tests = {**PACKAGE_TESTS, "tests/test_leak.py": "def test_leak():\n    import textkit.leak\n"}
        run = run_hidden_tests(sandbox, tests, ["textkit/"], remote_equality=True)
    assert run.skipped_files == {
        "textkit/conftest.py": "a conftest.py (never copied)",
        "textkit/leak.py": "a symbolic link (not followed)",
        "textkit/linked": "a symbolic link (not followed)",
        "textkit/native.so": "not a .py or data file",
        "textkit/pipe.txt": "not a regular file",
    }, run.skipped_files
    assert run.outcomes.pop("tests/test_leak.py::test_leak") == "failed"
    assert set(run.outcomes.values()) == {"passed"}  # the rest was copied


def test_a_package_folder_that_is_a_link_a_file_or_too_large_is_not_copied(sandbox: Sandbox) -> None:
    with tempfile.TemporaryDirectory() as outside:
        (Path(outside) / "__init__.py").write_text("def count(text):\n    return 3\n")
        (sandbox.workspace / "textkit").symlink_to(outside)
        run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"])
    assert run.solution_files == {"textkit/": "a symbolic link (not followed)"} and run.passed() == []
    (sandbox.workspace / "textkit").unlink()
    assert run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"]).solution_files == {"textkit/": "missing"}
    plant(sandbox, {"textkit": "not a folder"})
    assert run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"]).solution_files == {"textkit/": "not a directory"}
    (sandbox.workspace / "textkit").unlink()
    plant_tree(sandbox, {**PACKAGE, **{f"textkit/many/f{i}.txt": "" for i in range(MAX_PACKAGE_FILES)}})
    run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"])
    too_large = {"textkit/": f"too large (over {MAX_PACKAGE_BYTES} bytes or {MAX_PACKAGE_FILES} entries)"}
    assert run.solution_files == too_large and run.passed() == []
    shutil.rmtree(sandbox.workspace / "textkit" / "many")
    plant(sandbox, {"textkit/data/big.txt": "x" * (MAX_PACKAGE_BYTES - 100)})  # with the rest, over the bound
    run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"])
    assert run.solution_files == too_large and run.passed() == []


def test_the_solution_is_read_from_workdir(sandbox: Sandbox) -> None:
    repo = sandbox.make_dir("repo")
    for name, text in PACKAGE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    sandbox.give(repo)
    run = run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"], remote_equality=True, workdir=repo)
    assert run.all_passed(PACKAGE_IDS), run
    assert run_hidden_tests(sandbox, PACKAGE_TESTS, ["textkit/"]).solution_files == {"textkit/": "missing"}


def test_only_a_finished_report_of_the_right_shape_is_read(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    finished: dict[str, object] = {
        "exitstatus": 1, "collected": ["t.py::a", "t.py::b"], "outcomes": {"t.py::a": "passed", "t.py::b": "failed"},
        "messages": {"t.py::b": "assert 1 == 2"}, "collect_errors": {},
    }  # fmt: skip
    path.write_text(json.dumps(finished))
    assert _read_report(path) == {key: finished[key] for key in ("collected", "outcomes", "messages", "collect_errors")}
    malformed_reports: list[dict[str, object]] = [
        {"outcomes": {}}, {**finished, "outcomes": {"t.py::a": "fine"}}, {**finished, "collected": "t.py::a"},
    ]  # fmt: skip
    for malformed in malformed_reports:
        path.write_text(json.dumps(malformed))
        assert _read_report(path) is None, malformed
    path.unlink()
    assert _read_report(path) is None
    (tmp_path / "elsewhere.json").write_text(json.dumps(finished))
    path.symlink_to(tmp_path / "elsewhere.json")
    assert _read_report(path) is None


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
        ({"timeout_s": 0}, "timeout_s must be in (0, 600], got 0"),
        ({"solution_files": ["pkg/", "pkg.py"]}, "solution_files name a module twice"),
        ({"solution_files": ["json/"]}, "'json' would shadow a module the trusted side needs"),
        ({"tests": {"pkg/test_x.py": "x"}, "solution_files": ["pkg/"]}, "tests may not hold 'pkg/test_x.py'"),
        ({"workdir": "/tmp"}, "workdir '/tmp' must lie in the sandbox's folder"),
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
        ("pkg/sub/", "must be a module file"),
        ("pkg", "or a package folder there, e.g. 'mypkg/'"),
        ("solution", "must be a module file"),
        ("2fast.py", "must be a module file"),
        ("json.py", "'json' would shadow a module the trusted side needs"),
        ("pytest.py", "'pytest' would shadow"),
        ("conftest.py", "'conftest' would shadow"),
        ("openenv_sdk.py", "'openenv_sdk' would shadow"),
    ],
)
def test_a_solution_file_is_checked_alone_by_the_same_rule(name: str, message: str) -> None:
    assert check_solution_file("lru_cache.py") == "lru_cache.py" and check_solution_file("intervals/") == "intervals/"
    with pytest.raises(ValueError, match=message):
        check_solution_file(name)
