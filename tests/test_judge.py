"""`JudgeRubric` against a real OpenAI-compatible server on a real port: a scripted judge that
answers `/v1/chat/completions` as the OpenAI API does, chosen by the `model` it is asked for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from openenv_sdk import EnvClient, ManifestError, RequestTimeout, grade
from openenv_sdk.errors import EpisodeFailed
from openenv_sdk.failures import FailureCause
from openenv_sdk.judge import JudgeRubric
from openenv_sdk.loader import load_environment
from openenv_sdk.manifest import Manifest
from openenv_sdk.testing import serve_app
from tests.conftest import ECHO_DIR

ANSWERS = {
    "good": "The agent echoed the message as asked.\nSCORE: 0.75",
    "ten": "Mostly right. Score: 7 (out of 10)",
    "garbage": "I like turtles. 🐢",
    "out-of-range": "SCORE: 42",
}


def judge_app(seen: list[dict[str, Any]], flaky: dict[str, int]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        model = body["model"]
        if model == "slow":
            await asyncio.sleep(2)
        if model == "flaky" and flaky["left"] > 0:
            flaky["left"] -= 1
            return JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, status_code=503)
        if model == "broken":
            return JSONResponse({"error": {"message": "no such model", "type": "invalid_request_error"}}, 404)
        content = ANSWERS.get(model, "SCORE: 1")
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(seen)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    return app


@pytest.fixture
def judge() -> Iterator[tuple[str, list[dict[str, Any]], dict[str, int]]]:
    seen: list[dict[str, Any]] = []
    flaky = {"left": 2}
    with serve_app(judge_app(seen, flaky)) as url:
        yield f"{url}/v1", seen, flaky


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_score_is_read_and_the_request_is_a_chat_completion(judge: Any) -> None:
    url, seen, _ = judge
    rubric = JudgeRubric(base_url=url, model="good", prompt="Task: {task}\nRef: {reference}",
                         variables={"reference": "hi"}, api_key="k-123")  # fmt: skip
    score = run(rubric.ajudge(task={"message": "hi"}))
    assert score.value == 0.75
    assert score.evidence["raw_score"] == 0.75 and score.evidence["cached"] is False
    body = seen[0]["body"]
    assert body["model"] == "good" and body["temperature"] == 0.0 and body["max_tokens"] == 512
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == 'Task: {\n "message": "hi"\n}\nRef: hi'
    assert seen[0]["auth"] == "Bearer k-123"


def test_the_score_range_is_mapped_to_zero_one(judge: Any) -> None:
    url, _, _ = judge
    assert run(JudgeRubric(base_url=url, model="ten", prompt="{task}", score_range=(0, 10)).ajudge(task="t")).value == 0.7


@pytest.mark.parametrize(
    ("model", "reason"),
    [("garbage", "no score in the judge's answer"), ("out-of-range", "the judge's score 42 is outside 0..1")],
)
def test_an_unreadable_answer_gets_the_default_and_says_why(judge: Any, model: str, reason: str) -> None:
    url, _, _ = judge
    score = run(JudgeRubric(base_url=url, model=model, prompt="{task}", default_score=0.25).ajudge(task="t"))
    assert score.value == 0.25
    assert score.evidence["default"] is True and score.evidence["reason"].startswith(reason)
    assert score.evidence["answer"] == ANSWERS[model]


def test_answers_are_cached_by_input(judge: Any) -> None:
    url, seen, _ = judge
    rubric = JudgeRubric(base_url=url, model="good", prompt="{task}")
    first, again = run(rubric.ajudge(task="a")), run(rubric.ajudge(task="a"))
    other = run(rubric.ajudge(task="b"))
    assert (first.value, again.value, other.value) == (0.75, 0.75, 0.75)
    assert (again.evidence["cached"], other.evidence["cached"]) == (True, False)
    assert len(seen) == rubric.requests == 2
    uncached = JudgeRubric(base_url=url, model="good", prompt="{task}", cache=False)
    for _ in range(2):
        run(uncached.ajudge(task="a"))
    assert uncached.requests == 2


def test_a_judge_that_times_out_is_a_failure_after_retries(judge: Any) -> None:
    url, seen, _ = judge
    failing = JudgeRubric(base_url=url, model="slow", prompt="{task}", timeout_s=0.3, max_retries=1, backoff_s=0.01)
    with pytest.raises(EpisodeFailed) as caught:
        run(failing.ajudge(task="t"))
    assert caught.value.failure.cause == FailureCause.JUDGE and caught.value.failure.stage == "grading"
    assert caught.value.failure.message == f"the judge failed: POST {url}/chat/completions: no answer within 0.3 s"
    assert failing.requests == 2
    rubric = JudgeRubric(base_url=url, model="slow", prompt="{task}", timeout_s=0.3, max_retries=1, backoff_s=0.01, on_error="default")
    started = time.monotonic()
    score = run(rubric.ajudge(task="t"))
    assert time.monotonic() - started < 3
    assert score.value == 0.0 and score.evidence["default"] is True
    assert score.evidence["error"] == f"POST {url}/chat/completions: no answer within 0.3 s"
    assert rubric.requests == 2
    strict = JudgeRubric(base_url=url, model="slow", prompt="{task}", timeout_s=0.3, max_retries=0, raise_on_error=True)
    with pytest.raises(RequestTimeout, match="no answer within 0.3 s"):
        run(strict.ajudge(task="t"))


def test_overload_is_retried_and_a_refusal_is_not(judge: Any) -> None:
    url, _, flaky = judge
    rubric = JudgeRubric(base_url=url, model="flaky", prompt="{task}", backoff_s=0.01)
    assert run(rubric.ajudge(task="t")).value == 1.0
    assert (rubric.requests, flaky["left"]) == (3, 0)
    refused = JudgeRubric(base_url=url, model="broken", prompt="{task}", backoff_s=0.01, on_error="default")
    score = run(refused.ajudge(task="t"))
    assert refused.requests == 1 and score.value == 0.0
    assert score.evidence["error"].startswith(f"[HTTP_404] POST {url}/chat/completions answered HTTP 404: ")


def test_an_unreachable_judge_is_a_failure_or_the_default(free_port: int) -> None:
    failing = JudgeRubric(base_url=f"http://127.0.0.1:{free_port}/v1", model="m", prompt="{task}", max_retries=0)
    with pytest.raises(EpisodeFailed, match="judge failure at grading: the judge failed: .*ConnectError"):
        run(failing.ajudge(task="t"))
    rubric = JudgeRubric(base_url=f"http://127.0.0.1:{free_port}/v1", model="m", prompt="{task}", max_retries=0, on_error="default")
    score = run(rubric.ajudge(task="t"))
    assert score.value == 0.0 and "failed: ConnectError" in score.evidence["error"]


def test_grading_an_episode_fills_the_template_from_it(judge: Any) -> None:
    url, seen, _ = judge
    from openenv_sdk import create_app

    env_cls = load_environment(ECHO_DIR).env_cls
    rubric = JudgeRubric(base_url=url, model="good", prompt="Task: {task}\nActions: {actions}", system=None)
    with serve_app(create_app(env_cls)) as env_url, EnvClient(env_url, env_cls=env_cls) as env:
        env.reset(seed=3)
        env.step(env_cls.action_type(message="hello"))
        score = grade(rubric, env)
    assert score.value == 0.75
    prompt = seen[-1]["body"]["messages"][0]["content"]
    assert '"seed": 3' in prompt and '"message": "hello"' in prompt


def test_the_manifest_pins_the_judge(judge: Any) -> None:
    url, seen, _ = judge
    validation = {
        "reward": {"range": [0.0, 1.0], "oracle_tolerance": 0.0, "floor_margin": 0.1},
        "resources": {"cpu": 1.0, "memory_mb": 1024, "disk_mb": 512, "episode_timeout_s": 60.0},
        "capabilities": {"verifier": {"kind": "reward_channel"}, "llm_judged": True},
        "types": {"tags": ["demo"]},
        "judge": {"model": "good", "version": "2026-01", "params": {"temperature": 0.2, "seed": 7}},
    }
    manifest = Manifest.model_validate({"spec_version": 1, "name": "x", "validation": validation})
    rubric = JudgeRubric.from_manifest(manifest, base_url=url, prompt="{task}")
    assert run(rubric.ajudge(task="t")).value == 0.75
    body = seen[-1]["body"]
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == ("good", 0.2, 7, 512)
    with pytest.raises(ManifestError, match="the manifest pins no judge"):
        JudgeRubric.from_manifest(Manifest.model_validate({"spec_version": 1, "name": "x"}), base_url=url)
