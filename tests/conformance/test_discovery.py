"""Discovery over HTTP: /health, /metadata, /schema, /openapi.json.

The rules are `openenv validate`'s own (`openenv_sdk.checks`); the session counts are the
suite's alone.
"""

from __future__ import annotations

import pytest

from openenv_sdk.checks import RuntimeProbe, check_health, check_metadata, check_openapi, check_schema

from .wire import holds


def test_health_is_healthy(probe: RuntimeProbe) -> None:
    holds(check_health(probe))


@pytest.mark.extension
def test_health_session_counts(probe: RuntimeProbe) -> None:
    response = probe.http.get("/health")
    assert response.status_code == 200, f"GET /health must answer 200, got {response.status_code}: {response.text[:300]}"
    body = response.json()
    if "active_sessions" not in body and "max_sessions" not in body:
        pytest.skip("the server reports no session counts (optional)")
    active, maximum = body.get("active_sessions"), body.get("max_sessions")
    assert isinstance(active, int) and isinstance(maximum, int), (
        f"/health active_sessions and max_sessions must both be integers, got {active!r} and {maximum!r}"
    )
    assert 0 <= active <= maximum and maximum >= 1, f"/health needs 0 <= active_sessions <= max_sessions >= 1: {body!r}"


def test_metadata_names_and_describes(probe: RuntimeProbe) -> None:
    holds(check_metadata(probe))


def test_schema_has_object_schemas(probe: RuntimeProbe) -> None:
    holds(check_schema(probe))


def test_openapi_has_version_and_routes(probe: RuntimeProbe) -> None:
    holds(check_openapi(probe))
