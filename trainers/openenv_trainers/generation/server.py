"""A small OpenAI-compatible completions server over any `GenerationBackend`, shaped like vLLM's.

`POST /v1/completions` takes token-id (or text) prompts and answers as `vllm serve` does with
`return_token_ids` / `return_tokens_as_token_ids`: each choice carries `token_ids`,
`prompt_token_ids` and `logprobs` (`tokens`, `token_logprobs`, `top_logprobs`). Its
`logprobs_mode` is the backend's, as vLLM's `--logprobs-mode`. It lets the vLLM client path
(`CompletionsClient`) run over real HTTP on a CPU, and serves a model for demos:

    python -m openenv_trainers.generation.server MODEL_DIR --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import GenerationError
from .base import Completion, GenerationBackend, SamplingParams

__all__ = ["CompletionRequest", "create_completions_app"]


class CompletionRequest(BaseModel):
    """The fields of vLLM's `/v1/completions` request that this server honours (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int = Field(default=16, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int | None = None
    n: int = Field(default=1, ge=1, le=256)
    logprobs: int | None = Field(default=None, ge=0, le=20)
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    return_token_ids: bool = False
    return_tokens_as_token_ids: bool = False
    skip_special_tokens: bool = True
    stream: bool = False


def create_completions_app(
    backend: GenerationBackend,
    tokenizer: Any,
    *,
    model_name: str = "model",
    stop_token_ids: tuple[int, ...] | None = None,
) -> Any:
    """A FastAPI app serving `backend` at `/v1/completions` (plus `/v1/models` and `/health`).

    Args:
        backend: samples the completions; its `logprobs_mode` is the server's.
        tokenizer: tokenizes text prompts and names tokens in the answer.
        model_name: the id `/v1/models` lists and requests may name.
        stop_token_ids: always stop on these (as vLLM stops on the model's eos); default the
            tokenizer's eos token.
    """
    from fastapi import FastAPI, HTTPException

    default_stop = tuple(stop_token_ids) if stop_token_ids is not None else (tokenizer.eos_token_id,)
    app = FastAPI(title="openenv-trainers completions")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "openenv-trainers"}]}

    @app.post("/v1/completions")
    async def completions(request: CompletionRequest) -> dict[str, Any]:
        if request.stream:
            raise HTTPException(400, "stream=true is not supported by this server")
        if request.model is not None and request.model != model_name:
            raise HTTPException(404, f"The model `{request.model}` does not exist. Available: [{model_name!r}]")
        prompts = _prompt_ids(request.prompt, tokenizer)
        stop = tuple(dict.fromkeys([*default_stop, *(request.stop_token_ids or [])]))
        try:
            params = SamplingParams(
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                top_k=max(request.top_k or 0, 0),
                stop_token_ids=stop,
                seed=request.seed,
                top_logprobs=request.logprobs or 0,
            )
        except ValueError as e:
            raise HTTPException(400, str(e)) from e
        flat = [prompt for prompt in prompts for _ in range(request.n)]
        try:
            if len(flat) == 1:
                results = [await backend.agenerate(flat[0], params)]
            else:
                results = await asyncio.gather(*(backend.agenerate(p, params) for p in flat))
        except GenerationError as e:
            raise HTTPException(500, str(e)) from e
        choices = [
            _choice(i, flat[i], result, request, tokenizer, stop) for i, result in enumerate(results)
        ]
        completion_tokens = sum(len(r.token_ids) for r in results)
        prompt_tokens = sum(len(p) for p in prompts)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    return app


def _prompt_ids(prompt: Any, tokenizer: Any) -> list[list[int]]:
    from fastapi import HTTPException

    if isinstance(prompt, str):
        prompts: list[Any] = [prompt]
    elif prompt and all(isinstance(t, int) for t in prompt):
        prompts = [prompt]
    else:
        prompts = list(prompt)
    out = []
    for p in prompts:
        ids = tokenizer(p, add_special_tokens=False)["input_ids"] if isinstance(p, str) else list(p)
        if not ids:
            raise HTTPException(400, "a prompt is empty")
        out.append(ids)
    return out


def _choice(
    index: int, prompt: list[int], result: Completion, request: CompletionRequest, tokenizer: Any, stop: tuple[int, ...]
) -> dict[str, Any]:
    def name(token_id: int) -> str:
        if request.return_tokens_as_token_ids:
            return f"token_id:{token_id}"
        return tokenizer.convert_ids_to_tokens(token_id)

    logprobs = None
    if request.logprobs is not None:
        top = result.top_logprobs or [{} for _ in result.token_ids]
        logprobs = {
            "tokens": [name(t) for t in result.token_ids],
            "token_logprobs": list(result.logprobs),
            "top_logprobs": [
                {**{name(t): v for t, v in step.items()}, name(tok): lp}
                for step, tok, lp in zip(top, result.token_ids, result.logprobs, strict=True)
            ],
            "text_offset": [],
        }
    choice: dict[str, Any] = {
        "index": index,
        "text": tokenizer.decode(result.token_ids, skip_special_tokens=request.skip_special_tokens),
        "logprobs": logprobs,
        "finish_reason": result.finish_reason,
        "stop_reason": result.token_ids[-1] if result.finish_reason == "stop" and result.token_ids[-1] in stop else None,
    }
    if request.return_token_ids:
        choice["token_ids"] = list(result.token_ids)
        choice["prompt_token_ids"] = list(prompt)
    return choice


def main(argv: list[str] | None = None) -> None:
    """Serve a saved model folder: `python -m openenv_trainers.generation.server MODEL_DIR`."""
    import uvicorn
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .transformers_backend import TransformersBackend

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model_dir")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--model-name", default=None)
    parser.add_argument("--logprobs-mode", default="processed_logprobs", choices=["processed_logprobs", "raw_logprobs"])
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id, logprobs_mode=args.logprobs_mode)
    app = create_completions_app(backend, tokenizer, model_name=args.model_name or args.model_dir)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
