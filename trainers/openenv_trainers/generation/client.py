"""`CompletionsClient`: generation through an OpenAI-compatible `/v1/completions` server (vLLM).

Start vLLM so that it returns what training needs:

    vllm serve MODEL --logprobs-mode processed_logprobs --max-logprobs -1

Each request sends token ids (`prompt: [ids]`) and asks for `return_token_ids` (the sampled ids,
stop token included) and `logprobs` (the sampled token's logprob). Every answer is checked:
token ids present, one finite logprob per token, the ids named by `logprobs.tokens` equal to
`token_ids`. Nothing is filled in: a completion that fails a check raises `LogprobError`.

`check_server()` (run once before training; the rollout worker does) also checks that the
logprobs are *processed* (after temperature): it samples one token at two temperatures and
compares the reported distributions, which are equal when the server reports raw logprobs.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

from ..errors import GenerationError, LogprobError, ServerCompatibilityError
from .base import Completion, SamplingParams, check_completion

__all__ = ["CompletionsClient"]

_PROBE_TEMPERATURES = (1.0, 0.5)
_RETRYABLE = (httpx.TransportError,)


class CompletionsClient:
    """A `GenerationBackend` over HTTP: one request per prompt (async) or per batch (sync)."""

    logprobs_mode = "processed_logprobs"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 3,
    ) -> None:
        """Describe the server; nothing is sent until the first request.

        Args:
            base_url: the server, e.g. `http://127.0.0.1:8000` (with or without `/v1`).
            model: the model id to request; default the first one `/v1/models` lists.
            api_key: sent as `Authorization: Bearer ...` when given.
            timeout_s: the longest wait for one completion, in seconds.
            connect_timeout_s: the longest wait to connect, in seconds.
            max_retries: attempts after a connection failure (never after an answer).
        """
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeout_s and connect_timeout_s must be positive")
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self.max_retries = max_retries
        self._sync: httpx.Client | None = None
        self._async: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._lock = threading.Lock()

    # --- the backend interface ---------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt, from one request."""
        if not prompts:
            return []
        body = self._request_body([list(p) for p in prompts], params)
        answer = self._post_sync(body)
        return self._completions(answer, len(prompts), params)

    async def agenerate(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """One completion of one prompt (the server batches concurrent requests)."""
        body = self._request_body(list(prompt), params)
        answer = await self._post_async(body)
        return self._completions(answer, 1, params)[0]

    # --- checks -------------------------------------------------------------------------------

    def check_server(self) -> None:
        """Check that the server answers with token ids and processed logprobs.

        Raises:
            ServerCompatibilityError: no token ids, or raw logprobs (the message names the flag).
            GenerationError: the server cannot be reached or refuses the probe.
        """
        answers = [self._post_sync(body) for body in self._probe_bodies()]
        self._judge_probe(answers)

    async def acheck_server(self) -> None:
        """`check_server`, awaited."""
        answers = [await self._post_async(body) for body in self._probe_bodies()]
        self._judge_probe(answers)

    def model(self) -> str:
        """The model id requests name (asked of `/v1/models` once when not given)."""
        if self._model is None:
            data = self._get_sync("/v1/models")
            try:
                self._model = str(data["data"][0]["id"])
            except (KeyError, IndexError, TypeError) as e:
                raise GenerationError(f"{self.base_url}/v1/models lists no model: {data!r}") from e
        return self._model

    async def amodel(self) -> str:
        if self._model is None:
            await asyncio.to_thread(self.model)
        assert self._model is not None
        return self._model

    def close(self) -> None:
        """Close the HTTP connections (the async ones of loops that are still open are closed too)."""
        with self._lock:
            client, self._sync = self._sync, None
            async_clients, self._async = self._async, {}
        if client is not None:
            client.close()
        for loop, aclient in async_clients.items():
            if not loop.is_closed() and loop.is_running():
                asyncio.run_coroutine_threadsafe(aclient.aclose(), loop)

    async def aclose(self) -> None:
        """Close the HTTP connections, from the event loop that made requests (its client is
        bound to that loop). Other loops' clients are closed by `close()` while they run."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.pop(loop, None)
        if client is not None:
            await client.aclose()
        self.close()

    # --- internals ----------------------------------------------------------------------------

    def _request_body(self, prompt: list[int] | list[list[int]], params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": 1,
            # At least 1: some servers return no logprob at all for 0; the sampled token's logprob
            # is always in `token_logprobs` whatever the number of alternatives asked for.
            "logprobs": max(1, params.top_logprobs),
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "seed": params.seed if params.seed is not None else random.getrandbits(63),
        }
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        return body

    def _completions(self, answer: Any, expected: int, params: SamplingParams) -> list[Completion]:
        where = f"{self.base_url}/v1/completions"
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
        except (KeyError, TypeError) as e:
            raise GenerationError(f"{where} answered without `choices`: {str(answer)[:300]}") from e
        if len(choices) != expected:
            raise GenerationError(f"{where} returned {len(choices)} choices for {expected} prompts")
        return [check_completion(_parse_choice(c, where), params, where=where) for c in choices]

    def _probe_bodies(self) -> list[dict[str, Any]]:
        model = self.model()
        return [
            {
                "model": model,
                "prompt": "The capital of France is",
                "max_tokens": 1,
                "temperature": t,
                "logprobs": 5,
                "seed": 0,
                "return_token_ids": True,
                "return_tokens_as_token_ids": True,
            }
            for t in _PROBE_TEMPERATURES
        ]

    def _judge_probe(self, answers: list[Any]) -> None:
        where = f"{self.base_url}/v1/completions"
        tops = []
        for answer in answers:
            choice = answer["choices"][0]
            if choice.get("token_ids") is None and not _ids_from_tokens(choice):
                raise ServerCompatibilityError(
                    f"{where} returns no token ids: use vLLM >= 0.10.2 (`return_token_ids`) or a server that "
                    f"honours `return_tokens_as_token_ids`"
                )
            top = ((choice.get("logprobs") or {}).get("top_logprobs") or [None])[0]
            if not top:
                raise ServerCompatibilityError(f"{where} returns no top logprobs (start vLLM with --max-logprobs -1)")
            tops.append(top)
        shared = set(tops[0]) & set(tops[1])
        if not shared:
            return  # the two temperatures ranked different tokens first: the distributions differ
        if all(math.isclose(tops[0][k], tops[1][k], abs_tol=1e-3) for k in shared):
            raise ServerCompatibilityError(
                f"{where} reports the same logprobs at temperatures {_PROBE_TEMPERATURES}: they are raw, not "
                f"processed. Start vLLM with `--logprobs-mode processed_logprobs` so that the logprobs are those "
                f"of the sampling distribution (after temperature), as the trainer recomputes them."
            )

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._sync is None:
                self._sync = httpx.Client(timeout=self._timeout, headers=self._headers)
            return self._sync

    def _aclient(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            for old in [lp for lp in self._async if lp.is_closed()]:
                del self._async[old]
            client = self._async.get(loop)
            if client is None:
                client = self._async[loop] = httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
            return client

    def _post_sync(self, body: dict[str, Any]) -> Any:
        body = {"model": self.model(), **body}
        for attempt in range(self.max_retries + 1):
            try:
                response = self._client().post(f"{self.base_url}/v1/completions", json=body)
                return _json(response, self.base_url)
            except _RETRYABLE as e:
                if attempt == self.max_retries:
                    raise GenerationError(f"{self.base_url}/v1/completions: {type(e).__name__}: {e}") from e
                time.sleep(min(2.0**attempt * 0.2, 5.0))
        raise AssertionError("unreachable")

    async def _post_async(self, body: dict[str, Any]) -> Any:
        body = {"model": await self.amodel(), **body}
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._aclient().post(f"{self.base_url}/v1/completions", json=body)
                return _json(response, self.base_url)
            except _RETRYABLE as e:
                if attempt == self.max_retries:
                    raise GenerationError(f"{self.base_url}/v1/completions: {type(e).__name__}: {e}") from e
                await asyncio.sleep(min(2.0**attempt * 0.2, 5.0))
        raise AssertionError("unreachable")

    def _get_sync(self, path: str) -> Any:
        try:
            return _json(self._client().get(f"{self.base_url}{path}"), self.base_url)
        except httpx.HTTPError as e:
            raise GenerationError(f"{self.base_url}{path}: {type(e).__name__}: {e}") from e


def _json(response: httpx.Response, base_url: str) -> Any:
    if response.status_code != 200:
        raise GenerationError(f"{base_url}{response.request.url.path} answered {response.status_code}: {response.text[:500]}")
    try:
        return response.json()
    except ValueError as e:
        raise GenerationError(f"{base_url} answered non-JSON: {response.text[:200]}") from e


def _ids_from_tokens(choice: dict[str, Any]) -> list[int] | None:
    """Token ids from `logprobs.tokens` when they are `token_id:N` strings (`return_tokens_as_token_ids`)."""
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if not tokens or not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        return None
    return [int(t.removeprefix("token_id:")) for t in tokens]


def _parse_choice(choice: dict[str, Any], where: str) -> Completion:
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict) or logprobs.get("token_logprobs") is None:
        raise LogprobError(f"{where} returned a completion without `logprobs.token_logprobs`; it cannot be trained on")
    named = _ids_from_tokens(choice)
    ids = choice.get("token_ids")
    if ids is None:
        if named is None:
            raise ServerCompatibilityError(
                f"{where} returned no `token_ids` (ask vLLM >= 0.10.2 with `return_token_ids`), and its "
                f"`logprobs.tokens` are not `token_id:N` strings"
            )
        ids = named
    elif named is not None and named != list(ids):
        raise LogprobError(f"{where}: `logprobs.tokens` name other tokens than `token_ids`: the logprobs are misaligned")
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length"):
        raise GenerationError(f"{where}: finish_reason {finish!r} (expected 'stop' or 'length')")
    return Completion(token_ids=list(ids), logprobs=list(logprobs["token_logprobs"]), finish_reason=finish)
