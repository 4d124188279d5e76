"""Wait until a server answers `GET /health` with 200."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import httpx

__all__ = ["HealthWaitResult", "wait_for_health"]

HealthWaitResult = Literal["healthy", "dead", "timeout"]
"""`"healthy"`, `"dead"` (the process went away) or `"timeout"`."""


def wait_for_health(
    base_url: str,
    *,
    timeout_s: float,
    is_alive: Callable[[], bool] | None = None,
    poll_interval_s: float = 0.02,
    request_timeout_s: float = 2.0,
    alive_check_interval_s: float = 0.5,
) -> HealthWaitResult:
    """Poll `{base_url}/health` until it answers 200, the process dies, or `timeout_s` passes.

    Args:
        base_url: e.g. `http://127.0.0.1:49153`.
        timeout_s: the longest to wait, in seconds.
        is_alive: checked every `alive_check_interval_s`; when it returns False the wait ends.
        poll_interval_s: pause between attempts, in seconds.
        request_timeout_s: timeout of one attempt, in seconds.
        alive_check_interval_s: seconds between `is_alive` checks.
    """
    deadline = time.monotonic() + timeout_s
    next_alive_check = 0.0
    # No TLS context for plain http: loading the CA bundle alone takes about 40 ms.
    verify = base_url.startswith("https://")
    with httpx.Client(timeout=request_timeout_s, trust_env=False, verify=verify) as client:
        while True:
            now = time.monotonic()
            if is_alive is not None and now >= next_alive_check:
                if not is_alive():
                    return "dead"
                next_alive_check = now + alive_check_interval_s
            try:
                if client.get(f"{base_url}/health").status_code == 200:
                    return "healthy"
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return "timeout"
            time.sleep(min(poll_interval_s, max(0.0, deadline - time.monotonic())))
