"""An agent that attacks its sandbox through its tools, over the wire.

It tries to read the hidden tests, to write the grader's files, to find its reward, and to
break the server (fork bomb, endless loop, 1 GB of output, deleting its working directory,
escaping with setsid, killing the server). Each costs that episode at most: the next tool call
and other sessions still work, and where an episode cannot go on the client gets a clear error.

Each session is an `openenv_sdk.sandbox.Sandbox`: as root, a uid of its own and fresh
namespaces per command, so the host's files outside the system and the runtime do not exist for
the agent ("No such file or directory"), and processes outside its command do not either
("No such process"). Without root there is no uid boundary and those tests are skipped.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mini_swe_testkit import ENV_DIR, IS_ROOT, call, call_error, load_grader_module, open_client

from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import OpenEnvError, ToolCallError
from openenv_sdk.rubric import grade

needs_root = pytest.mark.skipif(not IS_ROOT, reason="without root, agent commands run as the server's own user")


@pytest.fixture
def client(server_url: str) -> Iterator[GenericEnvClient]:
    with open_client(server_url, timeout_s=90) as c:
        c.reset(task_id="datekit-1")
        yield c


def _refusals(out: str) -> int:
    """How many times a command was refused: the path is not in the sandbox, or not its to use."""
    return sum(out.count(why) for why in ("Permission denied", "No such file or directory", "Read-only file system"))


def _other_session_works(server_url: str) -> None:
    with open_client(server_url, timeout_s=60) as other:
        other.reset(task_id="pagekit-1")
        assert call(other, "run", command="echo fine") == "fine\n[exit code 0]"


def _secrets(task_id: str) -> list[str]:
    """Strings only the hidden data holds: hidden test function names and gold patch lines."""
    hidden = json.loads((ENV_DIR / "hidden" / task_id / "task.json").read_text())
    names = {node.split("::")[1].split("[")[0] for node in hidden["FAIL_TO_PASS"]}
    patch = (ENV_DIR / "hidden" / task_id / "gold.patch").read_text()
    added = [line[1:].strip() for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return sorted(names) + [line for line in added if len(line) > 20]


# --- reading what is hidden -----------------------------------------------------------------


def test_file_tools_stay_inside_the_repository(client: GenericEnvClient) -> None:
    gold = ENV_DIR / "hidden" / "datekit-1" / "gold.patch"
    assert "outside the repository" in call_error(client, "read_file", path=str(gold))
    assert "outside the repository" in call_error(client, "read_file", path="../../../../" + str(gold))
    assert "outside the repository" in call_error(client, "search", pattern="def", path=str(ENV_DIR))


@needs_root
def test_hidden_tests_and_gold_patch_cannot_be_read(client: GenericEnvClient) -> None:
    hidden = ENV_DIR / "hidden"
    out = call(client, "run", command=f"cat {hidden}/datekit-1/gold.patch; ls {hidden}")
    assert _refusals(out) == 2, out
    call(client, "run", command=f"ln -s {hidden}/datekit-1/gold.patch leak.patch")
    assert "which does not exist" in call_error(client, "read_file", path="leak.patch")
    for secret in _secrets("datekit-1"):
        found = call(client, "run", command=f"grep -rIlF -e {secret!r} {ENV_DIR} /tmp/mini_swe-* 2>/dev/null; true")
        assert found == "[exit code 0]", f"{secret!r} is readable in: {found}"


def _server_pids() -> list[int]:
    """The pids of servers of this folder (seen from the host, which runs the tests as root)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"serve" in argv and str(ENV_DIR).encode() in argv:
            pids.append(int(proc.name))
    return pids


@needs_root
def test_the_server_process_is_out_of_reach(client: GenericEnvClient) -> None:
    pids = _server_pids()
    assert pids, "the server of this folder was not found"
    script = "; ".join(f"cat /proc/{pid}/environ; ls /proc/{pid}/cwd" for pid in pids)
    out = call(client, "run", command=script)
    # Permission denied, or the pid is hidden from the sandbox user altogether (hidepid).
    refused = out.count("Permission denied") + out.count("No such file")
    assert refused >= 2 * len(pids) and "PATH=" not in out, out


# --- writing the grader's files -------------------------------------------------------------


@needs_root
def test_grader_and_task_files_cannot_be_written(client: GenericEnvClient) -> None:
    targets = [
        ENV_DIR / "grader.py",
        ENV_DIR / "mini_swe_env.py",
        ENV_DIR / "tasks" / "datekit-1" / "repo" / "tests" / "test_parse.py",
    ]
    before = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in targets}
    script = "; ".join(f"echo 'REWARD = 1.0' >> {path}" for path in targets)
    out = call(client, "run", command=script + f"; touch {ENV_DIR}/sitecustomize.py; mkdir {ENV_DIR}/hidden/x")
    assert _refusals(out) >= len(targets) + 1, out
    assert {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in targets} == before
    assert not (ENV_DIR / "sitecustomize.py").exists()
    runtime = call(client, "run", command="dirname $(dirname $(command -v python))").splitlines()[0]
    out = call(client, "run", command=f"echo 'exit 0' > {runtime}/bin/python; echo x > {runtime}/site/pytest.py")
    assert out.count("Read-only file system") == 2, out


def test_writes_to_the_test_files_do_not_count(server_url: str) -> None:
    """Even an agent that guessed the hidden tests' file and names cannot replace them."""
    hidden = json.loads((ENV_DIR / "hidden" / "datekit-1" / "task.json").read_text())
    path = hidden["hidden_tests"][0]
    fakes = "".join(f"def {name}(*args):\n    pass\n\n\n" for name in _secrets("datekit-1") if name.startswith("test_"))
    with open_client(server_url) as c:
        c.reset(task_id="datekit-1")
        call(c, "write_file", path=path, content=fakes)
        call(c, "submit")
        score = grade(load_grader_module().MiniSweGrader(), c)
    evidence = score.evidence["resolved"]
    assert score.value == 0.0 and f"A {path}" in evidence["discarded_changes"]
    assert "passed" not in set(evidence["FAIL_TO_PASS"].values())


# --- finding the reward ---------------------------------------------------------------------


def test_nothing_the_agent_reaches_carries_a_reward(client: GenericEnvClient) -> None:
    names = [tool.name for tool in client.list_tools()]
    assert names == ["read_file", "list_files", "search", "edit_file", "write_file", "run", "submit"]
    assert "reward" not in json.dumps([tool.model_dump(mode="json") for tool in client.list_tools()])
    with pytest.raises(ToolCallError):
        client.call_tool("run_tests", files={}, source_paths=["datekit"], node_ids=[])
    for action in (
        {"tool": "run", "arguments": {"command": "env | sort; ls -a ~ ..; cat /proc/self/environ | tr '\\0' '\\n'"}},
        {"tool": "search", "arguments": {"pattern": "reward", "ignore_case": True}},
        {"tool": "submit", "arguments": {}},
    ):
        result = client.step(action)
        assert result.reward is None
        assert "reward" not in json.dumps(result.observation).lower() or action["tool"] == "search"
    assert result.done


# --- breaking things ------------------------------------------------------------------------


def test_fork_bomb_costs_one_command(client: GenericEnvClient, server_url: str) -> None:
    started = time.monotonic()
    out = call(client, "run", command=":(){ :|:& };:", timeout_s=3)
    assert time.monotonic() - started < 30
    assert "[exit code" in out or "[timed out" in out
    assert call(client, "run", command="echo alive") == "alive\n[exit code 0]"
    _other_session_works(server_url)


def test_endless_loop_is_killed_at_its_timeout(client: GenericEnvClient, server_url: str) -> None:
    out = call(client, "run", command="while :; do :; done", timeout_s=1)
    assert re.search(r"\[timed out after \d+\.\d s; killed\]$", out), out
    assert call(client, "run", command="echo alive") == "alive\n[exit code 0]"
    _other_session_works(server_url)


def test_a_gigabyte_of_output_is_cut(client: GenericEnvClient) -> None:
    started = time.monotonic()
    out = call(client, "run", command="head -c 1000000000 /dev/zero | tr '\\0' x")
    assert time.monotonic() - started < 20 and len(out) < 64 * 1024
    assert "bytes truncated ...]" in out and "[killed: output exceeded" in out
    assert call(client, "run", command="echo alive") == "alive\n[exit code 0]"


def test_deleting_the_working_directory(client: GenericEnvClient, server_url: str) -> None:
    call(client, "run", command="rm -rf ./* ./.git; cd .. && rm -rf repo; true")
    if IS_ROOT:  # the repository's directory itself is not the agent's to remove
        assert call(client, "list_files") == ". is empty."
        assert call(client, "run", command="ls -A | wc -l") == "0\n[exit code 0]"
    else:
        message = call_error(client, "run", command="ls")
        assert "The repository directory was deleted, so this episode cannot go on" in message
    call(client, "submit")
    score = grade(load_grader_module().MiniSweGrader(), client)
    assert score.value == 0.0
    assert set(score.evidence["resolved"]["PASS_TO_PASS"].values()) != {"passed"}
    _other_session_works(server_url)


def test_a_hanging_fix_scores_zero(server_url: str) -> None:
    with open_client(server_url) as c:
        c.reset(task_id="intervals-1")
        call(c, "write_file", path="intervals/__init__.py", content="while True:\n    pass\n")
        call(c, "submit")
        started = time.monotonic()
        score = grade(load_grader_module().MiniSweGrader(timeout_s=2), c)
    assert score.value == 0.0 and score.evidence["resolved"]["timed_out"] is True
    assert time.monotonic() - started < 20


@needs_root
def test_nothing_outlives_its_command(client: GenericEnvClient, server_url: str) -> None:
    marker = "while :; do sleep 1; done"
    out = call(client, "run", command=f"setsid nohup bash -c '{marker}' </dev/null >/dev/null 2>&1 & sleep 0.3; id -u")
    uid = int(out.splitlines()[0])
    assert marker not in call(client, "run", command="ps -u $(id -u) -o args")  # killed with its command
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _uid_of(p) == uid and _is(p, marker)]


def _uid_of(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def _is(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_killing_the_server() -> None:
    from openenv_sdk.providers.local import LocalProcessProvider

    with (
        LocalProcessProvider(ENV_DIR, startup_timeout_s=120) as provider,
        GenericEnvClient(
            provider.start(), timeout_s=60, auto_reconnect=False, orchestrator_token=provider.orchestrator_token
        ) as c,
    ):
        c.reset(task_id="intervals-1")
        out = call(c, "run", command=f"kill -9 {provider.pid}; kill -KILL -{provider.pid}; echo done")
        if IS_ROOT:  # the server is not in the command's pid namespace
            assert out.count("No such process") == 2, out
            assert call(c, "run", command="echo alive") == "alive\n[exit code 0]"
            assert provider.is_alive()
        else:  # no privilege boundary: the server dies, and the client says so
            with pytest.raises(OpenEnvError) as info:
                c.state()
            assert "not running" in str(info.value) or "closed" in str(info.value)
