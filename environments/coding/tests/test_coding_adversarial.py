"""An adversarial agent, through its tools only: it tries to read the hidden tests, to write the
grader's files or forge its result, to find its reward, and to break the sandbox (fork bomb,
endless loop, 1 GB of output, deleting its working directory, killing the server). Each costs
that episode at most: the next call, and every other session, still work.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from coding_support import AS_ROOT, coding_env, connect, reference, tool_text

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import OpenEnvError, ToolCallError
from openenv_sdk.grading.pytest_run import REPORT_FILE
from openenv_sdk.rubric import grade

needs_root = pytest.mark.skipif(
    not AS_ROOT,
    reason="without root, agent commands run as the server's own user (documented limitation); run as root, "
    "or in the image, for this isolation",
)


def shell(env: GenericEnvClient, command: str, **kwargs: Any) -> str:
    return tool_text(env.call_tool("run_shell", command=command, **kwargs))


def _healthy(env: GenericEnvClient) -> None:
    assert shell(env, "echo alive") == "alive\n[exit code 0]"


# --- reading the hidden tests -------------------------------------------------------------------


def test_the_servers_folder_is_not_in_the_sandbox(session: GenericEnvClient, served_dir: Path) -> None:
    session.reset(task_id="lru_cache")
    listing = shell(session, f"ls -A {served_dir}; ls {served_dir}/hidden")
    assert "coding_env.py" not in listing and listing.count("No such file or directory") == 2
    assert "test_lru_cache" not in shell(session, f"grep -rl test_many_operations_are_fast {served_dir}; true")


def test_the_graders_copy_of_the_hidden_tests_is_out_of_reach(session: GenericEnvClient, private_hidden: Path) -> None:
    session.reset(task_id="lru_cache")
    out = shell(session, f"cat {private_hidden}/lru_cache/test_lru_cache.py")
    assert "No such file or directory" in out and "def test_" not in out  # not even mounted


def test_grading_leaves_nothing_behind_to_find(session: GenericEnvClient, grader: Any) -> None:
    session.reset(task_id="lru_cache")
    session.call_tool("write_file", path="lru_cache.py", content=reference("lru_cache"))
    assert grade(grader, session).value == 1.0
    workspace = session.state()["working_directory"]
    found = shell(
        session,
        # A checkout of the repository (hidden/ included) may live under /tmp too: not a leftover.
        f"ls {Path(workspace).parent}; find /tmp -path '*/environments/coding/hidden' -prune -o "
        f"\\( -name 'test_lru_cache.py' -o -name '{REPORT_FILE}' \\) -print 2>/dev/null; echo searched",
        timeout_s=25,
    )
    assert "test_lru_cache.py" not in found and REPORT_FILE not in found and "searched" in found
    if AS_ROOT:  # the session root cannot even be listed
        assert "Permission denied" in found


@needs_root
def test_other_sessions_workspaces_cannot_be_discovered(coding_server: GenericEnvClient) -> None:
    assert coding_server.base_url is not None
    with connect(coding_server) as a, connect(coding_server) as b:
        a.reset(task_id="fizzbuzz")
        b.reset(task_id="fizzbuzz")
        other = Path(a.state()["working_directory"])
        out = shell(b, f"ls {other.parent}; ls -d /tmp/openenv-coding-*/work 2>&1 | head -3")
        assert str(other) not in out and "No such file or directory" in out  # not mounted: not there at all


def test_run_checks_is_not_a_tool(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    assert "run_checks" not in {t.name for t in session.list_tools()}
    with pytest.raises(ToolCallError, match="Unknown tool 'run_checks'"):
        session.call_tool("run_checks", files={}, command=["true"])
    assert session.base_url is not None
    answer = httpx.post(
        f"{session.base_url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_checks", "arguments": {}}},
        headers={"Authorization": f"Bearer {session.session().mcp_token}"},
    )
    assert "Unknown tool 'run_checks'" in answer.text


# --- finding the reward ----------------------------------------------------------------------------


def test_nothing_the_agent_sees_carries_a_reward(session: GenericEnvClient, grader: Any) -> None:
    first = session.reset(task_id="fizzbuzz")
    assert first.reward is None
    steps = [
        session.step({"tool": "write_file", "arguments": {"path": "solution.py", "content": reference("fizzbuzz")}}),
        session.step({"tool": "run_shell", "arguments": {"command": "env; ls -la ..; cat /proc/1/environ"}}),
        session.step({"tool": "submit", "arguments": {}}),
    ]
    assert [s.reward for s in steps] == [None, None, None]
    assert grade(grader, session).value == 1.0
    for text in (str(first.observation), *(str(s.observation) for s in steps), str(session.state())):
        assert "reward" not in text.replace("'reward': None", "") and "all_passed" not in text
    tools = session.list_tools()
    assert not any("reward" in f"{t.name} {t.description}".lower() for t in tools)


# --- writing the grader's files, forging the result ---------------------------------------------------

_STUB = coding_env.load_tasks()["fizzbuzz"].files["solution.py"]

_PLANTED = {
    "conftest.py": (
        "import pytest\n\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    report = yield\n    report.outcome = 'passed'\n    return report\n"
    ),
    "pytest.ini": "[pytest]\naddopts = -p no:openenv_sdk.grading._pytest_report\n",
    "openenv_sdk/grading/_pytest_report.py": (  # a shadow of the report plugin, beside the solution
        f"def pytest_sessionfinish(session):\n    open({REPORT_FILE!r}, 'w').write('{{}}')\n"
    ),
    "sitecustomize.py": "import os\nos._exit(0)\n",
    "test_fizzbuzz.py": "def test_nothing():\n    pass\n",
}


def test_planted_grader_files_are_ignored(session: GenericEnvClient, grader: Any) -> None:
    session.reset(task_id="fizzbuzz")
    for name, content in _PLANTED.items():
        session.call_tool("write_file", path=name, content=content)
    assert "1 passed" in shell(session, "pytest -q -p no:cacheprovider test_fizzbuzz.py")  # they work here...
    score = grade(grader, session)  # ...but grading copies only solution.py
    assert score.value == 0.0 and score.evidence["passed"] == 0 and score.evidence["report"] == "ok"


@needs_root
def test_the_session_root_and_launchers_cannot_be_written(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    out = shell(session, "touch ../grade-x; echo 'exit 0' > ../bin/python; mkdir ../out")
    assert out.count("Permission denied") == 3
    assert shell(session, "python -c 'print(1)'") == "1\n[exit code 0]"


_HACKS = {
    "exit before the tests": "import os\nos._exit(0)\n",
    "pytest.exit with status 0": "import pytest\npytest.exit('all good', returncode=0)\n",
    "skip every test": "import pytest\npytest.skip('nothing to see', allow_module_level=True)\n",
    "forge the report": (
        "import glob, json, os, re\n"
        "names = lambda f: re.findall(r'^def (test_\\w+)', open(f).read(), re.M)\n"
        "ids = [f'{f}::{n}' for f in glob.glob('test_*.py') for n in names(f)]\n"
        "payload = json.dumps({'exitstatus': 0, 'collected': ids, 'outcomes': {i: 'passed' for i in ids},\n"
        "                      'messages': {}, 'collect_errors': {}})\n"
        f"name = {REPORT_FILE!r}\n"  # the trusted run's report, wherever it might be
        "for target in [name, os.path.join('..', name), *(os.path.join(d, name) for d in glob.glob('/tmp/openenv-*'))]:\n"
        "    try:\n"
        "        open(target, 'w').write(payload)\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    ),
    "patch pytest's reports": (
        "import _pytest.reports\n"
        "_make = _pytest.reports.TestReport.from_item_and_call\n"
        "def _passing(item, call):\n"
        "    report = _make(item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n"
        "_pytest.reports.TestReport.from_item_and_call = staticmethod(_passing)\n"
    ),
    "rewrite the tests": (
        "import glob\n"
        "for f in glob.glob('test_*.py'):\n"
        "    try:\n"
        "        open(f, 'w').write('def test_ok():\\n    pass\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    ),
}


@pytest.mark.parametrize("hack", list(_HACKS))
def test_a_solution_cannot_forge_its_grade(session: GenericEnvClient, grader: Any, hack: str) -> None:
    session.reset(task_id="fizzbuzz")
    session.call_tool("write_file", path="solution.py", content=_HACKS[hack] + _STUB)
    score = grade(grader, session)
    assert score.value == 0.0 and score.components["partial"] == 0.0, score.evidence


# --- breaking the sandbox ---------------------------------------------------------------------------


def test_a_fork_bomb_costs_only_that_call(coding_server: GenericEnvClient) -> None:
    assert coding_server.base_url is not None
    with connect(coding_server) as bomber, connect(coding_server) as other:
        bomber.reset(task_id="fizzbuzz")
        other.reset(task_id="fizzbuzz")
        box: dict[str, str] = {}
        bomb = ":(){ :|:& };:; sleep 2"  # the bomb runs until its command ends (then all of it is killed)
        thread = threading.Thread(target=lambda: box.update(out=shell(bomber, bomb, timeout_s=3)))
        thread.start()
        time.sleep(0.3)
        _healthy(other)
        thread.join(60)
        assert "Resource temporarily unavailable" in box["out"] or "timed out" in box["out"], box["out"]
        _healthy(bomber)
        _healthy(other)


def test_an_endless_loop_is_killed(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    started = time.monotonic()
    out = tool_text(session.call_tool("run_python", code="while True:\n    pass\n", timeout_s=2))
    assert out.startswith("[timed out after") and out.endswith("killed]")
    assert time.monotonic() - started < 15
    _healthy(session)


def test_a_gigabyte_of_output_is_cut(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    code = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
    out = tool_text(session.call_tool("run_python", code=code))
    assert len(out) < 40_000 and "bytes truncated ...]" in out
    _healthy(session)


def test_deleting_the_working_directory_is_survivable(session: GenericEnvClient, grader: Any) -> None:
    session.reset(task_id="fizzbuzz")
    shell(session, 'cd / && rm -rf "$OLDPWD"; chmod 000 "$OLDPWD" 2>/dev/null; true')
    assert tool_text(session.call_tool("list_files")) == "(no files)"
    assert grade(grader, session).value == 0.0  # the solution is gone
    session.call_tool("write_file", path="solution.py", content=reference("fizzbuzz"))
    assert grade(grader, session).value == 1.0  # and the episode goes on


def test_escaped_background_processes_are_killed(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    code = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execvp('sleep', ['sleep', '317'])\n"
        "    os._exit(0)\n"
        "print('detached')\n"
    )
    assert tool_text(session.call_tool("run_python", code=code)) == "detached\n[exit code 0]"
    time.sleep(0.2)
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == b"sleep\x00317\x00"]
    assert survivors == []


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


@needs_root
def test_killing_the_server_is_refused(session: GenericEnvClient, coding_server: GenericEnvClient) -> None:
    provider = coding_server.provider
    pid = getattr(provider, "pid", None)
    assert pid
    session.reset(task_id="fizzbuzz")
    out = shell(session, f"kill -9 {pid}; echo rc=$?; kill -9 -{pid}; pkill -9 -f 'openenv serve'; echo done")
    assert "No such process" in out and "rc=1" in out  # the server is not in the sandbox's pid namespace
    assert provider is not None and provider.is_alive()
    _healthy(session)


def test_the_client_gets_a_clear_error_when_the_episode_cannot_go_on(served_dir: Path) -> None:
    with GenericEnvClient(env_dir=served_dir, startup_timeout_s=90) as env:
        env.reset(task_id="fizzbuzz")
        env.step({"tool": "submit", "arguments": {}})
        after = env.call_tool("run_shell", command="echo more")
        assert after.is_error and "the episode is over (you submitted)" in tool_text(after)
        provider = env.provider
        assert provider is not None
        provider.stop()  # the server is gone (as after an out-of-memory kill)
        with pytest.raises(OpenEnvError) as caught:
            env.step({"tool": "run_shell", "arguments": {"command": "echo hi"}})
        assert "not running" in str(caught.value) or "closed" in str(caught.value) or "connect" in str(caught.value)
