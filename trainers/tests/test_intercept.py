"""Black-box agents with intercepted model calls: the server, the accounting, the episode, the worker.

Agents run for real in the terminal environment's sandbox (a local server, and its container
when a container engine is available), and call the interception server over HTTP; the tiny
model answers. Rows are checked against a forward pass of the same model.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from openenv_trainers.generation import TransformersBackend
from openenv_trainers.generation.base import SamplingParams
from openenv_trainers.intercept import InterceptionServer
from openenv_trainers.intercept.episode import (
    AgentEpisodeConfig,
    AgentEpisodeResult,
    AgentEpisodeRunner,
    run_agent_episode,
)
from openenv_trainers.intercept.messages import normalize_messages
from openenv_trainers.sources import EnvSource, load_grader
from openenv_trainers.tiny_model import ECHO_TOOL

from openenv_sdk.agents import BUILTIN_AGENT, AgentLaunch, AgentSpec
from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient

from .conftest import REPO
from .tokens import forward_logprobs, mask_runs

TERMINAL_DIR = REPO / "environments" / "terminal"
ECHO_AGENT_SOURCE = (Path(__file__).parent / "agents" / "echo_agent.py").read_text()
TEMPERATURE = 0.8
TASK = {"task_id": "clean_tmp_files"}


def echo_agent(*args: str, timeout_s: float = 120.0) -> AgentSpec:
    return AgentSpec(
        name="echo-test-agent",
        files={".openenv/echo_agent.py": ECHO_AGENT_SOURCE},
        run='python3 "$HOME/.openenv/echo_agent.py" ' + " ".join(args),
        env={"ECHO_TOOL_JSON": json.dumps(ECHO_TOOL)},
        timeout_s=timeout_s,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[InterceptionServer]:
    with InterceptionServer(request_timeout_s=60.0) as srv:
        yield srv


@pytest.fixture
def backend(model: Any, tokenizer: Any) -> TransformersBackend:
    return TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)


@pytest.fixture(scope="module")
def grader() -> Any:
    return load_grader(TERMINAL_DIR)


def _config(agent: AgentSpec, **overrides: Any) -> AgentEpisodeConfig:
    # A seeded sampler: whether the tiny model calls echo must not depend on what ran before.
    sampling = SamplingParams(max_tokens=48, temperature=TEMPERATURE, seed=11)
    return AgentEpisodeConfig(agent=agent, sampling=sampling, **overrides)


def _episode(server: InterceptionServer, backend: Any, tokenizer: Any, grader: Any, config: AgentEpisodeConfig, **kw: Any) -> AgentEpisodeResult:
    async def go() -> AgentEpisodeResult:
        async with AsyncGenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=60) as env:
            return await run_agent_episode(env, backend, tokenizer, server=server, task=TASK, rubric=grader, config=config, seed=3, **kw)

    return asyncio.run(go())


def _check_rows_match_forward_pass(model: Any, tokenizer: Any, result: AgentEpisodeResult) -> int:
    """Every segment's logprobs at mask-1 positions are the model's (at the sampling temperature);
    returns how many sampled tokens were checked."""
    checked = 0
    for segment in result.segments:
        recomputed = forward_logprobs(model, segment.prompt_ids, segment.completion_ids, TEMPERATURE)
        positions = [p for p, m in enumerate(segment.completion_mask) if m]
        assert positions
        torch.testing.assert_close(
            torch.tensor([segment.completion_logprobs[p] for p in positions]), recomputed[positions], atol=1e-4, rtol=0
        )
        assert all(math.isnan(x) for x, m in zip(segment.completion_logprobs, segment.completion_mask, strict=True) if not m)
        checked += len(positions)
    return checked


# --- the server -----------------------------------------------------------------------------


def _post(url: str, body: Any, key: str | None, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(url, json=body, headers=headers, timeout=30, **kw)


def test_requests_without_the_rollouts_secret_are_refused(server: InterceptionServer) -> None:
    mine, other = server.open_rollout(), server.open_rollout()
    try:
        url = mine.base_url() + "/chat/completions"
        body = {"messages": [{"role": "user", "content": "hi"}]}
        for key, status in ((None, 401), ("wrong", 401), (other.secret, 401), (mine.secret[:-1], 401)):
            response = _post(url, body, key)
            assert response.status_code == status, (key, response.text)
            assert response.json()["error"]["type"] == "authentication_error"
        assert mine.requests == []  # nothing reached the trainer
        assert _post(server.url + "/rollout/nope/v1/chat/completions", body, mine.secret).status_code == 404
    finally:
        mine.close()
        other.close()
    assert _post(url, body, mine.secret).status_code == 410  # an ended rollout


def test_bad_requests_get_openai_shaped_errors_and_the_rollout_goes_on(server: InterceptionServer) -> None:
    rollout = server.open_rollout()
    url = rollout.base_url() + "/chat/completions"
    try:
        assert "messages" in _post(url, {"messages": []}, rollout.secret).json()["error"]["message"]
        assert "not JSON" in httpx.post(url, content=b"{", headers={"Authorization": f"Bearer {rollout.secret}"}).json()["error"]["message"]
        assert "n > 1" in _post(url, {"messages": [{"role": "user", "content": "x"}], "n": 2}, rollout.secret).json()["error"]["message"]

        def answer() -> None:
            request = rollout.next_request_blocking(10)
            assert request is not None and request.index == 0
            request.respond({"content": "fine"})

        threading.Thread(target=answer).start()
        reply = _post(url, {"messages": [{"role": "user", "content": "x"}]}, rollout.secret).json()
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "fine"}
        assert reply["choices"][0]["finish_reason"] == "stop"
    finally:
        rollout.close()


def test_streamed_answers_and_host_tools() -> None:
    with InterceptionServer() as srv:
        with pytest.raises(ValueError, match="orchestrator's verbs"):
            srv.open_rollout(tools={"reset": lambda: None})
        rollout = srv.open_rollout(tools={"lookup": lambda key: {"key": key, "value": key.upper()}})

        def answer() -> None:
            request = rollout.next_request_blocking(10)
            assert request is not None and request.body.stream
            request.respond({"content": None, "tool_calls": [{"function": {"name": "lookup", "arguments": {"key": "a"}}}]})

        threading.Thread(target=answer).start()
        with httpx.stream(
            "POST",
            rollout.base_url() + "/chat/completions",
            json={"messages": [{"role": "user", "content": "x"}], "stream": True},
            headers={"Authorization": f"Bearer {rollout.secret}"},
            timeout=30,
        ) as response:
            events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        call = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
        assert call["function"] == {"name": "lookup", "arguments": '{"key": "a"}'} and call["index"] == 0
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        tools_url = rollout.base_url() + "/tools/"
        assert _post(tools_url + "lookup", {"key": "b"}, rollout.secret).json() == {"result": {"key": "b", "value": "B"}}
        assert _post(tools_url + "step", {}, rollout.secret).status_code == 403
        assert _post(tools_url + "state", {}, rollout.secret).status_code == 403
        assert _post(tools_url + "shell", {}, rollout.secret).status_code == 404
        assert _post(tools_url + "lookup", {"nope": 1}, rollout.secret).status_code == 400
        assert _post(tools_url + "lookup", {"key": "b"}, "wrong").status_code == 401


def test_a_request_nobody_answers_times_out() -> None:
    with InterceptionServer(request_timeout_s=0.5) as srv:
        rollout = srv.open_rollout()
        started = time.monotonic()
        response = _post(rollout.base_url() + "/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, rollout.secret)
        assert response.status_code == 504 and "did not answer" in response.json()["error"]["message"]
        assert time.monotonic() - started < 10


def test_message_shapes_are_normalized() -> None:
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"message": "x"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "function": {"name": "echo", "arguments": {"message": "y"}}}]},
        {"role": "tool", "tool_call_id": "c2", "name": "echo", "content": [{"type": "text", "text": "y"}]},
    ]
    out = normalize_messages(messages)
    assert out[0] == {"role": "system", "content": "Be brief."}
    assert out[1] == {"role": "user", "content": "ab"}
    assert out[2]["tool_calls"] == [{"type": "function", "function": {"name": "echo", "arguments": {"message": "x"}}}]
    assert out[3] == {"role": "tool", "content": "x", "name": "echo"}
    assert out[4]["tool_calls"] == out[2]["tool_calls"][:0] + [{"type": "function", "function": {"name": "echo", "arguments": {"message": "y"}}}]
    assert out[5] == {"role": "tool", "content": "y", "name": "echo"}
    with pytest.raises(ValueError, match="image_url"):
        normalize_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


# --- episodes in the sandbox ----------------------------------------------------------------


def test_an_agents_calls_become_one_exact_row(server: InterceptionServer, backend: Any, model: Any, tokenizer: Any, grader: Any) -> None:
    result = _episode(server, backend, tokenizer, grader, _config(echo_agent("--max-calls", "3")))
    assert result.agent_run is not None and result.agent_run.ok, result.agent_run
    assert result.model_calls >= 2, result.agent_run.stdout_tail  # the tiny model calls echo, then answers
    # Each call re-sent the whole conversation (content parts, string arguments, call ids):
    # the calls extend one ledger, so the episode is one row holding every sampled turn.
    assert len(result.segments) == 1 and result.segments[0].model_calls == result.model_calls
    assert _check_rows_match_forward_pass(model, tokenizer, result) > 0
    row = result.segments[0]
    assert len(mask_runs(row.completion_mask)) == result.model_calls  # one run of mask-1 tokens per model call
    assert row.completion_ids[0:1] and tokenizer.decode(row.prompt_ids).count("hello sandbox") == 1
    # The tool results' bodies (what the agent's echo returned) are marked for SFT on tool outputs.
    bodies = [m["content"] for m in row.messages if m["role"] == "tool"]
    marked = [t for t, m in zip(row.completion_ids, row.completion_tool_output_mask, strict=True) if m]
    assert bodies and tokenizer.decode(marked) == "".join(bodies)
    assert {n for n, m in zip(row.completion_tool_names, row.completion_tool_output_mask, strict=True) if m} == {"echo"}
    assert result.reward == 0.0 and "rewards" not in json.dumps(result.agent_run.model_dump())


def test_the_builtin_agent_runs_an_episode_in_the_sandbox(
    server: InterceptionServer, backend: Any, model: Any, tokenizer: Any, grader: Any
) -> None:
    spec = BUILTIN_AGENT.model_copy(update={"env": {"OPENENV_AGENT_MAX_TURNS": "3"}})
    result = _episode(server, backend, tokenizer, grader, _config(spec))
    assert result.agent_run is not None and result.agent_run.exit_code == 0, result.agent_run
    assert "[turn 1]" in result.agent_run.stdout_tail
    assert 1 <= result.model_calls <= 3 and result.segments
    assert _check_rows_match_forward_pass(model, tokenizer, result) > 0
    prompt = tokenizer.decode(result.segments[0].prompt_ids)
    assert "Delete every file under project/" in prompt and '"name": "bash"' in prompt  # its task and its tools


def test_a_hung_agent_is_ended_by_its_timeout_and_the_episode_is_reported(
    server: InterceptionServer, backend: Any, model: Any, tokenizer: Any, grader: Any
) -> None:
    started = time.monotonic()
    result = _episode(server, backend, tokenizer, grader, _config(echo_agent("--hang-after", "1", timeout_s=4.0)))
    assert time.monotonic() - started < 60
    assert result.agent_run is not None and result.agent_run.timed_out and not result.agent_run.ok
    assert result.truncated and result.reward == 0.0  # graded all the same
    assert result.model_calls == 1 and len(result.segments) == 1  # the call it made is kept
    assert _check_rows_match_forward_pass(model, tokenizer, result) > 0


def test_calls_past_the_budget_are_refused_and_the_episode_is_truncated(
    server: InterceptionServer, backend: Any, tokenizer: Any, grader: Any
) -> None:
    result = _episode(server, backend, tokenizer, grader, _config(echo_agent("--max-calls", "3"), max_model_calls=1))
    # The tiny model calls echo on the first call (as in the test above), so the agent asks again.
    assert result.model_calls == 1 and result.refused_calls == 1 and len(result.segments) == 1
    assert result.truncated and result.agent_run is not None and result.agent_run.exit_code == 3
    assert "model calls are spent" in result.agent_run.stderr_tail


def test_an_agent_that_fails_before_its_first_call_is_an_episode_error_not_a_reward(
    server: InterceptionServer, backend: Any, tokenizer: Any, grader: Any
) -> None:
    # What a missing runtime looks like (Pi without node on the GPU host exited 127): no row to
    # train on, so no reward either; the worker counts it as a failed episode.
    from openenv_trainers.errors import AgentFailed

    broken = AgentSpec(name="broken-agent", run="echo 'node: not found' >&2; exit 127", timeout_s=60.0)
    with pytest.raises(AgentFailed, match="status 127 before its first model call: node: not found") as failed:
        _episode(server, backend, tokenizer, grader, _config(broken))
    assert failed.value.agent_run.exit_code == 127 and not failed.value.agent_run.timed_out


def test_an_agent_with_a_wrong_secret_is_refused(server: InterceptionServer) -> None:
    rollout = server.open_rollout()
    try:
        with GenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=60) as env:
            env.reset(**TASK)
            launch = AgentLaunch(spec=echo_agent(), base_url=rollout.base_url(), api_key="not-the-secret")
            run = env.call("run_agent", launch=launch.to_wire())
            assert run["exit_code"] == 3 and "401" in run["stderr_tail"], run
            assert env.call_tool("bash", command="echo alive").content[0].text.startswith("alive")  # the episode goes on
        assert rollout.requests == []
    finally:
        rollout.close()


def test_black_box_mode_reads_the_provider_key_on_the_host(
    server: InterceptionServer, grader: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The "provider": an OpenAI-compatible endpoint (a rollout of another server) answered by a script.
    provider = server.open_rollout()
    monkeypatch.setenv("OPENENV_TEST_PROVIDER_KEY", provider.secret)
    answered: list[int] = []

    def respond() -> None:
        while (request := provider.next_request_blocking(60)) is not None:
            answered.append(request.index)
            request.respond({"content": "done"})

    threading.Thread(target=respond, daemon=True).start()
    config = AgentEpisodeConfig(
        agent=echo_agent(), mode="black_box", provider_base_url=provider.base_url(), provider_key_env="OPENENV_TEST_PROVIDER_KEY"
    )
    try:
        result = _episode(server, None, None, grader, config)
    finally:
        provider.close()
    assert answered == [0] and result.agent_run is not None and result.agent_run.ok
    assert result.segments == [] and result.reward == 0.0
    assert provider.secret not in json.dumps(result.agent_run.model_dump()) + repr(config)
    monkeypatch.delenv("OPENENV_TEST_PROVIDER_KEY")
    with pytest.raises(Exception, match="OPENENV_TEST_PROVIDER_KEY"):
        _episode(server, None, None, grader, config)


def test_the_async_worker_trains_a_black_box_agent(backend: Any, tokenizer: Any, grader: Any) -> None:
    from openenv_trainers.advantages import GroupFilter
    from openenv_trainers.worker import EnvRolloutWorker, WorkerConfig

    with InterceptionServer() as srv, EnvSource(env_dir=TERMINAL_DIR) as source:
        worker = EnvRolloutWorker(
            sources=source,
            backend=backend,
            tokenizer=tokenizer,
            tasks=[{"prompt": [{"role": "user", "content": "clean up"}], **TASK}],
            rubric=grader,
            config=WorkerConfig(
                num_generations=2, max_inflight_episodes=2, buffer_size=8, episode_timeout_s=120,
                group_filter=GroupFilter(drop_zero_variance=False), check_server=False, poll_interval_s=0.01,
            ),
            episode_runner=AgentEpisodeRunner(srv, _config(echo_agent("--max-calls", "2"))),
        )
        worker.start()
        try:
            samples = [worker.rollout_buffer.get(timeout=120) for _ in range(2)]
        finally:
            worker.stop()
    for sample in samples:
        mask = sample.completion_mask.tolist()
        assert sum(mask) > 0 and len(mask) == len(sample.input_ids)
        assert all(math.isnan(x) for x, m in zip(sample.old_log_probs.tolist(), mask, strict=True) if not m)
        assert all(x <= 0 for x, m in zip(sample.old_log_probs.tolist(), mask, strict=True) if m)
        assert sample.advantage == 0.0  # every episode scores 0 on this task: zero variance
    assert worker.counters["episodes"] >= 2


@pytest.mark.skipif(os.environ.get("OPENENV_TEST_CONTAINERS") != "1", reason="needs a container engine (scripts/test.sh sets one up)")
@pytest.mark.timeout(600)
def test_the_builtin_agent_in_the_environments_container(backend: Any, model: Any, tokenizer: Any, grader: Any) -> None:
    from openenv_sdk.build import build_image

    tag = build_image(TERMINAL_DIR, tag="openenv-catalog-terminal:test", output="quiet")
    # The container sits on the SDK's internal network: no egress, but the host is reachable at
    # the network's gateway, where the interception server listens.
    with InterceptionServer(host="0.0.0.0") as srv:

        async def go() -> tuple[AgentEpisodeResult, dict[str, Any]]:
            async with AsyncGenericEnvClient(image=tag, timeout_s=60, startup_timeout_s=120) as env:
                spec = BUILTIN_AGENT.model_copy(update={"env": {"OPENENV_AGENT_MAX_TURNS": "3"}})
                result = await run_agent_episode(env, backend, tokenizer, server=srv, task=TASK, rubric=grader, config=_config(spec), seed=5)
                rollout = srv.open_rollout()
                await env.reset(**TASK)
                host = env.provider.host_address  # type: ignore[union-attr]
                wrong = AgentLaunch(spec=spec, base_url=rollout.base_url(host), api_key="wrong")
                refused = await env.call("run_agent", launch=wrong.to_wire())
                assert rollout.requests == []
                rollout.close()
                return result, refused

        result, refused = asyncio.run(go())
    assert result.agent_run is not None and result.agent_run.exit_code == 0, result.agent_run
    assert result.model_calls >= 1 and _check_rows_match_forward_pass(model, tokenizer, result) > 0
    assert refused["exit_code"] == 3 and "401" in refused["stderr_tail"], refused
