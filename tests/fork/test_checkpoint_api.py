"""Checkpoint, restore and fork: orchestrator-only, bounded, typed errors, and what the agent wrote
kept as it is (never followed), over real servers on real ports."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from websockets.sync.client import connect

from openenv_sdk import Action, Environment, Observation, State, create_app, tool
from openenv_sdk.checks import check_env
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import (
    EnvironmentDefinitionError,
    InvalidActionError,
    SessionError,
    ToolCallError,
    TransportError,
)
from openenv_sdk.loader import load_environment
from openenv_sdk.server import ServerConfig
from openenv_sdk.snapshots import CheckpointError
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]


def _env_cls(name: str) -> type[Environment[Any, Any, Any]]:
    env_cls = load_environment(ROOT / "environments" / name).env_cls
    assert env_cls is not None
    return env_cls


WORDLE = _env_cls("wordle")
TERMINAL = _env_cls("terminal")
VERBS = {"checkpoint", "restore", "drop_checkpoint", "fork", "snapshot"}


def _bash(env: GenericEnvClient, command: str) -> str:
    result = env.step({"tool": "bash", "arguments": {"command": command}})
    return str(result.observation["result"]["content"][0]["text"])


# --- never over MCP -------------------------------------------------------------------------------


def test_the_agent_cannot_list_or_call_the_checkpoint_verbs_over_mcp(tmp_path: Path) -> None:
    config = ServerConfig(checkpoint_dir=str(tmp_path))
    with serve_app(create_app(WORDLE, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(task_id=3)
        env.step({"guess": "crane"})
        names = {t.name for t in env.list_tools()}
        assert names == {"guess"} and not names & VERBS
        for verb in sorted(VERBS):
            with pytest.raises(ToolCallError, match=f"Unknown tool '{verb}'"):
                env.call_tool(verb, handle="ckpt_" + "a" * 32)
        # nor over the JSON-RPC compatibility route of /ws's `mcp` message
        with connect(url.replace("http", "ws") + "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"task_id": 3}}))
            ws.recv(timeout=10)
            ws.send(json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                         "params": {"name": "checkpoint", "arguments": {}}}}))
            reply = json.loads(ws.recv(timeout=10))
            assert "error" in reply["data"] or reply["data"].get("result", {}).get("isError")
        assert list(tmp_path.iterdir()) == [] or all(p.name.startswith(".") for p in tmp_path.iterdir())
        # the episode is as the agent left it: the refused calls did nothing
        assert env.state()["guesses"] == ["crane"]


def test_a_tool_cannot_take_a_hook_name() -> None:
    with pytest.raises(EnvironmentDefinitionError, match="checkpoint hook"):

        class Bad(Environment[Action, Observation, State]):
            @tool
            def snapshot(self) -> str:
                """Leak the episode."""
                return ""


def test_the_orchestrator_token_guards_the_http_routes(tmp_path: Path) -> None:
    config = ServerConfig(checkpoint_dir=str(tmp_path), orchestrator_token=SecretStr("s3cret"))
    with serve_app(create_app(WORDLE, config=config)) as url:
        assert httpx.post(url + "/checkpoint", timeout=10).status_code == 401
        assert httpx.post(url + "/restore", json={"handle": "ckpt_" + "a" * 32}, timeout=10).status_code == 401
        with pytest.raises(TransportError, match="HTTP 401"), GenericEnvClient(url) as env:
            env.checkpoint()


# --- the verbs over HTTP and WebSocket, and their errors -------------------------------------------


def test_http_routes_checkpoint_restore_into_a_new_session_and_drop(tmp_path: Path) -> None:
    with serve_app(create_app(WORDLE, config=ServerConfig(checkpoint_dir=str(tmp_path)))) as url:
        with httpx.Client(base_url=url, timeout=10) as http:
            http.post("/reset", json={"task_id": 5}).raise_for_status()
            http.post("/step", json={"action": {"guess": "crane"}}).raise_for_status()
            info = http.post("/checkpoint").json()
            assert info["handle"].startswith("ckpt_") and info["env"] == "wordle" and info["step_count"] == 1
            after = http.post("/step", json={"action": {"guess": "slate"}}).json()
        with httpx.Client(base_url=url, timeout=10) as other:  # no session: the restore makes one
            restored = other.post("/restore", json={"handle": info["handle"]})
            assert restored.status_code == 200 and restored.headers["X-OpenEnv-Session"] == restored.json()["session_id"]
            assert restored.json()["state"]["guesses"] == ["crane"]
            assert other.post("/step", json={"action": {"guess": "slate"}}).json() == after
            assert other.delete(f"/checkpoints/{info['handle']}").status_code == 204
            gone = other.post("/restore", json={"handle": info["handle"]})
            assert gone.status_code == 404 and gone.json()["detail"]["code"] == "CHECKPOINT_NOT_FOUND"
            bad = other.post("/restore", json={"handle": "../../etc/passwd"})
            assert bad.status_code == 404 and "not a checkpoint handle" in bad.json()["detail"]["message"]


def test_typed_errors_and_the_session_goes_on(tmp_path: Path) -> None:
    config = ServerConfig(checkpoint_dir=str(tmp_path), max_checkpoints=2)
    with serve_app(create_app(WORDLE, config=config)) as url, GenericEnvClient(url) as env:
        with pytest.raises(SessionError, match="checkpoint before reset"):
            env.checkpoint()
        env.reset(task_id=1)
        for handle in ("ckpt_" + "x" * 32, "/etc/passwd", "ckpt_short", "ckpt_" + "../" * 11):
            with pytest.raises(CheckpointError) as refused:
                env.restore(handle)
            assert refused.value.code == "CHECKPOINT_NOT_FOUND"
        with pytest.raises(InvalidActionError, match="handle"):
            env.restore("")
        first, second = env.checkpoint(), env.checkpoint()
        with pytest.raises(CheckpointError) as full:
            env.checkpoint()
        assert full.value.code == "CHECKPOINT_LIMIT" and "max_checkpoints is 2" in str(full.value)
        env.drop_checkpoint(first)
        third = env.checkpoint()  # room again
        with pytest.raises(CheckpointError) as dropped:
            env.drop_checkpoint(first)
        assert dropped.value.code == "CHECKPOINT_NOT_FOUND"
        assert env.step({"guess": "crane"}).observation["guesses_left"] == 5  # the session went on
        assert {second.handle, third.handle} == {p.name for p in tmp_path.iterdir()}
    # a handle restores only into the environment that made it
    with serve_app(create_app(TERMINAL, config=config)) as url, GenericEnvClient(url) as env:
        with pytest.raises(CheckpointError) as other_env:
            env.restore(second)
        assert other_env.value.code == "SNAPSHOT_UNSUPPORTED" and "WordleEnvironment" in str(other_env.value)


def test_a_checkpoint_over_the_size_bound_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    config = ServerConfig(checkpoint_dir=str(tmp_path), max_checkpoint_bytes=64 * 1024)
    with serve_app(create_app(TERMINAL, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(task_id="env_merge")
        _bash(env, "head -c 200000 /dev/zero > big")
        with pytest.raises(CheckpointError) as big:
            env.checkpoint()
        assert big.value.code == "CHECKPOINT_LIMIT" and "max_checkpoint_bytes" in str(big.value)
        assert list(tmp_path.iterdir()) == []
        _bash(env, "rm big")
        env.checkpoint()


# --- what the agent wrote, kept as it is --------------------------------------------------------


def test_links_fifos_modes_and_the_shell_survive_and_nothing_is_followed(tmp_path: Path) -> None:
    config = ServerConfig(checkpoint_dir=str(tmp_path))
    script = (
        "ln -s /etc/shadow shadow; ln -s / rootlink; mkfifo pipe; echo secret > locked; chmod 000 locked; "
        "mkdir -p d/e && echo deep > d/e/f && ln d/e/f hard && chmod 750 d; cd d/e; export V=1; alias ll='echo ll'"
    )
    probe = "cd ../..; stat -c '%n %F %a %h %s %Y' shadow rootlink pipe locked hard d d/e d/e/f | sort; echo $V; readlink shadow rootlink"
    with serve_app(create_app(TERMINAL, config=config)) as url, GenericEnvClient(url) as env:
        env.reset(task_id="env_merge")
        assert _bash(env, script).endswith("[exit code 0]")
        info = env.checkpoint()
        kept = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        assert b"root:" not in kept  # /etc/shadow was not followed
        assert info.bytes < 64 * 1024  # nor was / through rootlink
        (copy,) = env.fork(1)
        with copy:
            assert _bash(copy, probe) == _bash(env, probe)
            assert "f 2" in _bash(copy, "stat -c '%n %h' d/e/f hard")  # still one file, two names
            assert _bash(copy, "cat hard") == "deep\n[exit code 0]"


def test_fork_gives_independent_copies_and_the_original_goes_on(tmp_path: Path) -> None:
    with serve_app(create_app(TERMINAL, config=ServerConfig(checkpoint_dir=str(tmp_path)))) as url:
        with GenericEnvClient(url) as env:
            env.reset(task_id="env_merge")
            _bash(env, "echo base > f")
            copies = env.fork(3)
            try:
                for i, copy in enumerate(copies):
                    _bash(copy, f"echo {i} >> f")
                assert [_bash(c, "cat f") for c in copies] == [f"base\n{i}\n[exit code 0]" for i in range(3)]
                assert _bash(env, "cat f") == "base\n[exit code 0]"
                assert len({c.session().session_id for c in copies} | {env.session().session_id}) == 4
                assert copies[0].trajectory.steps[:1] == env.trajectory.steps[:1]  # the prefix, for a tree search
            finally:
                for copy in copies:
                    copy.close()
        assert list(tmp_path.iterdir()) == []  # the fork's checkpoint was dropped


# --- the authoring contract and its check ------------------------------------------------------


class CounterState(State):
    total: int = 0


class Counter(Environment[Action, Observation, CounterState]):
    """Adds numbers; its episode is its state and a plain list."""

    def __init__(self) -> None:
        self.history: list[int] = []

    @tool
    def add(self, n: int) -> str:
        """Add n.

        Args:
            n: the number.
        """
        self.history.append(n)
        self.state.total += n
        return f"{self.state.total} after {self.history}"


class Locked(Counter):
    """Holds a lock: the default snapshot cannot keep it."""

    def __init__(self) -> None:
        super().__init__()
        self.guard: Any = threading.Lock()


class Forgetful(Counter):
    """Its restore loses the history: the check must catch it."""

    def restore(self, data: dict[str, Any], folder: Path) -> None:
        super().restore(data, folder)
        self.history = []


def test_the_default_hook_keeps_plain_attributes() -> None:
    env = Counter()
    env.reset()
    env.add(2)
    data = env.snapshot(Path("/nonexistent"))  # the default writes no files
    copy = Counter()
    copy.restore(data, Path("/nonexistent"))
    env.history.append(99)  # the snapshot is a copy: the live episode's later changes stay its own
    assert copy.add(3) == "5 after [2, 3]"
    assert check_env(Counter).passed


def test_check_env_reports_an_episode_it_cannot_keep_and_warns_about_one_restored_wrong() -> None:
    report = check_env(Locked)  # optional: an unsupported extension, no warning
    [result] = [c for c in report.checks if c.name == "ext.checkpoint"]
    assert result.status == "unsupported" and "Locked.guard is a lock" in result.message
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(Forgetful)
    assert any("ext.checkpoint" in str(w.message) and "another observation" in str(w.message) for w in caught)


def test_the_ws_schema_describes_the_checkpoint_traffic(tmp_path: Path) -> None:
    import jsonschema

    defs = json.loads((ROOT / "docs" / "protocol" / "ws-messages.json").read_text())["$defs"]
    client_schema = jsonschema.Draft202012Validator({"$ref": "#/$defs/ClientMessage", "$defs": defs})
    server_schema = jsonschema.Draft202012Validator({"$ref": "#/$defs/ServerMessage", "$defs": defs})
    config = ServerConfig(checkpoint_dir=str(tmp_path))
    with serve_app(create_app(WORDLE, config=config)) as url, connect(url.replace("http", "ws") + "/ws") as ws:

        def send(message: dict[str, Any]) -> dict[str, Any]:
            client_schema.validate(message)
            ws.send(json.dumps(message))
            reply: dict[str, Any] = json.loads(ws.recv(timeout=10))
            server_schema.validate(reply)
            return reply

        send({"type": "reset", "data": {"task_id": 2}})
        kept = send({"type": "checkpoint", "data": {}, "id": 1})
        assert kept["type"] == "checkpoint" and kept["id"] == 1
        handle = kept["data"]["handle"]
        assert send({"type": "restore", "data": {"handle": handle}})["type"] == "restored"
        assert send({"type": "drop_checkpoint", "data": {"handle": handle}})["type"] == "dropped"
        assert send({"type": "restore", "data": {"handle": handle, "drop": True}})["data"]["code"] == "CHECKPOINT_NOT_FOUND"


def test_restore_rewinds_the_session_that_checkpointed(tmp_path: Path) -> None:
    with serve_app(create_app(TERMINAL, config=ServerConfig(checkpoint_dir=str(tmp_path)))) as url:
        with GenericEnvClient(url) as env:
            env.reset(task_id="env_merge")
            _bash(env, "mkdir keep && cd keep && echo 1 > a")
            info = env.checkpoint()
            _bash(env, "rm -rf ../keep/a; cd /; echo 2 > ~/b")
            env.step({"tool": "submit", "arguments": {}})
            restored = env.restore(info)  # the same session: its episode is replaced, the sandbox renewed
            assert restored.state["submitted"] is False and restored.state["commands"] == 1
            assert _bash(env, "cat a; ls ~") == "1\n[exit code 0]"  # back in keep/, HOME as it was
            assert env.state()["commands"] == 2
