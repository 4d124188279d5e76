"""`JudgeRubric`: a host-side LLM judge behind any OpenAI-compatible chat endpoint.

The judge runs where the grader runs (the client or trainer), never in the container. Its prompt
is a `str.format` template whose fields are filled by name, like a reward function's parameters:
`task`, `actions`, `observations`, `rewards`, `state`, `transcript` come from the episode, and
`variables=` adds fixed ones (a reference answer, say: hidden data stays host-side)::

    judge = JudgeRubric(
        base_url="http://localhost:8001/v1",
        model="qwen2.5-7b-instruct",
        prompt="Task: {task}\\nThe agent did: {transcript}\\nReference: {reference}\\n"
        "Rate the work from 0 to 10. End with a line `SCORE: <number>`.",
        variables={"reference": "..."},
        score_range=(0, 10),
    )
    score = grade(judge, client)      # or: await judge.ajudge(task=..., transcript=...)

The judge's number is found with `score_pattern`, scaled from `score_range` to [0, 1]; an answer
with no number in range gets `default_score`, and the evidence says why (the judge answered: what
it said counts, so a transcript that talks the judge out of a number earns no exclusion). Transport
errors, timeouts, HTTP 429 and 5xx are retried `max_retries` times; when they persist, or the
judge refuses (4xx), there is no score: `EpisodeFailed` with cause `judge` (a failure is never a
reward, docs/failures.md). `on_error="default"` scores `default_score` instead; `"raise"` raises
the transport's own error.
Answers are cached by their input (model, messages and sampling parameters), so grading the
same episode twice asks the judge once.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Mapping
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from ._chat import post_chat_completion
from .errors import EpisodeFailed, ManifestError, ServerError, TransportError
from .failures import Failure, FailureCause
from .rubric import GradingContext, Rubric, Score

__all__ = ["DEFAULT_PROMPT", "DEFAULT_SCORE_PATTERN", "DEFAULT_SYSTEM", "JudgeRubric"]

DEFAULT_SYSTEM = "You are a strict, fair grader. Judge only what the agent did against the task."
DEFAULT_PROMPT = (
    "Task given to the agent:\n{task}\n\nWhat the agent did (its tool calls and their results):\n{transcript}\n\n"
    "How well did the agent complete the task? Answer with a short reason, then a last line "
    "`SCORE: <number from 0 to 1>`."
)
DEFAULT_SCORE_PATTERN = r"(?i)\bscore\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)"


class JudgeRubric(Rubric):
    """A rubric that asks an LLM judge (`POST {base_url}/chat/completions`) for the score.

    Args:
        base_url: the OpenAI-compatible API root, e.g. `http://localhost:8001/v1`.
        model: the judge model's id, sent as `model`.
        prompt: the user message, a `str.format` template (see the module's docstring).
        system: the system message; None sends none.
        variables: fixed template fields, e.g. a reference answer.
        api_key: sent as `Authorization: Bearer`; None sends no header.
        params: extra request fields (`temperature`, `max_tokens`, `seed`, ...); defaults to
            `{"temperature": 0.0, "max_tokens": 512}`.
        score_pattern: a regex whose first group is the judge's number; the last match counts.
        score_range: the judge's scale `(low, high)`, mapped to [0, 1]; a number outside it is refused.
        default_score: the score when the judge's answer holds no number in range (and, with
            `on_error="default"`, when the judge cannot be reached).
        timeout_s: the most one request may take, in seconds.
        max_retries: further tries after a transport error, a timeout, HTTP 429 or 5xx.
        backoff_s: the wait before the first retry, in seconds; doubled at each retry.
        on_error: when the judge cannot be reached or answers an error after the retries:
            `fail` (raise `EpisodeFailed`, cause `judge`: the episode has no reward), `default`
            (score `default_score`), `raise` (raise the `TransportError`/`ServerError` itself).
        raise_on_error: the same as `on_error="raise"` (kept for older callers).
        cache: keep answers by input, so the same input asks the judge once.
        transport: an httpx transport (e.g. `httpx.ASGITransport(app)` for an in-process judge).
        name: the rubric's name in composed scores.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        prompt: str = DEFAULT_PROMPT,
        system: str | None = DEFAULT_SYSTEM,
        variables: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        params: Mapping[str, Any] | None = None,
        score_pattern: str = DEFAULT_SCORE_PATTERN,
        score_range: tuple[float, float] = (0.0, 1.0),
        default_score: float = 0.0,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        on_error: Literal["fail", "default", "raise"] = "fail",
        raise_on_error: bool = False,
        cache: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        name: str = "judge",
    ) -> None:
        low, high = score_range
        if not low < high:
            raise ValueError(f"score_range must be (low, high) with low < high, got {score_range!r}")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.prompt, self.system = model, prompt, system
        self.variables = dict(variables or {})
        self.fields = sorted({f for _, f, _, _ in string.Formatter().parse(prompt) if f} - set(self.variables))
        self.params = dict(params) if params is not None else {"temperature": 0.0, "max_tokens": 512}
        self.score_pattern = re.compile(score_pattern)
        self.score_range = (float(low), float(high))
        self.default_score = default_score
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        if on_error not in ("fail", "default", "raise"):
            raise ValueError(f"on_error must be 'fail', 'default' or 'raise', got {on_error!r}")
        self.on_error = "raise" if raise_on_error else on_error
        self.raise_on_error = self.on_error == "raise"
        self._api_key = api_key
        self._transport = transport
        self._cache: dict[str, str] | None = {} if cache else None
        self.name = name
        self.requests = 0
        """How many HTTP requests this judge has sent (retries included; cache hits send none)."""

    def __repr__(self) -> str:
        return f"JudgeRubric(model={self.model!r}, url={self.url!r})"

    @classmethod
    def from_manifest(cls, manifest: Any, *, base_url: str, **kwargs: Any) -> JudgeRubric:
        """The judge pinned in an `openenv.yaml` (`validation.judge`: model, version, params).

        Raises:
            ManifestError: the manifest pins no judge.
        """
        judge = getattr(getattr(manifest, "validation", None), "judge", None)
        if judge is None:
            raise ManifestError("the manifest pins no judge: add validation.judge (model, version, params)")
        params = {"temperature": 0.0, "max_tokens": 512, **judge.params, **kwargs.pop("params", {})}
        return cls(base_url=base_url, model=judge.model, params=params, **kwargs)

    # --- grading ---------------------------------------------------------------------------

    async def ascore(self, ctx: GradingContext) -> Score:
        return await self.ajudge(**{f: await ctx.resolve(f) for f in self.fields})

    async def ajudge(self, **fields: Any) -> Score:
        """Ask the judge about these template fields (missing ones raise `KeyError`)."""
        values = {k: _text(v) for k, v in {**fields, **self.variables}.items()}
        messages = [{"role": "user", "content": self.prompt.format(**values)}]
        if self.system is not None:
            messages.insert(0, {"role": "system", "content": self.system})
        body = {"model": self.model, "messages": messages, **self.params}
        key = hashlib.sha256(json.dumps([self.url, body], sort_keys=True).encode()).hexdigest()
        cached = self._cache is not None and key in self._cache
        try:
            answer = self._cache[key] if cached and self._cache is not None else await self._ask(body)
        except (TransportError, ServerError) as e:
            if self.on_error == "raise":
                raise
            if self.on_error == "fail":
                failure = Failure(cause=FailureCause.JUDGE, stage="grading", message=f"the judge failed: {e}", error_type=type(e).__name__)
                raise EpisodeFailed(failure) from e
            return Score(value=self.default_score, evidence={"error": str(e), "default": True, "model": self.model})
        if self._cache is not None:
            self._cache[key] = answer
        return self._parse(answer, cached=cached)

    def _parse(self, answer: str, *, cached: bool) -> Score:
        evidence: dict[str, Any] = {"answer": answer, "model": self.model, "cached": cached}
        matches = self.score_pattern.findall(answer)
        low, high = self.score_range
        if not matches:
            evidence.update(default=True, reason=f"no score in the judge's answer (pattern {self.score_pattern.pattern})")
            return Score(value=self.default_score, evidence=evidence)
        raw = float(matches[-1] if isinstance(matches[-1], str) else matches[-1][0])
        if not low <= raw <= high:
            evidence.update(default=True, reason=f"the judge's score {raw:g} is outside {low:g}..{high:g}")
            return Score(value=self.default_score, evidence=evidence)
        evidence["raw_score"] = raw
        return Score(value=(raw - low) / (high - low), evidence=evidence)

    async def _ask(self, body: dict[str, Any]) -> str:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        async with httpx.AsyncClient(timeout=self.timeout_s, transport=self._transport, headers=headers) as http:
            data = await post_chat_completion(
                http, self.url, body, timeout_s=self.timeout_s, max_retries=self.max_retries,
                backoff_s=self.backoff_s, on_attempt=self._count_request,
            )  # fmt: skip
        content = data["choices"][0]["message"]
        if not isinstance(content, dict):
            raise ServerError(f"POST {self.url} answered no chat completion: {str(data)[:300]}", code="BAD_RESPONSE")
        return str(content.get("content") or "")

    def _count_request(self) -> None:
        self.requests += 1

def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, indent=1, default=str, ensure_ascii=False)
