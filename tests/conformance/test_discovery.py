"""Discovery over HTTP: /health, /metadata, /schema, /openapi.json."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


def _get_json(http: httpx.Client, path: str) -> Any:
    response = http.get(path)
    assert response.status_code == 200, f"GET {path} must answer 200, got {response.status_code}: {response.text[:300]}"
    return response.json()


def test_health_is_healthy(http: httpx.Client) -> None:
    body = _get_json(http, "/health")
    assert body.get("status") == "healthy", f"GET /health must report status 'healthy', got {body!r}"


@pytest.mark.extension
def test_health_session_counts(http: httpx.Client) -> None:
    body = _get_json(http, "/health")
    if "active_sessions" not in body and "max_sessions" not in body:
        pytest.skip("the server reports no session counts (optional)")
    active, maximum = body.get("active_sessions"), body.get("max_sessions")
    assert isinstance(active, int) and isinstance(maximum, int), (
        f"/health active_sessions and max_sessions must both be integers, got {active!r} and {maximum!r}"
    )
    assert 0 <= active <= maximum and maximum >= 1, f"/health needs 0 <= active_sessions <= max_sessions >= 1: {body!r}"


def test_metadata_names_and_describes(http: httpx.Client) -> None:
    body = _get_json(http, "/metadata")
    for field in ("name", "description"):
        assert isinstance(body.get(field), str) and body[field].strip(), (
            f"GET /metadata needs a non-empty string {field!r} (OpenEnv's EnvironmentMetadata), got {body!r}"
        )


@pytest.mark.parametrize("part", ["action", "observation", "state"])
def test_schema_has_object_schemas(schema: dict[str, Any], part: str) -> None:
    value = schema.get(part)
    assert isinstance(value, dict), f"/schema needs {part!r}: the JSON Schema of the {part} model; got {value!r}"
    assert value.get("type") == "object", (
        f"/schema {part!r} must be an object schema (type 'object'), got type {value.get('type')!r}"
    )


def test_openapi_has_version(http: httpx.Client) -> None:
    body = _get_json(http, "/openapi.json")
    version = (body.get("info") or {}).get("version")
    assert isinstance(version, str) and version, f"/openapi.json needs info.version, got info={body.get('info')!r}"
