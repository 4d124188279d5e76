"""A scripted policy behind a real OpenAI-compatible chat completions server, playing Wordle.

It answers `POST /v1/chat/completions` as the OpenAI API does (`choices[0].message` with
`tool_calls`, `finish_reason`, `usage`), and `GET /v1/models`. The model it is asked for picks
how it plays; it knows each episode's task and attempt from the `X-OpenEnv-Task` and
`X-OpenEnv-Episode` headers `openenv eval` sends, and the answer from the environment's word list
(an oracle: a test's policy, not an agent's):

    winner        guesses the answer, then says it is done         reward 1.7 (solved, fast, all green)
    loser         guesses a word sharing no letter with the answer  reward 0.0
    mod3          wins attempts below int(task_id) % 3, loses the others
    tokens        as winner, with vLLM's token ids and logprobs when the request asks
    bad-args      calls `guess` with arguments that are not JSON, then stops
    refuses       answers HTTP 400 (not retried)
    slow          waits 3 s before answering
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

WORDLE_DIR = Path(__file__).resolve().parents[2] / "environments" / "wordle"


@cache
def answers() -> list[str]:
    return (WORDLE_DIR / "answers.txt").read_text().split()


@cache
def words() -> list[str]:
    return (WORDLE_DIR / "words.txt").read_text().split()


def answer(task_id: str) -> str:
    return answers()[int(task_id)]


def miss(task_id: str) -> str:
    """A listed word with no letter of the answer: every mark is `.`."""
    word = answer(task_id)
    return next(w for w in words() if not set(w) & set(word))


def _wins(model: str, task_id: str, attempt: int) -> bool:
    if model in ("winner", "tokens"):
        return True
    if model == "mod3":
        return attempt < int(task_id) % 3
    return False


def _call(turn: int, word: str) -> dict[str, Any]:
    return {"id": f"call_{turn}", "type": "function", "function": {"name": "guess", "arguments": json.dumps({"word": word})}}


def policy_app(seen: list[dict[str, Any]]) -> FastAPI:
    """The app; every request's body and OpenEnv headers are appended to `seen`."""
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m, "object": "model"} for m in ("winner", "loser", "mod3", "tokens")]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        task_id = request.headers.get("x-openenv-task", "")
        key = request.headers.get("x-openenv-episode", "")
        seen.append({"body": body, "task": task_id, "episode": key, "auth": request.headers.get("authorization")})
        model = body["model"]
        if model == "refuses":
            return JSONResponse({"error": {"message": "model not loaded", "type": "invalid_request_error"}}, 400)
        if model == "slow":
            await asyncio.sleep(3)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        attempt = int(key.rpartition("#")[2] or 0)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn == 0 and model == "bad-args":
            message["tool_calls"] = [{"id": "call_0", "type": "function", "function": {"name": "guess", "arguments": "{word: crane"}}]
        elif turn == 0:
            word = answer(task_id) if _wins(model, task_id, attempt) else miss(task_id)
            message["tool_calls"] = [_call(turn, word)]
        else:
            message["content"] = "Done."
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            "logprobs": None,
        }
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{len(seen)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": 40 + 10 * turn, "completion_tokens": 7, "total_tokens": 47 + 10 * turn},
        }
        if model == "tokens" and body.get("return_token_ids"):
            reply["prompt_token_ids"] = list(range(100, 100 + 4 + turn))
            choice["token_ids"] = [7, 8, 9 + turn]
        if model == "tokens" and body.get("logprobs"):
            choice["logprobs"] = {
                "content": [{"token": t, "logprob": -0.25 * (i + 1), "bytes": None, "top_logprobs": []} for i, t in enumerate("abc")]
            }
        return JSONResponse(reply)

    return app
