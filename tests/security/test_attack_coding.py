"""Attacks on the coding environment, through its tools only, against a real server on a real port.

The server (`openenv serve`) serves the repository's own `environments/coding/` folder, hidden
tests and reference solutions included (as a developer serves it from a checkout), and every
score comes from the real `CodingGrader` through the orchestrator's `run_checks`. Each test is
one attack an agent could try; it fails if the attack works. The controls come first: the
reference solution scores 1.0 and the untouched stub 0.0, so a 0.0 below means the attack was
refused, not that grading is broken.

These run as root (as CI does, with bubblewrap installed): each session then has a uid of its
own. Where bubblewrap cannot run they fail with the `IsolationUnavailable` message.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.grading.pytest_run import REPORT_FILE, HiddenTestRun
from openenv_sdk.providers.local import LocalProcessProvider
from openenv_sdk.rubric import grade
from openenv_sdk.sandbox import isolation_mode

REPO = Path(__file__).resolve().parents[2]
CODING_DIR = REPO / "environments" / "coding"
HIDDEN = CODING_DIR / "hidden"
CANARY = "OPENENV_SECURITY_CANARY"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-session uids need root (CI runs as root)")


def _load_grader_module() -> Any:
    spec = importlib.util.spec_from_file_location("coding_grader_under_attack", CODING_DIR / "grader.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GRADER = _load_grader_module()
STUB = "def fizzbuzz(n: int) -> list[str]:\n    raise NotImplementedError\n"
REFERENCE = (HIDDEN / "fizzbuzz" / "reference.py").read_text(encoding="utf-8")
HIDDEN_TEST = HIDDEN / "fizzbuzz" / "test_fizzbuzz.py"


# --- the server, sessions, helpers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def canary() -> str:
    return secrets.token_hex(16)


@pytest.fixture(scope="module")
def server(canary: str) -> Iterator[GenericEnvClient]:
    """`openenv serve environments/coding` (hidden/ included) on a free loopback port, with a
    secret in its environment."""
    isolation_mode()  # fails with what is missing, never skips
    provider = LocalProcessProvider(CODING_DIR, env={CANARY: canary}, startup_timeout_s=90)
    with GenericEnvClient(provider=provider, timeout_s=90) as owner:
        owner.connect()
        yield owner


@pytest.fixture
def session(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    yield from _session(server)


@pytest.fixture
def other(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    yield from _session(server)


def _session(server: GenericEnvClient) -> Iterator[GenericEnvClient]:
    with _client(server) as client:
        yield client


def _client(server: GenericEnvClient) -> GenericEnvClient:
    """Another session on the server, with the orchestrator's token."""
    assert server.base_url is not None and server.provider is not None
    return GenericEnvClient(server.base_url, orchestrator_token=server.provider.orchestrator_token, timeout_s=90)


@pytest.fixture(scope="module")
def grader() -> Any:
    return GRADER.CodingGrader(timeout_s=30.0, test_timeout_s=5.0)


def tool(env: GenericEnvClient, name: str, **arguments: Any) -> str:
    result = env.call_tool(name, **arguments)
    return "".join(getattr(part, "text", "") for part in result.content)


def shell(env: GenericEnvClient, command: str, **kwargs: Any) -> str:
    return tool(env, "run_shell", command=command, **kwargs)


def write(env: GenericEnvClient, path: str, content: str) -> None:
    assert tool(env, "write_file", path=path, content=content).startswith("Wrote "), path


def workspace(env: GenericEnvClient) -> Path:
    return Path(env.state()["working_directory"])


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


def graded(env: GenericEnvClient, grader: Any, solution: str, **files: str) -> Any:
    """Reset fizzbuzz, plant `files` and `solution`, and grade with the real grader."""
    env.reset(task_id="fizzbuzz")
    for name, text in files.items():
        write(env, name, text)
    write(env, "solution.py", solution)
    return grade(grader, env)


def refused(score: Any) -> None:
    assert score.value == 0.0 and score.components == {"all_passed": 0.0, "partial": 0.0}, score.evidence


# --- controls --------------------------------------------------------------------------------------


def test_control_the_reference_scores_one(session: GenericEnvClient, grader: Any) -> None:
    """Control: the task's reference solution scores 1.0 (grading works)."""
    score = graded(session, grader, REFERENCE)
    assert score.value == 1.0 and score.components == {"all_passed": 1.0, "partial": 1.0}, score.evidence


def test_control_the_stub_scores_zero(session: GenericEnvClient, grader: Any) -> None:
    """Control: the untouched stub scores 0.0."""
    refused(graded(session, grader, STUB))


# --- forging the grade from the solution file ---------------------------------------------------------

_FORGERIES = {
    "runner monkeypatch": "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
    "report monkeypatch": (
        "import _pytest.reports\n"
        "_make = _pytest.reports.TestReport.from_item_and_call\n"
        "def _passing(item, call):\n"
        "    report = _make(item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n"
        "_pytest.reports.TestReport.from_item_and_call = staticmethod(_passing)\n"
    ),
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "pytest.exit(0) at import": "import pytest\npytest.exit('all good', returncode=0)\n",
    "fake pass lines on stdout": (
        "import sys\n"
        "for out in (sys.stdout, sys.__stdout__, sys.stderr):\n"
        "    out.write('test_fizzbuzz.py::test_first_fifteen PASSED\\n===== 4 passed in 0.01s =====\\n')\n"
        "    out.flush()\n"
    ),
    "fake reply on the worker's pipe": (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, b'{\"id\":1,\"ok\":[\"1\"]}\\n{\"id\":2,\"ok\":[\"1\"]}\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "overwrite the report": (
        "import glob, json, os\n"
        "ids = ['test_fizzbuzz.py::test_first_fifteen', 'test_fizzbuzz.py::test_one',\n"
        "       'test_fizzbuzz.py::test_zero_and_negative', 'test_fizzbuzz.py::test_long_run']\n"
        "report = json.dumps({'exitstatus': 0, 'collected': ids, 'outcomes': {i: 'passed' for i in ids},\n"
        "                     'messages': {}, 'collect_errors': {}})\n"
        f"name = {REPORT_FILE!r}\n"  # the trusted run's report (openenv_sdk.grading.pytest_run)
        "targets = [name, os.path.join('..', name), os.path.join('/tmp', name)]\n"
        "targets += [os.path.join(d, name) for d in glob.glob('/tmp/openenv-*') + glob.glob('/tmp/*/')]\n"
        "for target in targets:\n"
        "    try:\n"
        "        open(target, 'w').write(report)\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "rewrite the hidden tests": (
        "import glob\n"
        "for f in glob.glob('/tmp/**/test_fizzbuzz.py', recursive=True) + glob.glob('test_*.py'):\n"
        "    try:\n"
        "        open(f, 'w').write('def test_ok():\\n    pass\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "kill the trusted pytest": (
        "import os, signal\n"
        "for pid in range(2, 5000):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
    ),
}


@pytest.mark.parametrize("attack", list(_FORGERIES))
def test_a_solution_cannot_forge_its_grade(session: GenericEnvClient, grader: Any, attack: str) -> None:
    """A solution patches pytest, exits at import, fakes passes, writes a report, rewrites or kills the tests."""
    refused(graded(session, grader, _FORGERIES[attack] + STUB))


_PLANTED_CONFIG = {
    "conftest.py": (
        "import pytest\n\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    report = yield\n    report.outcome = 'passed'\n    return report\n"
    ),
    "pytest.ini": "[pytest]\naddopts = -p no:python --co\n",
    "setup.cfg": "[tool:pytest]\naddopts = -p no:python --co\n",
    "tox.ini": "[pytest]\naddopts = -p no:python --co\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-p no:python --co'\n",
    "fake.pth": "import os; os._exit(0)\n",
    "sitecustomize.py": "import os\nos._exit(0)\n",
    "usercustomize.py": "import os\nos._exit(0)\n",
    "test_fizzbuzz.py": "def test_first_fifteen():\n    pass\n",
}


@pytest.mark.parametrize("planted", list(_PLANTED_CONFIG))
def test_planted_config_and_startup_files_are_ignored(session: GenericEnvClient, grader: Any, planted: str) -> None:
    """conftest.py, pytest.ini, setup.cfg, tox.ini, pyproject.toml, .pth, *customize.py or a fake test planted."""
    refused(graded(session, grader, STUB, **{planted: _PLANTED_CONFIG[planted]}))


def test_pth_and_customize_files_in_the_solution_folder_do_not_run(session: GenericEnvClient, grader: Any) -> None:
    """.pth and site/usercustomize.py beside the solution neither forge a pass nor break a right one."""
    # They work for the agent's own python... (site runs them from site-packages only; the
    # solution's folder is never one)...
    planted = {name: text for name, text in _PLANTED_CONFIG.items() if name.endswith((".pth", "customize.py"))}
    refused(graded(session, grader, STUB, **planted))
    # ...and a reference next to them still scores 1.0: the grade is the solution's alone.
    session.reset(task_id="fizzbuzz")
    for name, text in planted.items():
        write(session, name, text)
    write(session, "solution.py", REFERENCE)
    assert grade(grader, session).value == 1.0


LYING_EQ = (
    "class Anything:\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    def __hash__(self):\n        return 0\n"
    "    def __len__(self):\n        return 15\n"
    "    def __iter__(self):\n        return iter(['1'] * 15)\n"
    "\n"
    "def fizzbuzz(n):\n    return Anything()\n"
)


def test_an_object_with_a_lying_eq_does_not_pass(session: GenericEnvClient, grader: Any) -> None:
    """The solution returns an object whose __eq__ always says yes."""
    refused(graded(session, grader, LYING_EQ))


def test_a_str_subclass_with_a_lying_eq_does_not_pass(session: GenericEnvClient, grader: Any) -> None:
    """The solution returns str and list subclasses whose __eq__ always says yes."""
    source = (
        "class S(str):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = str.__hash__\n"
        "class L(list):\n"
        "    def __eq__(self, other):\n        return True\n"
        "def fizzbuzz(n):\n    return L([S('x')])\n"
    )
    refused(graded(session, grader, source))


_LIAR = """
class Liar:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 7

def make():
    return Liar()
"""
_LIAR_TEST = """
from solution import make

def test_remote_objects_answer_eq_ne_hash_here():
    a, b = make(), make()
    assert a == a and not (a != a)  # identity still holds
    assert not (a == b) and a != b  # two remote objects: never asked of the solution
    assert not (a == [1]) and a != "x"  # a local value: never asked either
    assert len({a, b}) == 2 and hash(a) == hash(a)
"""


def test_remote_objects_never_forward_eq_ne_or_hash(session: GenericEnvClient) -> None:
    """Two remote objects compared with ==, != and hash() never ask the solution."""
    session.reset(task_id="fizzbuzz")
    write(session, "solution.py", _LIAR)
    answer = session.call("run_checks", files={"test_liar.py": _LIAR_TEST}, pytest_args=["test_liar.py"])
    run = HiddenTestRun.model_validate(answer)
    assert run.all_passed(["test_liar.py::test_remote_objects_answer_eq_ne_hash_here"]), run


def test_an_endless_loop_at_import_scores_zero_in_bounded_time(session: GenericEnvClient) -> None:
    """An endless loop at import: score 0 within the grader's time limit, the session goes on."""
    strict = GRADER.CodingGrader(timeout_s=12.0, test_timeout_s=2.0)
    started = time.monotonic()
    score = graded(session, strict, "while True:\n    pass\n" + REFERENCE)
    assert time.monotonic() - started < 40
    refused(score)
    assert tool(session, "run_shell", command="echo alive") == "alive\n[exit code 0]"


def test_the_worker_cannot_read_the_reference_or_the_tests(session: GenericEnvClient, grader: Any) -> None:
    """At grading time, the solution looks for the reference and the hidden tests to run them."""
    # A solution that, at import, looks everywhere for the reference or the hidden tests and
    # would use the reference if it found one.
    source = (
        "import glob, os\n"
        "_found = None\n"
        f"_paths = [{str(HIDDEN / 'fizzbuzz' / 'reference.py')!r}]\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root.startswith(('/proc', '/sys', '/dev', '/usr')):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    _paths += [os.path.join(root, f) for f in files if f in ('reference.py', 'test_fizzbuzz.py')]\n"
        "for path in _paths:\n"
        "    try:\n"
        "        _found = open(path).read()\n"
        "        break\n"
        "    except OSError:\n"
        "        pass\n"
        "if _found and 'def fizzbuzz' in _found:\n"
        "    exec(_found)\n"
        "else:\n" + "".join("    " + line + "\n" for line in STUB.splitlines())
    )
    refused(graded(session, grader, source))


# --- reading the hidden tests and the reference from the agent's tools --------------------------------


def test_hidden_files_unreadable_by_path(session: GenericEnvClient) -> None:
    """run_shell cats the hidden tests and the reference by their host paths."""
    session.reset(task_id="fizzbuzz")
    out = shell(
        session,
        f"cat {HIDDEN}/fizzbuzz/reference.py {HIDDEN_TEST}; ls -A {CODING_DIR} {HIDDEN}; "
        f"cat {REPO}/environments/coding/grader.py | head -3",
    )
    assert "def fizzbuzz" not in out and "def test_" not in out and "CodingGrader" not in out
    assert "No such file or directory" in out


def test_hidden_files_not_found_by_searching(session: GenericEnvClient) -> None:
    """run_shell searches the whole file system for the hidden tests and the reference."""
    session.reset(task_id="fizzbuzz")
    marker = "test_zero_and_negative"  # a name only the hidden tests hold
    out = shell(
        session,
        "find / \\( -path /proc -o -path /sys \\) -prune -o "
        "\\( -name reference.py -o -name 'test_fizzbuzz.py' -o -name expected_tests.json -o -name coding_env.py \\) "
        "-print 2>/dev/null; echo searched",
        timeout_s=30,
    )
    assert out.endswith("searched\n[exit code 0]"), out
    # The system and the Python runtime are mounted read-only from the host; everything else is grepped.
    roots = " ".join(f"/{entry}" for entry in ("tmp", "home", "root", "work", "srv", "opt", "var", "mnt", "run"))
    grep = f"grep -rls {marker} {roots} --exclude-dir=site-packages 2>/dev/null; echo searched"
    found = shell(session, grep, timeout_s=30)
    assert found.endswith("searched\n[exit code 0]") and marker not in found, found
    leaks = ("test_fizzbuzz.py", "expected_tests.json", "coding_env.py", "/hidden/")
    assert [line for line in out.splitlines() if any(leak in line for leak in leaks)] == []


# --- one session against another ---------------------------------------------------------------------


def test_another_sessions_workspace_by_path(session: GenericEnvClient, other: GenericEnvClient) -> None:
    """One session reads and writes another's workspace by its path."""
    session.reset(task_id="fizzbuzz")
    other.reset(task_id="fizzbuzz")
    write(session, "notes.txt", "secret-of-a\n")
    target = workspace(session)
    attack = shell(
        other, f"cat {target}/notes.txt; echo pwned > {target}/notes.txt; ls {target.parent}; ls /tmp; echo done"
    )
    assert "secret-of-a" not in attack
    assert tool(session, "read_file", path="notes.txt") == "secret-of-a\n"


def test_another_sessions_workspace_through_proc_cwd(session: GenericEnvClient, other: GenericEnvClient) -> None:
    """One session reads and writes another's workspace through /proc/<pid>/cwd of its running command."""
    session.reset(task_id="fizzbuzz")
    other.reset(task_id="fizzbuzz")
    write(session, "notes.txt", "secret-of-a\n")
    thread, box = in_background(lambda: shell(session, "sleep 6; cat notes.txt"))
    try:
        assert wait_for(lambda: _pids_of(b"sleep\x006\x00") != [])
        attack = shell(
            other,
            "for p in /proc/[0-9]*; do cat $p/cwd/notes.txt 2>/dev/null; "
            "echo pwned > $p/cwd/notes.txt 2>/dev/null; done; ps -eo pid,user,args",
        )
        assert "secret-of-a" not in attack and "sleep 6" not in attack
    finally:
        thread.join(30)
    assert box["out"] == "secret-of-a\n[exit code 0]"


def test_kill_all_reaches_no_other_session(session: GenericEnvClient, other: GenericEnvClient) -> None:
    """kill -9 -1 in one session while another's command runs."""
    session.reset(task_id="fizzbuzz")
    other.reset(task_id="fizzbuzz")
    thread, box = in_background(lambda: shell(session, "sleep 3; echo finished"))
    try:
        assert wait_for(lambda: _pids_of(b"sleep\x003\x00") != [])
        shell(other, "kill -9 -1; pkill -9 -f sleep; true")
    finally:
        thread.join(30)
    assert box["out"] == "finished\n[exit code 0]"
    assert shell(other, "echo alive") == "alive\n[exit code 0]"


_WATCHER = """
import glob, os, time
end = time.time() + 8
while time.time() < end:
    for path in glob.glob('/tmp/openenv-coding-*/work/solution.py') + ['solution.py']:
        try:
            open(path, 'w').write('pwned')
        except OSError:
            pass
    time.sleep(0.05)
"""


def test_a_setsid_watcher_dies_with_its_command(server: GenericEnvClient) -> None:
    """A `setsid env -i python3 w.py &` watcher outlives its command and overwrites a later session's files."""
    first = _client(server)
    first.reset(task_id="fizzbuzz")
    write(first, "w.py", _WATCHER)
    out = shell(first, "setsid env -i python3 w.py > /dev/null 2>&1 < /dev/null & sleep 0.3; echo started")
    assert out == "started\n[exit code 0]"
    time.sleep(0.3)
    assert _pids_of(b"w.py\x00", anywhere=True) == []  # nothing of it outlived its command
    first.close()
    later = _client(server)
    try:
        later.reset(task_id="fizzbuzz")
        time.sleep(1.0)
        assert "raise NotImplementedError" in tool(later, "read_file", path="solution.py")
    finally:
        later.close()


# --- the host: the server's API and the server's secrets ---------------------------------------------


def test_the_servers_api_is_unreachable_from_run_python(session: GenericEnvClient) -> None:
    """run_python connects to the server's API on 127.0.0.1 (and localhost, ::1)."""
    session.reset(task_id="fizzbuzz")
    assert session.base_url is not None
    port = int(session.base_url.rsplit(":", 1)[1])
    probe = (
        "import socket, urllib.request\n"
        "for host in ('127.0.0.1', 'localhost', '::1', '0.0.0.0'):\n"
        "    try:\n"
        f"        socket.create_connection((host, {port}), timeout=2).close()\n"
        "        print('REACHED', host)\n"
        "    except OSError as e:\n"
        "        print('refused', host)\n"
        "try:\n"
        f"    print(urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=2).read())\n"
        "except OSError as e:\n"
        "    print('no http', e)\n"
    )
    out = tool(session, "run_python", code=probe)
    assert "REACHED" not in out and "healthy" not in out and "no http" in out, out


def test_the_servers_environment_is_unreadable(
    session: GenericEnvClient, server: GenericEnvClient, canary: str
) -> None:
    """A command reads the server's environment (/proc/<server pid>/environ) for a secret."""
    session.reset(task_id="fizzbuzz")
    pid = server.provider.pid  # type: ignore[union-attr]
    assert pid and canary in Path(f"/proc/{pid}/environ").read_text(errors="replace")  # the secret is there
    out = shell(session, f"cat /proc/{pid}/environ; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env; echo done")
    assert canary not in out and CANARY not in out


# --- what a session leaves behind ------------------------------------------------------------------------


def test_the_session_folder_is_removed_on_close(server: GenericEnvClient) -> None:
    """A session leaves files (unreadable ones included) and a background process behind at close."""
    client = _client(server)
    client.reset(task_id="fizzbuzz")
    shell(client, "mkdir -p deep/er && echo x > deep/er/file && chmod 000 deep/er; sleep 30 & true")
    root = workspace(client).parent
    assert root.is_dir()
    client.close()
    assert wait_for(lambda: not root.exists()), f"{root} left behind"


def test_a_killed_servers_session_folders_are_removed_by_the_next(tmp_path: Path) -> None:
    """The server is killed with kill -9: its session folders are removed by the next server."""
    isolation_mode()
    base = tmp_path / "sessions"
    env = {"OPENENV_CODING_WORKDIR": str(base)}
    crashed = LocalProcessProvider(CODING_DIR, env=env, startup_timeout_s=90)
    with GenericEnvClient(provider=crashed, timeout_s=90) as client:
        client.reset(task_id="fizzbuzz")
        root = workspace(client).parent
        assert root.is_dir()
        os.kill(crashed.pid, 9)  # type: ignore[arg-type]
        assert wait_for(lambda: not crashed.is_alive())
        assert root.is_dir()  # a kill -9 leaves it...
    restarted = LocalProcessProvider(CODING_DIR, env=env, startup_timeout_s=90)
    with GenericEnvClient(provider=restarted, timeout_s=90) as fresh:
        fresh.reset(task_id="fizzbuzz")  # ...and the next server's first session removes it
        assert wait_for(lambda: not root.exists()), f"{root} left behind"


def _pids_of(cmdline: bytes, *, anywhere: bool = False) -> list[int]:
    """Processes whose command line is `cmdline` (or, with `anywhere`, contains it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if (cmdline in line) if anywhere else (line == cmdline):
            found.append(int(proc.name))
    return found
