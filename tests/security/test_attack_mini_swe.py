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
import json
import os
import re
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


# --- the issue's three forgeries, from the library code (a line in the package's __init__.py) ------
#
# Against the old design (the tests, a guard and an HMAC-signed report channel in the agent's
# interpreter) each of these scored 1.0 with the bug unfixed. Now the tests run in a trusted
# process that never imports the package: this code runs in a worker in a sandbox of its own,
# where there is no guard, no channel to the verdict and no key. Each must score 0.0, the tests
# having run for real (the trusted process finished its report).

F2P = GRADER.load_hidden_task(TASK).fail_to_pass
ALL_IDS = [*F2P, *GRADER.load_hidden_task(TASK).pass_to_pass]

GUARD_IN_MAIN = (
    "import sys\n"
    "_main = sys.modules.get('__main__')\n"
    "for _name, _cls in list(vars(_main).items()):\n"
    "    if not isinstance(_cls, type):\n"
    "        continue\n"
    "    for _attr in list(vars(_cls)):\n"
    "        if any(w in _attr.lower() for w in ('check', 'verify', 'tamper', 'witness', 'snapshot', 'guard')):\n"
    "            setattr(_cls, _attr, lambda *a, **k: None)  # the guard's checks, disarmed\n"
    "    if hasattr(_cls, 'serve'):  # whatever answers requests here: every answer says yes\n"
    "        _real = _cls.serve\n"
    "        def _serve(self, request, _real=_real):\n"
    "            reply = _real(self, request)\n"
    "            return {'id': reply.get('id'), 'ok': True}\n"
    "        _cls.serve = _serve\n"
)

EMIT_THROUGH_GC = (
    "import gc, io, json, os\n"
    f"_ids = {ALL_IDS!r}\n"
    "_lines = ''.join(f'{n} PASSED\\n' for n in _ids) + '=' * 20 + f' {len(_ids)} passed in 0.01s ' + '=' * 20 + '\\n'\n"
    "def _emit(*args, **kwargs):\n"
    "    return None\n"
    "for _o in gc.get_objects():\n"
    "    try:\n"
    "        _kind = type(_o)\n"
    "        for _name in ('emit', 'send', 'report', 'sign'):\n"
    "            if isinstance(getattr(_kind, _name, None), type(_emit)):\n"
    "                setattr(_kind, _name, _emit)  # the channel's emit, shadowed\n"
    "        if isinstance(_o, (io.BufferedWriter, io.TextIOWrapper, io.FileIO)) and not _o.closed:\n"
    "            data = _lines + ''.join(json.dumps({'id': i, 'ok': True}) + '\\n' for i in range(1, 200))\n"
    "            _o.write(data if isinstance(_o, io.TextIOWrapper) else data.encode())  # forged replies\n"
    "            _o.flush()\n"
    "    except Exception:\n"
    "        pass\n"
)

OWN_REPORT_SIGNED = (
    "import gc, hashlib, hmac, json, os\n"
    f"_ids = {ALL_IDS!r}\n"
    "_signers = [o for o in gc.get_objects() if isinstance(o, hmac.HMAC)]  # the signing oracle, if any\n"
    "_report = {'finished': True, 'exitstatus': 0, 'collected': _ids,\n"
    "           'outcomes': {n: 'passed' for n in _ids}, 'messages': {}, 'collect_errors': {}}\n"
    "_text = json.dumps(_report)\n"
    "_lines = []\n"
    "for _seq, _n in enumerate(_ids):\n"
    "    _body = f'{_seq} test ' + _n.encode().hex() + ' ' + b'passed'.hex() + ' '\n"
    "    for _s in _signers:\n"
    "        _h = _s.copy(); _h.update(_body.encode()); _lines.append(_h.hexdigest() + ' ' + _body)\n"
    "_null = os.open(os.devnull, os.O_RDWR)\n"
    "for _fd in range(3, 256):\n"
    "    try:\n"
    "        os.write(_fd, ('\\n'.join(_lines) + '\\n' + _text + '\\n').encode())\n"
    "    except OSError:\n"
    "        pass\n"
    "for _folder in {os.getcwd(), os.path.dirname(os.getcwd()), '/tmp', os.environ.get('HOME', '/tmp'),\n"
    "                '/proc/1/cwd', '/proc/self/cwd', '/dev/shm'}:\n"
    "    for _name in ('openenv_grading_report.json', 'openenv_report.json', 'report.json'):\n"
    "        try:\n"
    "            with open(os.path.join(_folder, _name), 'w') as _f:\n"
    "                _f.write(_text)\n"
    "        except OSError:\n"
    "            pass\n"
    "for _fd in range(3, 256):  # the channel now points at /dev/null\n"
    "    if _fd != _null:\n"
    "        try:\n"
    "            os.dup2(_null, _fd)\n"
    "        except OSError:\n"
    "            pass\n"
)

ISSUE_ATTACKS = {"guard in __main__": GUARD_IN_MAIN, "emit through gc": EMIT_THROUGH_GC, "own signed report": OWN_REPORT_SIGNED}


@pytest.mark.parametrize("name", list(ISSUE_ATTACKS))
def test_the_issues_forgeries_score_zero(session: GenericEnvClient, grader: Any, name: str) -> None:
    score = plant(session, {"intervals/__init__.py": INIT + "\n" + ISSUE_ATTACKS[name]}, grader)
    evidence = score.evidence["resolved"]
    assert score.value == 0.0 and not evidence["resolved"], evidence
    assert evidence["tampering"] == []  # nothing to flag: the forgery simply reaches nothing
    if name == "guard in __main__":
        # The worker still answers, and every answer is True: the tests ran and the trusted side
        # judged the answers. A test that asserts only truthiness (`assert contains(...)`) is
        # satisfied by True, as it would be by `return True` in the code; every test comparing a
        # value fails.
        assert evidence["report"] == "complete", evidence["reason"]
        f2p = evidence["FAIL_TO_PASS"]
        assert f2p["tests/test_nested.py::test_nested_interval"] == "failed"
        assert f2p["tests/test_nested.py::test_long_interval_covering_several"] == "failed"
        assert evidence["PASS_TO_PASS"]["tests/test_ops.py::test_merge_touching"] == "failed"
    else:  # its channel broken, the worker's answers are refused or never come: nothing passes
        assert "passed" not in set(evidence["FAIL_TO_PASS"].values()) | set(evidence["PASS_TO_PASS"].values())


RUNNER_PATCHES = {
    "Function.runtest": "_pytest.python.Function.runtest = lambda self: None\n",
    "pytest_pyfunc_call": (
        "import gc\n"
        "def _fake(pyfuncitem):\n    return True\n"
        "_real = _pytest.python.pytest_pyfunc_call\n"
        "_pytest.python.pytest_pyfunc_call = _fake\n"
        "for _o in gc.get_objects():\n"
        "    if type(_o).__name__ == 'HookImpl' and getattr(_o, 'function', None) is _real:\n"
        "        _o.function = _fake\n"
    ),
    "TestReport.outcome": (
        "import _pytest.reports as _r\n"
        "_r.TestReport.outcome = property(lambda self: 'passed', lambda self, value: None)\n"
    ),
    "builtins and exit": (
        "import builtins, os, sys\n"
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
        "sys.exit = os._exit = lambda *a: None\n"
    ),
}
# pytest is not importable where the package runs (standard library only); an attacker looks for it
FIND_PYTEST = (
    "import glob, sys\n"
    "try:\n"
    "    import _pytest.python\n"
    "except ImportError:\n"
    "    for _root in {sys.prefix, sys.base_prefix, '/usr', '/usr/local', '/work/main/.venv'}:\n"
    "        sys.path += glob.glob(_root + '/lib/python3*/site-packages') + glob.glob(_root + '/lib/python3/dist-packages')\n"
    "    try:\n"
    "        import _pytest.python\n"
    "    except ImportError:\n"
    "        _pytest = None\n"
)


@pytest.mark.parametrize("name", list(RUNNER_PATCHES))
def test_monkeypatching_the_runner_at_import(session: GenericEnvClient, grader: Any, name: str) -> None:
    code = FIND_PYTEST + "if _pytest is not None:\n" + "".join(f"    {line}\n" for line in RUNNER_PATCHES[name].splitlines())
    if name == "builtins and exit":
        code = RUNNER_PATCHES[name]
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader))
    # what it patched is the worker's own pytest (if any): the trusted run is untouched
    assert evidence["report"] == "complete" and set(evidence["FAIL_TO_PASS"].values()) == {"failed"}


def test_sys_exit_at_import(session: GenericEnvClient, grader: Any) -> None:
    code = "import sys\nsys.exit(0)\n"
    evidence = refused(plant(session, {"intervals/__init__.py": code + INIT}, grader), "collection errors")
    assert evidence["report"] == "complete" and "passed" not in set(evidence["PASS_TO_PASS"].values())


def test_os_exit_at_import(session: GenericEnvClient, grader: Any) -> None:
    code = "import os\nos._exit(0)\n"
    evidence = refused(plant(session, {"intervals/__init__.py": code + INIT}, grader), "collection errors")
    assert evidence["report"] == "complete"


def test_fake_pass_lines_on_stdout(session: GenericEnvClient, grader: Any) -> None:
    lines = "".join(f"{nodeid} PASSED\n" for nodeid in F2P)
    code = (
        "import json, os, sys\n"
        f"sys.stdout.write({lines!r})\n"
        "sys.stdout.write('=' * 30 + ' 40 passed in 0.01s ' + '=' * 30 + '\\n')\n"
        f"print(json.dumps({{'outcomes': {{n: 'passed' for n in {F2P!r}}}, 'exitstatus': 0}}))\n"
        "sys.stdout.flush()\n"
        "for fd in (1, 2):\n"
        f"    os.write(fd, {lines!r}.encode())\n"
    )
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + code}, grader), "FAIL_TO_PASS not passed")
    assert evidence["report"] == "complete" and set(evidence["FAIL_TO_PASS"].values()) == {"failed"}


def test_closing_every_descriptor(session: GenericEnvClient, grader: Any) -> None:
    refused(plant(session, {"intervals/__init__.py": INIT + "\nimport os\nos.closerange(0, 1024)\n"}, grader))


def test_an_endless_loop_at_import_scores_zero_in_bounded_time(session: GenericEnvClient) -> None:
    started = time.monotonic()
    score = plant(session, {"intervals/__init__.py": "while True:\n    pass\n"}, GRADER.MiniSweGrader(timeout_s=3.0))
    refused(score)
    assert time.monotonic() - started < 30


def test_a_slow_import_scores_zero_within_the_graders_limit(session: GenericEnvClient) -> None:
    """Sleeping at import (no CPU): each call is cut at the per-test limit, the run at its own."""
    started = time.monotonic()
    strict = GRADER.MiniSweGrader(timeout_s=6.0, test_timeout_s=2.0)
    evidence = refused(plant(session, {"intervals/__init__.py": "import time\ntime.sleep(3600)\n" + INIT}, strict))
    assert time.monotonic() - started < 30
    assert evidence["timed_out"] or "collection errors" in evidence["reason"], evidence["reason"]


def test_module_level_skip_is_not_a_pass(session: GenericEnvClient, grader: Any) -> None:
    code = "import pytest\npytest.skip('nothing to see', allow_module_level=True)\n"
    evidence = refused(plant(session, {"intervals/__init__.py": code + INIT}, grader))
    assert set(evidence["FAIL_TO_PASS"].values()) <= {"skipped", "not run", "error"}


# --- against the new design: the worker reaching for the trusted side -----------------------------

REACH_OUT = (
    "import ctypes, json, os, signal\n"
    "_seen = {'pid': os.getpid(), 'ppid': os.getppid(), 'procs': {}, 'fds': {}, 'killed': [], 'traced': [],\n"
    "         'uid': os.getuid()}\n"
    "for _pid in os.listdir('/proc'):\n"
    "    if not _pid.isdigit():\n"
    "        continue\n"
    "    try:\n"
    "        _seen['procs'][_pid] = open(f'/proc/{_pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()[:120]\n"
    "    except OSError as e:\n"
    "        _seen['procs'][_pid] = type(e).__name__\n"
    "for _fd in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        _seen['fds'][_fd] = os.readlink(f'/proc/self/fd/{_fd}')\n"
    "    except OSError:\n"
    "        pass\n"
    "_libc = ctypes.CDLL(None, use_errno=True)\n"
    "for _pid in list(_seen['procs']):\n"
    "    if int(_pid) in (os.getpid(),):\n"
    "        continue\n"
    "    if _libc.ptrace(16, int(_pid), 0, 0) == 0:  # PTRACE_ATTACH\n"
    "        _seen['traced'].append(_pid)\n"
    "        _libc.ptrace(17, int(_pid), 0, 0)\n"
    "for _pid in range(2, 40000):  # signals to every pid of the host's range\n"
    "    if _pid == os.getpid():\n"
    "        continue\n"
    "    try:\n"
    "        os.kill(_pid, 0)\n"
    "        _seen['killed'].append(_pid)\n"
    "    except OSError:\n"
    "        pass\n"
    "_summary = {'procs': len(_seen['procs']), 'commands': ' '.join(_seen['procs'].values())[:400],\n"
    "            'traced': _seen['traced'], 'signalled': _seen['killed'][:10], 'uid': _seen['uid'],\n"
    "            'fds': sorted(set(_seen['fds'].values()))[:10], 'env': sorted(os.environ)[:20],\n"
    "            'cwd_files': sorted(os.listdir('.'))[:20], 'cwd_writable': os.access('.', os.W_OK)}\n"
    "_report = 'SE' + 'EN<' + json.dumps(_summary) + '>'\n"
    "def merge(intervals):\n"
    "    raise RuntimeError(_report)\n"
)


def test_the_worker_sees_no_trusted_process_and_no_descriptor_of_it(session: GenericEnvClient, grader: Any) -> None:
    """The package's code looks for the trusted pytest: /proc, ptrace, signals, inherited fds; and
    for anything of the trusted side it was handed: environment (a key, a token), files it could
    write for the trusted side to read."""
    evidence = refused(plant(session, {"intervals/__init__.py": INIT + "\n" + REACH_OUT}, grader))
    assert evidence["report"] == "complete"
    failure = evidence["details"]["tests/test_nested.py::test_nested_interval"]
    found = re.search(r"SEEN<(\{.*?\})>", failure)
    assert found, failure
    seen = json.loads(found.group(1))
    commands = seen["commands"]
    assert "pytest" not in commands and "openenv" not in commands and "uvicorn" not in commands, seen
    assert seen["procs"] <= 3, seen  # the sandbox's own: its init and the worker
    assert seen["traced"] == [] and seen["uid"] != 0
    assert all(pid < 10 for pid in seen["signalled"]), seen  # only pids of its own namespace answer
    assert all(t.startswith(("pipe:", "/dev/null", "/proc/")) for t in seen["fds"]), seen
    assert set(seen["env"]) <= {"PATH", "LC_ALL", "LANG", "HOME", "PWD", "SHLVL", "_"}, seen  # no key, no token
    assert seen["cwd_files"] == ["intervals"] and not seen["cwd_writable"], seen  # its copy, read-only


LIES = {
    "an object whose __eq__ says yes": (
        "class _Yes:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def merge(intervals):\n    return _Yes()\n"
    ),
    "a list subclass whose __eq__ says yes": (
        "class _L(list):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "def merge(intervals):\n    return _L()\n"
    ),
    "a value that refers to itself": "def merge(intervals):\n    x = []\n    x.append(x)\n    return x\n",
    "a huge value": "def merge(intervals):\n    return [0] * 5_000_000\n",
    "an exception named AssertionError that is not one": (
        "class AssertionError(Exception):\n    pass\n"
        "def merge(intervals):\n    raise AssertionError('fine')\n"
    ),
}


@pytest.mark.parametrize("name", list(LIES))
def test_lying_return_values_do_not_pass(session: GenericEnvClient, grader: Any, name: str) -> None:
    source = INIT.replace("merge, ", "") + "\n" + LIES[name]
    evidence = refused(plant(session, {"intervals/__init__.py": source}, grader))
    assert evidence["report"] == "complete"
    assert evidence["FAIL_TO_PASS"]["tests/test_nested.py::test_nested_interval"] == "failed"


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


# --- code graded other than the code shown -----------------------------------------------------------
#
# The fix as bytecode only: the workspace's source (and the diff) keeps the bug, while an
# interpreter given the folder as it stands would run the fixed code. The worker is given the
# package's source and data files only (`run_hidden_tests`): bytecode stays behind.

COMPILE_FIXED = (
    "git apply .gold.patch && rm .gold.patch && python -c \"import py_compile; py_compile.compile('intervals/ops.py', "
    "cfile='{cfile}', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" && git checkout -q intervals/ops.py"
)
CHECK_FIXED = "python -B -c 'from intervals import merge; print(merge([(1, 10), (2, 3)]))'"


@pytest.mark.parametrize("where", ["__pycache__ (unchecked hash)", "sourceless .pyc"])
def test_the_fix_as_bytecode_only_is_not_graded(session: GenericEnvClient, grader: Any, where: str) -> None:
    tool(session, "write_file", path=".gold.patch", content=GOLD)
    if where == "sourceless .pyc":
        run(session, COMPILE_FIXED.format(cfile="intervals/ops.pyc") + " && rm intervals/ops.py")
    else:
        run(session, COMPILE_FIXED.format(cfile=f"intervals/__pycache__/ops.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"))
    # the attack is real: the agent's own interpreter runs the fixed code from the bytecode
    assert run(session, CHECK_FIXED).startswith("[(1, 10)]"), "the bytecode is not used"
    if where != "sourceless .pyc":
        assert "key=lambda iv: iv[1]" in tool(session, "read_file", path="intervals/ops.py")  # the source keeps the bug
    tool(session, "submit")
    evidence = refused(grade(grader, session))
    if where == "sourceless .pyc":
        assert "intervals/ops.pyc" in evidence["skipped_files"], evidence["skipped_files"]
        assert "A intervals/ops.pyc" in evidence["discarded_changes"], evidence["discarded_changes"]
    else:
        assert set(evidence["FAIL_TO_PASS"].values()) == {"failed"} and evidence["report"] == "complete"


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
