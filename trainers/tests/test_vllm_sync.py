"""VLLMReloadWeightTransfer's protocol with the vLLM server (its dev-mode endpoints mocked), and the guessing game."""

from __future__ import annotations

import json

import httpx
import pytest
import torch
from openenv_trainers.vllm_sync import VLLMReloadWeightTransfer


def test_sync_pauses_writes_reloads_and_resumes_in_order(tmp_path) -> None:
    calls: list[tuple[str, dict]] = []
    seen: dict[str, torch.Tensor] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        calls.append((path, {**dict(request.url.params), **body}))
        if path == "/collective_rpc":
            from safetensors.torch import load_file

            seen.update(load_file(f"{body['kwargs']['weights_path']}/model.safetensors"))
            return httpx.Response(200, json={"results": [None]})
        if path == "/is_paused":
            return httpx.Response(200, json={"is_paused": False})
        return httpx.Response(200, json={"status": "ok"})

    events: list[str] = []
    transfer = VLLMReloadWeightTransfer(
        "http://vllm:8000", folder=tmp_path / "policy", client=httpx.Client(transport=httpx.MockTransport(handler)),
        before_sync=lambda: events.append("before"), after_sync=lambda: events.append("after"),
    )
    weights = {"model.embed_tokens.weight": torch.randn(8, 4), "model.norm.weight": torch.ones(4)}
    transfer.init_weight_transfer()
    transfer.pause()
    transfer.send_weights(iter(weights.items()))
    transfer.resume()
    transfer.destroy()
    paths = [p for p, _ in calls]
    assert paths == ["/health", "/is_paused", "/pause", "/collective_rpc", "/resume"]
    assert calls[2][1]["mode"] == "keep"  # requests in flight are frozen, not aborted
    assert calls[3][1]["method"] == "reload_weights"
    assert events == ["before", "after"]
    assert set(seen) == set(weights)
    for name, tensor in weights.items():
        assert seen[name].dtype == torch.bfloat16
        torch.testing.assert_close(seen[name], tensor.to(torch.bfloat16))
    (record,) = transfer.timings
    assert set(record) == {"pause_s", "save_s", "bytes", "reload_s", "resume_s"}
    assert record["bytes"] == (8 * 4 + 4) * 2


def test_a_server_without_dev_mode_is_refused(tmp_path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.url.path == "/health" else 404, json={})

    transfer = VLLMReloadWeightTransfer("http://vllm:8000", folder=tmp_path, client=httpx.Client(transport=httpx.MockTransport(handler)))
    with pytest.raises(RuntimeError, match="VLLM_SERVER_DEV_MODE=1"):
        transfer.init_weight_transfer()


def test_guess_environment_and_grader() -> None:
    import sys

    from openenv_trainers.guess_task import ENV_DIR, guess_rows, warmup_conversations

    sys.path.insert(0, str(ENV_DIR))
    try:
        from grader import GuessGrader
        from guess_env import GuessEnvironment
    finally:
        sys.path.remove(str(ENV_DIR))
    env = GuessEnvironment()
    env.reset(target=7, high=10, max_guesses=5)
    assert "higher than 5" in env.guess(5)
    assert "lower than 9" in env.guess(9)
    assert "12 is not between" in env.guess(12)
    assert "correct" in env.guess(7)
    assert "over" in env.guess(7)
    state = env.state.model_dump()
    assert state["guesses"] == [5, 9, 7] and state["solved"] and state["invalid"] == 1
    from openenv_sdk.rubric import grade

    class Finished:  # what the grader reads: the final state
        trajectory = None

        def state(self) -> dict:
            return state

    score = grade(GuessGrader(), Finished())
    # solved in 3: 0.8 * (1 - 2 * 0.125); one invalid guess: 0.2 * 0.5
    assert score.value == pytest.approx(0.8 * 0.75 + 0.2 * 0.5)
    rows = guess_rows(3, seed=1)
    assert all(1 <= r["target"] <= 10 for r in rows)
    conv = warmup_conversations(4, seed=2)
    assert all(m["role"] == "assistant" for m in (c[-1] for c in conv))
