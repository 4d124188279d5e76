"""Generation: processed logprobs that match a forward pass, the completions server and its client over HTTP."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
import torch
from openenv_trainers.echo_task import echo_messages
from openenv_trainers.errors import (
    GenerationError,
    LogprobError,
    ServerCompatibilityError,
)
from openenv_trainers.generation import (
    Completion,
    SamplingParams,
    TransformersBackend,
    check_completion,
)
from openenv_trainers.generation.client import CompletionsClient
from openenv_trainers.generation.server import create_completions_app
from openenv_trainers.tiny_model import ECHO_TOOL

from .conftest import serve
from .tokens import forward_logprobs


def _prompts(tokenizer: Any) -> list[list[int]]:
    out = []
    for text in ("a", "bc de", "fgh ij kl"):
        out.append(tokenizer.apply_chat_template(echo_messages(text), tools=[ECHO_TOOL], add_generation_prompt=True, return_dict=False))
    out.append(out[0][7:])  # a shorter prompt, so the batch is left-padded
    return out


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_processed_logprobs_equal_a_forward_pass_at_the_sampling_temperature(model: Any, tokenizer: Any, temperature: float) -> None:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
    params = SamplingParams(max_tokens=24, temperature=temperature, stop_token_ids=(tokenizer.eos_token_id,), seed=0)
    prompts = _prompts(tokenizer)
    for prompt, completion in zip(prompts, backend.generate(prompts, params), strict=True):
        reference = forward_logprobs(model, prompt, completion.token_ids, temperature)
        assert torch.allclose(torch.tensor(completion.logprobs), reference, atol=1e-4)
        if completion.finish_reason == "stop":
            assert completion.token_ids[-1] == tokenizer.eos_token_id
        else:
            assert len(completion.token_ids) == 24


def test_raw_logprobs_ignore_the_temperature(model: Any, tokenizer: Any) -> None:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id, logprobs_mode="raw_logprobs")
    prompt = _prompts(tokenizer)[0]
    [completion] = backend.generate([prompt], SamplingParams(max_tokens=8, temperature=0.5, seed=1))
    assert torch.allclose(torch.tensor(completion.logprobs), forward_logprobs(model, prompt, completion.token_ids, 1.0), atol=1e-4)


def _counting_backend(model: Any, tokenizer: Any, **kwargs: Any) -> tuple[TransformersBackend, list[int]]:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id, **kwargs)
    sizes: list[int] = []
    original = backend._generate_batch

    def counting(prompts: Any, params: Any) -> Any:
        sizes.append(len(prompts))
        return original(prompts, params)

    backend._generate_batch = counting  # type: ignore[method-assign]
    return backend, sizes


def test_concurrent_async_requests_are_batched_and_each_gets_its_own_completion(model: Any, tokenizer: Any) -> None:
    backend, calls = _counting_backend(model, tokenizer, batch_window_s=0.05)
    prompts = _prompts(tokenizer)
    params = SamplingParams(max_tokens=6, stop_token_ids=(tokenizer.eos_token_id,))

    async def run() -> list[Completion]:
        return await asyncio.gather(*(backend.agenerate(p, params) for p in prompts))

    results = asyncio.run(run())
    assert calls == [len(prompts)]
    for prompt, completion in zip(prompts, results, strict=True):
        assert torch.allclose(torch.tensor(completion.logprobs), forward_logprobs(model, prompt, completion.token_ids, 1.0), atol=1e-4)


def _staggered(backend: TransformersBackend, prompts: list[list[int]], gap_s: float, params: SamplingParams) -> list[Completion]:
    async def one(i: int, prompt: list[int]) -> Completion:
        await asyncio.sleep(i * gap_s)
        return await backend.agenerate(prompt, params)

    async def run() -> list[Completion]:
        return await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))

    return asyncio.run(run())


def test_requests_arriving_one_after_another_within_the_window_share_one_batch(model: Any, tokenizer: Any) -> None:
    # The episodes of a step ask for their next turn one after another: 8 requests 50 ms apart
    # span 350 ms, past the 200 ms window, but no gap reaches it, so they are one batch.
    backend, sizes = _counting_backend(model, tokenizer, batch_window_s=0.2, max_batch_wait_s=5.0)
    prompts = (_prompts(tokenizer) * 2)[:8]
    results = _staggered(backend, prompts, 0.05, SamplingParams(max_tokens=4, stop_token_ids=(tokenizer.eos_token_id,)))
    assert sizes == [8]
    assert all(len(c.token_ids) >= 1 for c in results)


def test_a_batch_closes_after_a_quiet_window_and_at_the_longest_wait(model: Any, tokenizer: Any) -> None:
    params = SamplingParams(max_tokens=2, stop_token_ids=(tokenizer.eos_token_id,))
    backend, sizes = _counting_backend(model, tokenizer, batch_window_s=0.02, max_batch_wait_s=5.0)
    _staggered(backend, _prompts(tokenizer)[:2], 0.3, params)  # a gap longer than the window: two batches
    assert sizes == [1, 1]
    backend, sizes = _counting_backend(model, tokenizer, batch_window_s=0.1, max_batch_wait_s=0.15)
    _staggered(backend, _prompts(tokenizer) * 3, 0.06, params)  # never quiet for 0.1 s: closed by the longest wait
    assert len(sizes) >= 2 and sum(sizes) == 12


def test_requests_made_while_the_model_generates_gather_into_the_next_batch(model: Any, tokenizer: Any) -> None:
    backend, sizes = _counting_backend(model, tokenizer, batch_window_s=0.005, max_batch_wait_s=10.0)
    counting = backend._generate_batch
    params = SamplingParams(max_tokens=2, stop_token_ids=(tokenizer.eos_token_id,))
    prompts = _prompts(tokenizer)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        started = asyncio.Event()

        def slow(batch: Any, batch_params: Any) -> Any:
            if not sizes:  # the first batch holds the model for half a second
                loop.call_soon_threadsafe(started.set)
                time.sleep(0.5)
            return counting(batch, batch_params)

        backend._generate_batch = slow  # type: ignore[method-assign]
        first = asyncio.ensure_future(backend.agenerate(prompts[0], params))
        await started.wait()
        later = []
        for prompt in prompts[1:]:  # 3 requests 50 ms apart (10 x the window) while the model is busy
            later.append(asyncio.ensure_future(backend.agenerate(prompt, params)))
            await asyncio.sleep(0.05)
        await asyncio.gather(first, *later)

    asyncio.run(run())
    assert sizes == [1, 3]


def test_batch_limits_are_checked(model: Any, tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="max_batch_wait_s"):
        TransformersBackend(model, pad_token_id=0, batch_window_s=0.5, max_batch_wait_s=0.1)


@pytest.mark.parametrize(
    ("completion", "error", "message"),
    [
        (Completion([5, 6], [-0.1], "length"), LogprobError, "2 tokens but 1 logprobs"),
        (Completion([5, 6], [-0.1, float("nan")], "length"), LogprobError, "token 1 .id 6. is nan"),
        (Completion([5, 6], [-0.1, None], "length"), LogprobError, "token 1 .id 6. is None"),  # type: ignore[list-item]
        (Completion([5, 6], [-0.1, float("-inf")], "length"), LogprobError, "is -inf"),
        (Completion([5, 6], [-0.1, 0.5], "length"), LogprobError, "above 0"),
        (Completion([5, 6], [-0.1, -0.2], "stop"), GenerationError, "not a stop token"),
        (Completion([], [], "stop"), GenerationError, "empty completion"),
    ],
)
def test_unusable_completions_are_refused(completion: Completion, error: type[Exception], message: str) -> None:
    params = SamplingParams(max_tokens=4, stop_token_ids=(2,))
    with pytest.raises(error, match=message):
        check_completion(completion, params)


def test_sampling_params_refuse_greedy_decoding() -> None:
    with pytest.raises(ValueError, match="temperature must be positive"):
        SamplingParams(temperature=0.0)


# --- the completions server and the vLLM client path, over real HTTP ---------------------------


def test_the_client_gets_token_ids_and_processed_logprobs_over_http(model: Any, tokenizer: Any, completions_server: str) -> None:
    client = CompletionsClient(completions_server)
    client.check_server()
    assert client.model() == "tiny"
    prompts = _prompts(tokenizer)
    params = SamplingParams(max_tokens=16, temperature=0.7, stop_token_ids=(tokenizer.eos_token_id,))
    batch = client.generate(prompts, params)

    async def one() -> Completion:
        try:
            return await client.agenerate(prompts[1], params)
        finally:
            await client.aclose()

    single = asyncio.run(one())
    for prompt, completion in [*zip(prompts, batch, strict=True), (prompts[1], single)]:
        reference = forward_logprobs(model, prompt, completion.token_ids, 0.7)
        assert torch.allclose(torch.tensor(completion.logprobs), reference, atol=1e-4)
    client.close()


def test_a_server_reporting_raw_logprobs_is_refused(model: Any, tokenizer: Any) -> None:
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id, logprobs_mode="raw_logprobs")
    with serve(create_completions_app(backend, tokenizer, model_name="tiny")) as url:
        client = CompletionsClient(url)
        with pytest.raises(ServerCompatibilityError, match="--logprobs-mode processed_logprobs"):
            client.check_server()
        client.close()


def _canned_server(choice: dict[str, Any]) -> Any:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"data": [{"id": "canned"}]}

    @app.post("/v1/completions")
    async def completions() -> dict[str, Any]:
        return {"choices": [{"index": 0, **choice}]}

    return app


@pytest.mark.parametrize(
    ("choice", "error", "message"),
    [
        ({"token_ids": [5, 2], "logprobs": None, "finish_reason": "stop"}, LogprobError, "without `logprobs.token_logprobs`"),
        ({"token_ids": [5, 2], "logprobs": {"token_logprobs": [-0.1]}, "finish_reason": "stop"}, LogprobError, "2 tokens but 1 logprobs"),
        ({"token_ids": [5, 2], "logprobs": {"token_logprobs": [-0.1, None]}, "finish_reason": "stop"}, LogprobError, "is None"),
        (
            {"token_ids": [5, 2], "logprobs": {"tokens": ["token_id:5", "token_id:9"], "token_logprobs": [-0.1, -0.2]}, "finish_reason": "stop"},
            LogprobError,
            "misaligned",
        ),
        ({"logprobs": {"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2]}, "finish_reason": "stop"}, ServerCompatibilityError, "no `token_ids`"),
    ],
)
def test_the_client_refuses_answers_it_cannot_train_on(choice: dict[str, Any], error: type[Exception], message: str) -> None:
    with serve(_canned_server(choice)) as url:
        client = CompletionsClient(url)
        with pytest.raises(error, match=message):
            client.generate([[1, 2, 3]], SamplingParams(max_tokens=4, stop_token_ids=(2,)))
        client.close()


def test_token_ids_are_read_from_token_id_strings_when_the_server_gives_no_token_ids() -> None:
    choice = {"logprobs": {"tokens": ["token_id:5", "token_id:2"], "token_logprobs": [-0.1, -0.2]}, "finish_reason": "stop"}
    with serve(_canned_server(choice)) as url:
        client = CompletionsClient(url)
        [completion] = client.generate([[1, 2, 3]], SamplingParams(max_tokens=4, stop_token_ids=(2,)))
        client.close()
    assert completion.token_ids == [5, 2] and completion.logprobs == [-0.1, -0.2]
    assert not any(math.isnan(x) for x in completion.logprobs)


def test_the_server_answers_in_vllms_shape(completions_server: str, tokenizer: Any) -> None:
    import httpx

    prompt = _prompts(tokenizer)[0]
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 5, "n": 2, "logprobs": 2, "return_token_ids": True, "return_tokens_as_token_ids": True}
    answer = httpx.post(f"{completions_server}/v1/completions", json=body, timeout=60).json()
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    for choice in answer["choices"]:
        assert choice["prompt_token_ids"] == prompt
        assert choice["logprobs"]["tokens"] == [f"token_id:{t}" for t in choice["token_ids"]]
        assert len(choice["logprobs"]["token_logprobs"]) == len(choice["token_ids"])
        assert choice["finish_reason"] in ("stop", "length")
    refused = httpx.post(f"{completions_server}/v1/completions", json={**body, "model": "other"}, timeout=60)
    assert refused.status_code == 404
