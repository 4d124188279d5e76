"""Stateful HTTP (extension): `POST /reset` opens a session named by the `X-OpenEnv-Session` header."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .wire import TIMEOUT_S

pytestmark = pytest.mark.extension

HEADER = "X-OpenEnv-Session"


@pytest.fixture
def fresh(base_url: str) -> Iterator[httpx.Client]:
    """A client that keeps no cookies, so only the header names the session."""
    with httpx.Client(base_url=base_url, timeout=TIMEOUT_S) as client:
        yield client


def _reset(client: httpx.Client) -> str:
    response = client.post("/reset", json={})
    assert response.status_code == 200, f"POST /reset: HTTP {response.status_code}: {response.text[:300]}"
    session_id = response.headers.get(HEADER)
    assert session_id, f"POST /reset must name its session in the {HEADER} response header"
    client.cookies.clear()
    return session_id


def test_reset_step_state_in_one_session(fresh: httpx.Client, action: dict[str, Any]) -> None:
    session_id = _reset(fresh)
    headers = {HEADER: session_id}
    step = fresh.post("/step", json={"action": action}, headers=headers)
    assert step.status_code == 200, f"POST /step in session: HTTP {step.status_code}: {step.text[:300]}"
    assert isinstance(step.json().get("observation"), dict), f"POST /step must answer an observation: {step.json()!r}"
    state = fresh.get("/state", headers=headers)
    assert state.status_code == 200, f"GET /state in session: HTTP {state.status_code}: {state.text[:300]}"
    assert isinstance(state.json(), dict), f"GET /state must answer the state object: {state.json()!r}"
    fresh.post("/close", headers=headers)


def test_step_without_session_is_refused(fresh: httpx.Client, action: dict[str, Any]) -> None:
    response = fresh.post("/step", json={"action": action})
    assert response.status_code == 400, f"POST /step with no session must be 400, got {response.status_code}"
    assert response.json()["detail"]["code"] == "SESSION_REQUIRED", f"expected SESSION_REQUIRED: {response.json()!r}"


def test_unknown_session_is_not_found(fresh: httpx.Client) -> None:
    response = fresh.get("/state", headers={HEADER: "no-such-session"})
    assert response.status_code == 404, f"GET /state with an unknown session must be 404, got {response.status_code}"
    assert response.json()["detail"]["code"] == "SESSION_NOT_FOUND", f"expected SESSION_NOT_FOUND: {response.json()!r}"
