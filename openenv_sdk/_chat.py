"""One OpenAI-compatible chat completion request, with retries: what the LLM judge
(`openenv_sdk.judge`) and the evaluation policies (`openenv_sdk.evaluation`) both send."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from .errors import RequestTimeout, ServerError, TransportError

__all__ = ["RETRY_STATUS", "post_chat_completion"]

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another try: overloaded, rate-limited, or a passing server fault."""


async def post_chat_completion(
    http: httpx.AsyncClient,
    url: str,
    body: Mapping[str, Any],
    *,
    timeout_s: float,
    max_retries: int,
    backoff_s: float,
    headers: Mapping[str, str] | None = None,
    on_attempt: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """POST a chat completion request; retry transport errors, timeouts, HTTP 429 and 5xx.

    `on_attempt` is called before each request is sent (retries included).

    Raises:
        RequestTimeout: no answer within `timeout_s`, after every retry.
        TransportError: the endpoint cannot be reached, after every retry.
        ServerError: it answered another HTTP error (code `HTTP_<status>`), or not a chat
            completion (`BAD_RESPONSE`).
    """
    error: Exception = TransportError(f"POST {url}: not sent")
    for attempt in range(max_retries + 1):
        if attempt:
            await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
        if on_attempt is not None:
            on_attempt()
        try:
            response = await http.post(url, json=dict(body), headers=dict(headers or {}), timeout=timeout_s)
        except httpx.TimeoutException as e:
            error = RequestTimeout(f"POST {url}: no answer within {timeout_s:g} s")
            error.__cause__ = e
            continue
        except httpx.HTTPError as e:
            error = TransportError(f"POST {url} failed: {type(e).__name__}: {e}")
            error.__cause__ = e
            continue
        if response.status_code in RETRY_STATUS:
            error = ServerError(
                f"POST {url} answered HTTP {response.status_code}: {response.text[:300]}", code=f"HTTP_{response.status_code}"
            )
            continue
        if response.status_code != 200:
            raise ServerError(
                f"POST {url} answered HTTP {response.status_code}: {response.text[:300]}", code=f"HTTP_{response.status_code}"
            )
        try:
            data = response.json()
            data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ServerError(f"POST {url} answered no chat completion: {response.text[:300]}", code="BAD_RESPONSE") from e
        return data
    raise error
