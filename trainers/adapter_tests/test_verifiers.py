"""The verifiers adapter, played through verifiers' own entry points: the `vf-eval` command (a real
subprocess) and its runner `run_eval`, with the scripted model answering over HTTP and the
harness's chat program (verifiers' own, run by `uv`) calling the environment's MCP tools."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf

# At collection, in the main thread: resolving a taskset id imports verifiers' tasksets (and
# with them mcp's server modules), and a first import racing a server thread's deadlocks.
import verifiers.v1.tasksets  # noqa: F401
from openenv_trainers.adapters.verifiers import (
    REWARD_NAME,
    OpenEnvEnv,
    OpenEnvTaskset,
    OpenEnvTasksetConfig,
)
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

from .conftest import ECHO_DIR, ECHO_GRADER, WORDLE_DIR, echo_grade, health
from .scripted_chat import echo_prompt, said_for

PLUGIN = "openenv-trainers-verifiers"
TEXTS = ["apple river", "typo stone"]


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def eval_toml(path: Path, *, base_url: str, out: Path, taskset: dict[str, Any], tasks: list[dict[str, Any]]) -> Path:
    lines = ['model = "scripted"', "push = false", f"output_dir = {_toml(str(out))}", "[client]", f"base_url = {_toml(base_url)}"]
    lines += ["[env.taskset]", f'id = "{PLUGIN}"', *(f"{k} = {_toml(v)}" for k, v in taskset.items())]
    for task in tasks:
        lines += ["[[env.taskset.tasks]]", *(f"{k} = {_toml(v)}" for k, v in task.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _env() -> dict[str, str]:
    # The harness's chat program is a `uv` script: uv comes with this venv.
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def episodes_of(out: Path) -> list[dict[str, Any]]:
    """The episodes `vf-eval` wrote (`traces.jsonl`: one episode a line, its traces inside)."""
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines() if line.strip()]


def test_vf_eval_plays_an_environment_folder_over_mcp_and_rewards_are_the_graders(
    scripted: Any, echo_url: str, tmp_path: Path
) -> None:
    chat, base_url = scripted
    tasks = [{"prompt": echo_prompt(t), "reset": {"text": t}} for t in TEXTS]
    config = eval_toml(
        tmp_path / "eval.toml",
        base_url=base_url,
        out=tmp_path / "out",
        taskset={"env_dir": str(ECHO_DIR), "grader": ECHO_GRADER},
        tasks=tasks,
    )
    vf_eval = Path(sys.executable).parent / "vf-eval"
    done = subprocess.run(
        [str(vf_eval), "@", str(config), "--no-rich"], capture_output=True, text=True, env=_env(), timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]

    episodes = sorted(episodes_of(tmp_path / "out"), key=lambda e: e["task"]["data"]["idx"])
    assert [e["task"]["data"]["reset"] for e in episodes] == [{"text": t} for t in TEXTS]
    assert all(e["ok"] and not e["errors"] for e in episodes)
    traces = [e["traces"][0] for e in episodes]
    for trace, text in zip(traces, TEXTS, strict=True):
        assert set(trace["rewards"]) == {REWARD_NAME}
        # The same episode graded on a session of its own, without the adapter.
        assert trace["rewards"][REWARD_NAME]["score"] == pytest.approx(echo_grade(echo_url, text, said_for(text)))
        assert trace["metrics"]["openenv/called"] == 1.0
    assert traces[0]["rewards"][REWARD_NAME]["score"] == 1.0
    assert 0.2 < traces[1]["rewards"][REWARD_NAME]["score"] < 1.0

    # The model was shown the server's tools and only them, and the tool ran in the environment.
    first = [r for r in chat.requests if r["messages"][-1]["role"] == "user"]
    assert len(first) == 2
    for request in first:
        names = [t["function"]["name"] for t in request["tools"]]
        assert names == ["echo"]
        params = request["tools"][0]["function"]["parameters"]
        assert params["required"] == ["message"] and params["properties"]["message"]["type"] == "string"
    results = [r["messages"][-1] for r in chat.requests if r["messages"][-1]["role"] == "tool"]
    assert sorted(str(m["content"]) for m in results) == sorted(said_for(t) for t in TEXTS)


def _run(config: EvalConfig) -> list[vf.Episode]:
    return asyncio.run(run_eval(config))


def _config(model_url: str, tmp_path: Path, **taskset: Any) -> EvalConfig:
    return EvalConfig.model_validate(
        {
            "model": "scripted",
            "push": False,
            "rich": None,
            "output_dir": str(tmp_path / "out"),
            "client": {"base_url": model_url},
            "env": {"taskset": {"id": PLUGIN, **taskset}},
        }
    )


def test_run_eval_on_a_running_server_closes_every_session(
    scripted: Any, echo_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _env()["PATH"])
    _, base_url = scripted
    tasks = [{"prompt": echo_prompt(t), "reset": {"text": t}} for t in TEXTS]
    episodes = _run(_config(base_url, tmp_path, base_url=echo_url, grader=ECHO_GRADER, tasks=tasks))
    assert len(episodes) == 2 and all(e.ok for e in episodes)
    rewards = sorted(e.traces[0].reward for e in episodes)
    assert rewards == pytest.approx(sorted(echo_grade(echo_url, t, said_for(t)) for t in TEXTS))
    assert health(echo_url)["active_sessions"] == 0


def test_a_reset_that_fails_is_the_episodes_typed_error_and_its_session_is_closed(
    scripted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    from .conftest import serve

    monkeypatch.setenv("PATH", _env()["PATH"])
    _, base_url = scripted
    app = create_app(load_environment(WORDLE_DIR).env_cls, config=ServerConfig())
    with serve(app) as wordle_url:
        tasks = [{"prompt": "Guess the word.", "reset": {"task_id": 99999}}]
        (episode,) = _run(_config(base_url, tmp_path, base_url=wordle_url, grader=ECHO_GRADER, tasks=tasks))
        assert not episode.ok
        (error,) = episode.errors
        assert error.type == "EnvError"
        assert "task_id must be in [0, 1200)" in error.message
        assert health(wordle_url)["active_sessions"] == 0


def test_the_grader_is_the_folders_or_a_reference_and_a_bad_one_is_refused(echo_url: str, tmp_path: Path) -> None:
    env = OpenEnvEnv(_config("http://127.0.0.1:9/v1", tmp_path, env_dir=str(WORDLE_DIR)).env)
    assert type(env.grader).__name__ == "WordleGrader"
    with pytest.raises(ValueError, match="is not an environment folder"):
        OpenEnvEnv(_config("http://127.0.0.1:9/v1", tmp_path, base_url=echo_url).env)
    with pytest.raises(ValueError, match="cannot be imported"):
        OpenEnvEnv(_config("http://127.0.0.1:9/v1", tmp_path, base_url=echo_url, grader="no_such_module:Grader").env)
    with pytest.raises(ValueError, match="an environment folder or `package.module:Name`"):
        OpenEnvEnv(_config("http://127.0.0.1:9/v1", tmp_path, base_url=echo_url, grader="nocolon").env)


def test_the_taskset_reads_tasks_from_the_task_api_and_refuses_bad_configs(echo_url: str) -> None:
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    from .conftest import serve

    with serve(create_app(load_environment(WORDLE_DIR).env_cls, config=ServerConfig())) as url:
        taskset = OpenEnvTaskset(OpenEnvTasksetConfig(id=PLUGIN, base_url=url, split="test"))
        tasks = list(taskset.take(3))
    assert [t.data.reset for t in tasks] == [{"task_id": 1000}, {"task_id": 1001}, {"task_id": 1002}]
    assert [t.data.name for t in tasks] == ["test/1000", "test/1001", "test/1002"]
    assert all(t.data.prompt is None for t in tasks)  # the reset observation becomes the prompt

    with pytest.raises(ValueError, match="exactly one of base_url, env_dir=, image="):
        OpenEnvTaskset(OpenEnvTasksetConfig(id=PLUGIN))
    with pytest.raises(ValueError, match="exactly one of base_url, env_dir=, image="):
        OpenEnvTaskset(OpenEnvTasksetConfig(id=PLUGIN, base_url=echo_url, env_dir=str(ECHO_DIR)))
    with pytest.raises(ValueError, match="tasks or --env.taskset.split, not both"):
        OpenEnvTaskset(OpenEnvTasksetConfig(id=PLUGIN, base_url=echo_url, split="train", tasks=[{"reset": {}}]))


def test_prime_rls_env_server_path_carries_the_graders_reward(
    scripted: Any, echo_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prime-rl runs episodes through verifiers' env server (`EnvServer`, ZMQ): the client sends
    the task's wire data, the server plays it and streams the traces back."""
    import socket

    from verifiers.v1.configs.client import EvalClientConfig
    from verifiers.v1.serve.client import EnvClient
    from verifiers.v1.serve.server import EnvServer

    monkeypatch.setenv("PATH", _env()["PATH"])
    _, model_url = scripted
    config = _config(model_url, tmp_path, base_url=echo_url, grader=ECHO_GRADER, tasks=[{"prompt": echo_prompt("typo stone"), "reset": {"text": "typo stone"}}])
    (task,) = list(OpenEnvEnv(config.env).taskset)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"

    async def play() -> Any:
        server = EnvServer(config.env, address=address)
        serving = asyncio.create_task(server.run())
        client = EnvClient(address)
        try:
            await client.wait_for_server_startup(timeout=30)
            return await client.run(EvalClientConfig(base_url=model_url), "scripted", vf.SamplingConfig(), task.data.model_dump(mode="json"))
        finally:
            await client.close()
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    episode = asyncio.run(play())
    (trace,) = episode.traces
    assert trace.rewards[REWARD_NAME].score == pytest.approx(echo_grade(echo_url, "typo stone", said_for("typo stone")))
    assert trace.metrics["openenv/exact"] == 0.0
    assert health(echo_url)["active_sessions"] == 0


def test_the_tiny_model_plays_through_run_eval_and_its_rewards_are_the_graders(
    tiny_chat: Any, echo_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same path with our tiny tool-calling model answering (sampled, so its calls are
    whatever it makes of the prompt): each reward is the grader's for the call it made."""
    monkeypatch.setenv("PATH", _env()["PATH"])
    chat, model_url = tiny_chat
    text = "apple river"
    tasks = [{"prompt": echo_prompt(text), "reset": {"text": text}, "system_prompt": "You are a helpful assistant."}]
    config = _config(model_url, tmp_path, base_url=echo_url, grader=ECHO_GRADER, tasks=tasks)
    config.model = "tiny"
    config.num_rollouts = 2
    config.env.agent.max_turns = 2
    episodes = _run(config)
    assert len(episodes) == 2 and all(e.ok for e in episodes)
    # What the model sent to `echo`, from the answers the server gave (one episode's first turn
    # each: the requests whose last message is the user's).
    firsts = [reply for request, reply in zip(chat.requests, chat.replies, strict=True) if request["messages"][-1]["role"] == "user"]
    assert len(firsts) == 2
    expected = []
    for reply in firsts:
        calls = [c for c in reply.get("tool_calls") or [] if c["function"]["name"] == "echo"]
        said = json.loads(calls[0]["function"]["arguments"]).get("message") if calls else None
        expected.append(echo_grade(echo_url, text, said if isinstance(said, str) else None))
    assert sorted(e.traces[0].reward for e in episodes) == pytest.approx(sorted(expected))
    assert any(r.get("tool_calls") for r in firsts)  # the tiny model does call the tool
    assert health(echo_url)["active_sessions"] == 0
