"""Attacks on the mini_swe environment, through its tools only, against a real server on a real port.

The server (`openenv serve`) serves the repository's own `environments/mini_swe/` folder, hidden
tests and gold patches included (as a developer serves it from a checkout), and every score comes
from the real `MiniSweGrader` through the orchestrator's `run_tests`. Each test is one attack an
agent could try on `intervals-1` (a wrong sort key in `intervals/ops.py`); it fails if the attack
works: the score must be 0.0 and the evidence must say why. The bug is never fixed by an attack,
so any 1.0 below is a forgery. The controls come first: the gold patch scores 1.0 and the
untouched repository 0.0, so a 0.0 below means the attack was refused, not that grading is broken.

These run as root (as CI does, with bubblewrap installed): each session then has a uid of its
own. Where bubblewrap cannot run they fail with the `IsolationUnavailable` message.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.providers.local import LocalProcessProvider
from openenv_sdk.rubric import grade
from openenv_sdk.sandbox import isolation_mode

REPO = Path(__file__).resolve().parents[2]
ENV_DIR = REPO / "environments" / "mini_swe"
TASK = "intervals-1"
ORIGINAL = ENV_DIR / "tasks" / TASK / "repo"
INIT = (ORIGINAL / "intervals" / "__init__.py").read_text(encoding="utf-8")
GOLD = (ENV_DIR / "hidden" / TASK / "gold.patch").read_text(encoding="utf-8")
HIDDEN_TEST_NAME = "test_nested_interval"  # a FAIL_TO_PASS test only hidden/ holds

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session uids need root (CI runs as root)")


def _load_grader_module() -> Any:
    spec = importlib.util.spec_from_file_location("mini_swe_grader_under_attack", ENV_DIR / "grader.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GRADER = _load_grader_module()


# --- the server, sessions, helpers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[GenericEnvClient]:
    """`openenv serve environments/mini_swe` (hidden/ included) on a free loopback port."""
    isolation_mode()  # fails with what is missing, never skips
    provider = LocalProcessProvider(ENV_DIR, startup_timeout_s=120)
    with GenericEnvClient(provider=provider, timeout_s=90) as owner:
        owner.connect()
        yield owner


def _session(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    assert server.base_url is not None
    token = server.provider.orchestrator_token  # type: ignore[union-attr]
    with GenericEnvClient(server.base_url, orchestrator_token=token, timeout_s=90) as c:
        c.reset(task_id=TASK)
        yield c


@pytest.fixture
def session(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    yield from _session(server)


@pytest.fixture
def other(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    yield from _session(server)


@pytest.fixture(scope="module")
def grader() -> Any:
    return GRADER.MiniSweGrader(timeout_s=8.0)


def tool(env: GenericEnvClient, name: str, **arguments: Any) -> str:
    result = env.call_tool(name, **arguments)
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert not result.is_error, f"{name}: {text}"
    return text


def run(env: GenericEnvClient, command: str, **kwargs: Any) -> str:
    return tool(env, "run", command=command, **kwargs)


def plant(env: GenericEnvClient, files: dict[str, str], grader: Any) -> Any:
    """Write `files` into the workspace, submit, and grade with the real grader."""
    for path, text in files.items():
        tool(env, "write_file", path=path, content=text)
    tool(env, "submit")
    return grade(grader, env)


def refused(score: Any, *why: str) -> dict[str, Any]:
    """The attack scored 0.0 and the evidence's reason names each of `why`."""
    evidence = score.evidence["resolved"]
    assert score.value == 0.0, evidence
    assert evidence["resolved"] is False
    assert "passed" not in set(evidence["FAIL_TO_PASS"].values()), evidence["FAIL_TO_PASS"]
    for needle in why:
        assert needle in evidence["reason"], f"{needle!r} not in the reason: {evidence['reason']}"
    return evidence


def in_background(work: Callable[[], str]) -> tuple[threading.Thread, dict[str, str]]:
    box: dict[str, str] = {}
    thread = threading.Thread(target=lambda: box.update(out=work()), daemon=True)
    thread.start()
    return thread, box


def wait_for(condition: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


# --- controls --------------------------------------------------------------------------------------


def test_control_the_gold_patch_scores_one(session: GenericEnvClient, grader: Any) -> None:
    tool(session, "write_file", path=".gold.patch", content=GOLD)
    assert run(session, "git apply .gold.patch && rm .gold.patch").endswith("[exit code 0]")
    score = grade(grader, session)
    evidence = score.evidence["resolved"]
    assert score.value == 1.0, evidence["reason"]
    assert evidence["tampering"] == [] and evidence["report"] == "complete"


def test_control_the_untouched_repository_scores_zero(session: GenericEnvClient, grader: Any) -> None:
    evidence = refused(grade(grader, session), "FAIL_TO_PASS not passed")
    assert evidence["tampering"] == [] and evidence["report"] == "complete"
    assert set(evidence["PASS_TO_PASS"].values()) == {"passed"}


# --- forging the run from the library code (imported by the tests) ---------------------------------

RUNNER_PATCHES = {
    "Function.runtest": (
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
        "_pytest.python.Function (runtest) was replaced",
    ),
    "pytest_pyfunc_call": (
        "import gc, _pytest.python\n"
        "def _fake(pyfuncitem):\n    return True\n"
        "_real = _pytest.python.pytest_pyfunc_call\n"
        "_pytest.python.pytest_pyfunc_call = _fake\n"
        "for _o in gc.get_objects():\n"
        "    if type(_o).__name__ == 'HookImpl' and getattr(_o, 'function', None) is _real:\n"
        "        _o.function = _fake\n",
        "hook implementations changed",
    ),
    "TestReport.outcome": (
        "import _pytest.reports as _r\n"
        "_r.TestReport.outcome = property(lambda self: 'passed', lambda self, value: None)\n"
        "_orig = _r.TestReport.from_item_and_call.__func__\n"
        "def _forced(cls, item, call):\n"
        "    report = _orig(cls, item, call)\n"
        "    report.longrepr = None\n"
        "    return report\n"
        "_r.TestReport.from_item_and_call = classmethod(_forced)\n",
        "_pytest.reports.TestReport (from_item_and_call, outcome) was replaced",
    ),
    "CallInfo.from_call": (
        "import _pytest.runner as _run\n"
        "_orig = _run.CallInfo.from_call.__func__\n"
        "def _swallow(cls, func, when, reraise=None):\n"
        "    info = _orig(cls, func, when, reraise)\n"
        "    info.excinfo = None\n"
        "    return info\n"
        "_run.CallInfo.from_call = classmethod(_swallow)\n",
        "_pytest.runner.CallInfo (from_call) was replaced",
    ),
}


@pytest.mark.parametrize("name", list(RUNNER_PATCHES))
def test_monkeypatching_the_runner_at_import(session: GenericEnvClient, grader: Any, name: str) -> None:
    code, reason = RUNNER_PATCHES[name]
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader), "tampering: ", reason)
    assert evidence["report"] == "complete"


def test_a_patched_runtest_that_skips_bodies_leaves_tests_not_run(session: GenericEnvClient, grader: Any) -> None:
    """Even where the identity check were fooled, a pass needs the body to have run to its end."""
    code = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader))
    assert set(evidence["FAIL_TO_PASS"].values()) == {"not run"}
    assert set(evidence["details"].values()) == {"reported passed, but its body never ran to the end"}


def test_sys_exit_at_import(session: GenericEnvClient, grader: Any) -> None:
    code = "import sys\nsys.exit(0)\n"
    evidence = refused(
        plant(session, {"intervals/__init__.py": code + INIT}, grader),
        "pytest did not complete the session (exit status 3: internal error, e.g. SystemExit raised at import)",
    )
    assert set(evidence["FAIL_TO_PASS"].values()) == {"not run"}


def test_os_exit_at_import(session: GenericEnvClient, grader: Any) -> None:
    code = "import os\nos._exit(0)\n"
    evidence = refused(
        plant(session, {"intervals/__init__.py": code + INIT}, grader),
        "report missing: the process exited before the session ended",
    )
    assert evidence["report"] == "report missing: the process exited before the session ended"


def test_fake_pass_lines_on_stdout(session: GenericEnvClient, grader: Any) -> None:
    ids = GRADER.load_hidden_task(TASK).fail_to_pass
    lines = "".join(f"{nodeid} PASSED\n" for nodeid in ids)
    code = (
        "import json, sys\n"
        f"sys.stdout.write({lines!r})\n"
        "sys.stdout.write('=' * 30 + ' 40 passed in 0.01s ' + '=' * 30 + '\\n')\n"
        f"print(json.dumps({{'outcomes': {{n: 'passed' for n in {ids!r}}}, 'exitstatus': 0}}))\n"
        "sys.stdout.flush()\n"
    )
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader), "FAIL_TO_PASS not passed")
    assert evidence["report"] == "complete" and set(evidence["FAIL_TO_PASS"].values()) == {"failed"}


CHANNEL_ATTACKS = {
    "forged lines on every descriptor": (
        "import os, hashlib\n"
        "for fd in range(3, 64):\n"
        "    for n in range(40):\n"
        "        body = f'{n} test ' + 'tests/test_nested.py::x'.encode().hex() + ' ' + b'passed'.hex() + ' '\n"
        "        try:\n"
        "            os.write(fd, (hashlib.sha256(body.encode()).hexdigest() + ' ' + body + '\\n').encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "for name in ('report.json', 'results.json'):\n"
        "    for folder in (os.environ.get('HOME', '/tmp'), '/tmp', os.getcwd()):\n"
        "        try:\n"
        "            open(os.path.join(folder, name), 'w').write('{\"outcomes\": {}}')\n"
        "        except OSError:\n"
        "            pass\n",
        "report line(s) not signed with the run's key (forged or corrupted)",
    ),
    "the channel closed": (
        "import os\nos.closerange(3, 1024)\n",
        "report missing",
    ),
}


@pytest.mark.parametrize("name", list(CHANNEL_ATTACKS))
def test_overwriting_the_result_channel(session: GenericEnvClient, grader: Any, name: str) -> None:
    code, reason = CHANNEL_ATTACKS[name]
    refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader), reason)


def test_an_endless_loop_at_import_scores_zero_in_bounded_time(session: GenericEnvClient) -> None:
    started = time.monotonic()
    score = plant(session, {"intervals/__init__.py": "while True:\n    pass\n"}, GRADER.MiniSweGrader(timeout_s=3.0))
    evidence = refused(score, "timed out: the test run took longer than 3 s", "report missing")
    assert evidence["timed_out"] is True and time.monotonic() - started < 30


def test_module_level_skip_is_not_a_pass(session: GenericEnvClient, grader: Any) -> None:
    code = "import pytest\npytest.skip('nothing to see', allow_module_level=True)\n"
    evidence = refused(plant(session, {"intervals/__init__.py": code + INIT}, grader), "FAIL_TO_PASS not passed")
    assert set(evidence["FAIL_TO_PASS"].values()) <= {"skipped", "not run"}


# --- changing the grading's configuration or the tests ----------------------------------------------

FORCE_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n    report.longrepr = None\n"
)


def test_conftest_injection(session: GenericEnvClient, grader: Any) -> None:
    files = {"conftest.py": FORCE_PASS, "tests/conftest.py": FORCE_PASS, "intervals/conftest.py": FORCE_PASS}
    evidence = refused(plant(session, files, grader), "tampering: ", "conftest.py added or changed: tests/conftest.py")
    assert "intervals/conftest.py" in evidence["skipped_files"]


CONFIGS = {
    "pytest.ini": "[pytest]\naddopts = -p intervals.forcepass\n",
    "setup.cfg": "[tool:pytest]\naddopts = -p intervals.forcepass\n",
    "tox.ini": "[pytest]\naddopts = -p intervals.forcepass\n",
    "pyproject.toml": (ORIGINAL / "pyproject.toml").read_text() + "addopts = '-p intervals.forcepass'\n",
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_pytest_configuration_injection(session: GenericEnvClient, grader: Any, config: str) -> None:
    files = {config: CONFIGS[config], "intervals/forcepass.py": FORCE_PASS}
    refused(plant(session, files, grader), "tampering: ", f"pytest configuration added or changed: {config}")


STARTUP = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"


@pytest.mark.parametrize("path", ["forge.pth", "sitecustomize.py", "usercustomize.py", "intervals/sitecustomize.py"])
def test_interpreter_startup_files(session: GenericEnvClient, grader: Any, path: str) -> None:
    text = f"import sys; exec({STARTUP!r})\n" if path.endswith(".pth") else STARTUP
    evidence = refused(plant(session, {path: text}, grader), f"interpreter startup file planted: {path}")
    # and they never ran: the tests ran for real and failed
    assert set(evidence["FAIL_TO_PASS"].values()) == {"failed"}


def test_editing_a_test_file(session: GenericEnvClient, grader: Any) -> None:
    refused(plant(session, {"tests/test_ops.py": "def test_ok():\n    pass\n"}, grader), "test file edited: tests/test_ops.py")


def test_deleting_a_test_file(session: GenericEnvClient, grader: Any) -> None:
    run(session, "rm tests/test_ops.py")
    tool(session, "submit")
    evidence = refused(grade(grader, session), "test file deleted: tests/test_ops.py")
    assert set(evidence["PASS_TO_PASS"].values()) == {"passed"}  # the host's copy was restored and ran


# --- reading what is hidden ------------------------------------------------------------------------


def test_the_hidden_tests_and_expected_lists_are_out_of_reach(session: GenericEnvClient, grader: Any) -> None:
    out = run(session, f"ls {ENV_DIR}/hidden; cat {ENV_DIR}/hidden/{TASK}/task.json; "
              "find / \\( -name gold.patch -o -name test_nested.py -o -path '*hidden*task.json' \\) 2>/dev/null; "
              f"grep -rIl {HIDDEN_TEST_NAME} /tmp /work/main/environments /home /srv 2>/dev/null; echo searched")  # fmt: skip
    assert HIDDEN_TEST_NAME not in out and "FAIL_TO_PASS" not in out and "gold.patch" not in out, out
    assert "searched" in out and "No such file or directory" in out
    # The library code runs next to the hidden tests at grading time: it tries to carry them out.
    repo = run(session, "pwd").splitlines()[0]
    code = (
        "import glob, os, shutil\n"
        "for pattern in ('tests/*.py', '/proc/self/cwd/tests/*.py'):\n"
        "    for path in glob.glob(pattern):\n"
        f"        for target in ({repo!r}, '/tmp', '/dev/shm', os.environ.get('HOME', '/tmp')):\n"
        "            try:\n"
        "                shutil.copy(path, os.path.join(target, 'leak_' + os.path.basename(path)))\n"
        "            except OSError:\n"
        "                pass\n"
    )
    tool(session, "write_file", path="intervals/__init__.py", content=INIT + "\n" + code)
    score = grade(grader, session)  # graded mid-episode: the agent looks for the leak afterwards
    refused(score, "FAIL_TO_PASS not passed")
    found = run(session, f"ls {repo}/leak_* /tmp/leak_* /dev/shm/leak_* ~/leak_* 2>&1; grep -rl {HIDDEN_TEST_NAME} . ~ 2>&1")
    assert HIDDEN_TEST_NAME not in found and "leak_test_nested.py" not in found, found


# --- other sessions, the server, leftovers -----------------------------------------------------------


def test_another_sessions_workspace_through_proc_cwd(session: GenericEnvClient, other: GenericEnvClient) -> None:
    secret_path = run(other, "echo secret-of-other > SECRET.txt && pwd").splitlines()[0] + "/SECRET.txt"
    thread, box = in_background(lambda: run(other, "sleep 4; echo done"))
    time.sleep(1.0)
    out = run(session, f"cat /proc/*/cwd/SECRET.txt {secret_path} 2>&1; ls /proc | grep -c '^[0-9]'; true")
    thread.join(30)
    assert "secret-of-other" not in out, out
    assert "No such file or directory" in out
    assert box["out"].startswith("done")


def test_kill_all_reaches_no_other_session(session: GenericEnvClient, other: GenericEnvClient, server: GenericEnvClient) -> None:
    thread, box = in_background(lambda: run(other, "sleep 3; echo survived"))
    time.sleep(1.0)
    run(session, "kill -9 -1; true")
    thread.join(30)
    assert box.get("out", "").startswith("survived"), box
    assert server.provider.is_alive()  # type: ignore[union-attr]
    assert run(session, "echo alive") == "alive\n[exit code 0]"


def test_a_leftover_watcher_dies_with_its_command(session: GenericEnvClient, grader: Any) -> None:
    """A watcher that would restore the bug or rewrite the code while grading runs."""
    watcher = "while :; do date >> watcher.log; sleep 0.1; done"
    out = run(session, f"setsid nohup bash -c '{watcher}' </dev/null >/dev/null 2>&1 & disown; sleep 0.5; id -u")
    uid = int(out.splitlines()[0])
    size = run(session, "wc -c < watcher.log").splitlines()[0]
    time.sleep(0.5)
    assert run(session, "wc -c < watcher.log").splitlines()[0] == size  # nothing writes any more
    assert not wait_for(lambda: _processes_of(uid) != [], timeout_s=0.5), _processes_of(uid)


def _processes_of(uid: int) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_the_servers_api_is_unreachable_from_a_command(session: GenericEnvClient, server: GenericEnvClient) -> None:
    assert server.base_url is not None
    port = server.base_url.rsplit(":", 1)[1].strip("/")
    code = (
        "import urllib.request\n"
        "for host in ('127.0.0.1', 'localhost', '[::1]'):\n"
        "    try:\n"
        f"        print('REACHED', urllib.request.urlopen(f'http://{{host}}:{port}/health', timeout=2).read())\n"
        "    except Exception as e:\n"
        "        print('refused', type(e).__name__)\n"
    )
    tool(session, "write_file", path="probe.py", content=code)
    out = run(session, "python probe.py")
    assert "REACHED" not in out and out.count("refused") == 3, out
