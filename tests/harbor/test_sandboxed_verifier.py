"""A Harbor-style verifier (pytest importing the agent's module and running its programs) run with
`openenv_sdk.grading.pytest_sandboxed`: the tests run in the trusted process, the agent's code in
fresh sandboxes through a real `ProgramRunServer`. Real bubblewrap, real pytest, no mocks.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.grading import trusted_git
from openenv_sdk.grading.program_runs import CLIENT_SCRIPT, ProgramRunServer
from openenv_sdk.sandbox import Mount, Sandbox, SandboxLimits, isolation_mode

ATTACK = """
import os, signal, sys
TRUSTED = {trusted!r}
for path in (TRUSTED + "/reward.txt", "/logs/verifier/reward.txt"):
    try:
        open(path, "w").write("1")
    except OSError:
        pass
# the processes of its own uid only, never as root: this file's control runs it on the host
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()] if os.getuid() else []:
    try:
        if os.stat(f"/proc/{{pid}}").st_uid != os.getuid():
            continue
        open(f"/proc/{{pid}}/cmdline", "rb").read().index(b"pytest")
        os.kill(pid, signal.SIGKILL)  # the verifier itself, were it visible
        open(TRUSTED + "/killed-pytest", "w").close()
    except (OSError, ValueError):
        pass
for name in list(sys.modules):
    if "pytest" in name:  # were this the verifier's interpreter, every assertion would pass
        setattr(sys.modules[name], "fail", lambda *a, **k: None)
"""

SOLUTION = ATTACK + """
import time
if os.getuid() and os.fork() == 0:  # a daemon that keeps rewriting the file a later test reads (not as root)
    os.setsid()
    for _ in range(600):
        try:
            open({agent!r} + "/data.txt", "w").write("forged")
        except OSError:
            pass
        time.sleep(0.05)
    os._exit(0)
def add(a, b):
    return a + b + 1  # wrong


def mul(a, b):
    return a * b


def where():
    return os.getpid(), os.getuid()
"""

PROGRAM = ATTACK + """
print("ok")
"""

TESTS = """
import os, subprocess, sys, time
import pytest
import solution

AGENT = {agent!r}


def test_add():
    assert solution.add(1, 2) == 3


def test_mul():
    assert solution.mul(2, 3) == 6


def test_the_module_ran_elsewhere():
    pid, uid = solution.where()
    assert pid != os.getpid()
    assert uid != 0 or os.getuid() != 0


def test_program_output():
    result = subprocess.run(["python3", AGENT + "/prog.py"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout == "ok\\n"


def test_program_exit_code_and_stdin():
    result = subprocess.run("read x; echo got $x; exit 7", shell=True, input="in\\n", capture_output=True,
                            text=True, cwd=AGENT, timeout=30)
    assert (result.returncode, result.stdout) == (7, "got in\\n")


def test_git_is_trusted():
    result = subprocess.run(["git", "status", "--porcelain"], cwd=AGENT + "/repo", capture_output=True, text=True)
    assert " M a.txt" in result.stdout.splitlines()


def test_zz_a_file_the_worker_could_rewrite_is_intact():
    solution.mul(1, 1)  # the worker (and its daemon) is alive
    time.sleep(0.5)
    assert open(AGENT + "/data.txt").read() == "original"


def test_the_tests_own_helper_is_not_shadowed():
    import helpers

    assert helpers.expected() == "trusted"


def test_the_agents_package_is_not_imported():
    sys.path.insert(0, AGENT + "/lib")
    with pytest.raises(ImportError, match="the agent's code"):
        import agentpkg  # noqa: F401
"""


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, ProgramRunServer]]:
    isolation_mode()
    tmp_path.chmod(0o755)
    sandbox = Sandbox(limits=SandboxLimits(timeout_s=30, sandbox_user=None), name="check", base_dir=tmp_path)
    agent, scratch = sandbox.workspace, sandbox.make_dir("scratch")
    trusted, tests = tmp_path / "trusted", tmp_path / "tests"  # the verifier's own, outside the sandbox
    for folder in (trusted, tests):
        folder.mkdir(mode=0o755)
    (agent / "solution.py").write_text(SOLUTION.format(trusted=str(trusted), agent=str(agent)))
    (agent / "data.txt").write_text("original")
    (agent / "prog.py").write_text(PROGRAM.format(trusted=str(trusted)))
    (agent / "lib" / "agentpkg").mkdir(parents=True)
    (agent / "lib" / "agentpkg" / "__init__.py").write_text(ATTACK.format(trusted=str(trusted)))
    repo = agent / "repo"
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["config", "user.email", "a@b"], ["config", "user.name", "a"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, env=env, check=True)
    (repo / "a.txt").write_text("two\n")
    subprocess.run(["git", "config", "core.fsmonitor", f"touch {trusted}/fsmonitor-ran; false"], cwd=repo, env=env, check=True)
    (tests / "test_outputs.py").write_text(TESTS.format(agent=str(agent)))
    (tests / "helpers.py").write_text('def expected():\n    return "trusted"\n')
    (agent / "helpers.py").write_text('def expected():\n    return "forged by the agent"\n')  # must not shadow it
    for entry in agent.iterdir():
        sandbox.give(entry)
    trusted.chmod(0o777)  # were the agent's code to run with a reach of it, it could write here
    server = ProgramRunServer(
        tmp_path / "run.sock",
        sandbox=sandbox,
        folders=[Mount(source=agent, writable=True), Mount(source=scratch, writable=True)],
        max_timeout_s=60,
    )
    try:
        with server:
            yield agent, trusted, tests, server
    finally:
        sandbox.close()


def test_the_verifier_judges_while_the_agents_code_runs_sandboxed(layout: tuple[Path, Path, Path, ProgramRunServer]) -> None:
    agent, trusted, tests, server = layout
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tests),
        "OPENENV_AGENT_DIR": str(agent),
        "OPENENV_RUN_SOCKET": str(server.socket_path),
        "OPENENV_RUN_CLIENT": str(CLIENT_SCRIPT),
        "OPENENV_TRUSTED_GIT": str(Path(trusted_git.__file__)),
        "PYTHONSAFEPATH": "1",
    }
    argv = [sys.executable, "-m", "pytest", "-p", "openenv_sdk.grading.pytest_sandboxed", "-p", "no:cacheprovider", "-rA", str(tests)]
    done = subprocess.run(argv, cwd=agent, env=env, capture_output=True, text=True, timeout=240)
    report = done.stdout
    assert done.returncode == 1, report
    assert "FAILED" in report and "test_outputs.py::test_add" in report.split("short test summary")[1], report
    for name in ("test_mul", "test_the_module_ran_elsewhere", "test_program_output", "test_program_exit_code_and_stdin",
                 "test_git_is_trusted", "test_the_tests_own_helper_is_not_shadowed",
                 "test_zz_a_file_the_worker_could_rewrite_is_intact",
                 "test_the_agents_package_is_not_imported"):  # fmt: skip
        assert any(line.startswith("PASSED") and line.endswith(f"test_outputs.py::{name}") for line in report.splitlines()), (
            name,
            report,
        )
    assert sorted(p.name for p in trusted.iterdir()) == []  # no reward written, nobody killed, no fsmonitor
    assert server.runs >= 3


def test_without_the_plugin_the_same_verifier_is_the_agents(layout: tuple[Path, Path, Path, ProgramRunServer]) -> None:
    """Control: the same tests run plainly (as Harbor runs them) import the agent's module into the
    verifier: its code runs there (writes the trusted folder, patches pytest)."""
    agent, trusted, tests, _ = layout
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tests), "PYTHONPATH": str(agent)}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tests / "test_outputs.py"), "-k", "add"]
    subprocess.run(argv, cwd=agent, env=env, capture_output=True, text=True, timeout=120)
    assert (trusted / "reward.txt").exists()
