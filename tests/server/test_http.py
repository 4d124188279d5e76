"""HTTP routes: discovery, stateful reset/step/state, sessions, orchestrator calls, typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fixtures.envs import ProbeAction, ProbeEnv, ProbeObservation, ProbeState, Recorder, probe_factory
from fixtures.servers import serve

from openenv_sdk import ServerConfig, create_app

HEADER = "X-OpenEnv-Session"


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def base_url(recorder: Recorder) -> Iterator[str]:
    config = ServerConfig(max_sessions=50)
    app = create_app(ProbeEnv, factory=probe_factory(recorder=recorder), config=config, readme="# Probe")
    with serve(app) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10) as c:
        yield c


def detail(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"detail"}, body
    return body["detail"]  # type: ignore[no-any-return]


def new_session(client: httpx.Client, **reset: Any) -> dict[str, str]:
    response = client.post("/reset", json=reset)
    assert response.status_code == 200, response.text
    client.cookies.clear()
    return {HEADER: response.headers[HEADER]}


# --- discovery ----------------------------------------------------------------------------


def test_health(client: httpx.Client) -> None:
    body = client.get("/health").json()
    assert body["status"] == "healthy"
    assert body["max_sessions"] == 50
    assert isinstance(body["active_sessions"], int)


def test_metadata(client: httpx.Client) -> None:
    assert client.get("/metadata").json() == {
        "name": "probe",
        "description": "A configurable environment for testing servers.",
        "readme_content": "# Probe",
        "version": "1.2.3",
    }


def test_schema_is_the_models_schemas(client: httpx.Client) -> None:
    body = client.get("/schema").json()
    assert body["action"] == ProbeAction.model_json_schema()
    assert body["observation"] == ProbeObservation.model_json_schema()
    assert body["state"] == ProbeState.model_json_schema()
    assert [t["name"] for t in body["tools"]] == [
        "echo", "aecho", "add", "explode", "slow", "slow_sync", "whoami", "episode"
    ]  # fmt: skip
    assert "secret" not in str(body["tools"])


def test_openapi_version(client: httpx.Client) -> None:
    info = client.get("/openapi.json").json()["info"]
    assert info["title"] == "probe (openenv-sdk)"
    assert info["version"]


# --- stateful reset/step/state ----------------------------------------------------------------


def test_reset_names_a_session_in_header_and_cookie(client: httpx.Client) -> None:
    response = client.post("/reset", json={"episode_id": "http-1"})
    assert response.status_code == 200
    session_id = response.headers[HEADER]
    assert response.cookies["openenv_session"] == session_id
    assert response.json() == {
        "observation": {"metadata": {}, "echoed": "ready", "thread_id": 0},
        "reward": None,
        "done": False,
    }


def test_steps_act_in_the_named_session(client: httpx.Client) -> None:
    first, second = new_session(client, episode_id="a"), new_session(client, episode_id="b")
    step = client.post("/step", json={"action": {"message": "one"}}, headers=first)
    assert step.status_code == 200
    assert step.json()["observation"]["echoed"] == "one"
    assert step.json()["reward"] == 3.0
    client.post("/step", json={"action": {"message": "two"}}, headers=second)
    assert client.get("/state", headers=first).json() == {"episode_id": "a", "step_count": 1, "messages": ["one"]}
    assert client.get("/state", headers=second).json() == {"episode_id": "b", "step_count": 1, "messages": ["two"]}


def test_cookie_keeping_client_is_stateful(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=10) as c:
        c.post("/reset", json={"episode_id": "cookie"})
        c.post("/step", json={"action": {"message": "hi"}})
        assert c.get("/state").json()["messages"] == ["hi"]


def test_reset_again_reuses_the_session(client: httpx.Client) -> None:
    headers = new_session(client, episode_id="first")
    again = client.post("/reset", json={"episode_id": "second"}, headers=headers)
    assert again.headers[HEADER] == headers[HEADER]
    assert client.get("/state", headers=headers).json()["episode_id"] == "second"


def test_step_without_session_is_session_required(client: httpx.Client) -> None:
    assert detail(client.post("/step", json={"action": {"message": "x"}}), 400) == {
        "message": "No session: send the X-OpenEnv-Session header (from POST /sessions or POST /reset), "
        "or call POST /reset first with a cookie-keeping client",
        "code": "SESSION_REQUIRED",
    }


@pytest.mark.parametrize(("method", "path"), [("GET", "/state"), ("POST", "/step"), ("POST", "/reset")])
def test_unknown_session_is_not_found(client: httpx.Client, method: str, path: str) -> None:
    body = {"action": {"message": "x"}} if path == "/step" else {}
    response = client.request(method, path, json=body, headers={HEADER: "nope"})
    assert detail(response, 404) == {
        "message": "No session 'nope': it was closed, reaped after 600 s idle, or never existed. "
        "Create one with POST /sessions or POST /reset.",
        "code": "SESSION_NOT_FOUND",
    }


def test_invalid_action_is_422_with_field_errors(client: httpx.Client) -> None:
    headers = new_session(client)
    body = detail(client.post("/step", json={"action": {"message": ""}}, headers=headers), 422)
    assert body == {
        "message": "Invalid action for ProbeEnv: message: String should have at least 1 character",
        "code": "VALIDATION_ERROR",
        "errors": [{"loc": ["message"], "msg": "String should have at least 1 character", "type": "string_too_short"}],
    }
    assert client.post("/step", json={"action": {"message": "ok"}}, headers=headers).status_code == 200


def test_step_body_without_action(client: httpx.Client) -> None:
    body = detail(client.post("/step", json={"message": "x"}, headers=new_session(client)), 422)
    assert body["code"] == "VALIDATION_ERROR"
    assert body["errors"] == [{"loc": ["body", "action"], "msg": "Field required", "type": "missing"}]


def test_invalid_json_body(client: httpx.Client) -> None:
    headers = {**new_session(client), "content-type": "application/json"}
    assert detail(client.post("/step", content=b"{bad", headers=headers), 400) == {
        "message": "Invalid JSON body: JSON decode error",
        "code": "INVALID_JSON",
    }


def test_invalid_reset_arguments(client: httpx.Client) -> None:
    body = detail(client.post("/reset", json={"seed": "abc"}), 422)
    assert body["code"] == "VALIDATION_ERROR"
    assert body["errors"][0]["loc"] == ["seed"]


def test_tool_call_through_http_step(client: httpx.Client) -> None:
    headers = new_session(client)
    response = client.post("/step", json={"action": {"tool": "add", "arguments": {"a": 1, "b": 2}}}, headers=headers)
    assert response.json()["observation"]["result"]["data"] == 3


# --- sessions -----------------------------------------------------------------------------------


def test_session_lifecycle_calls_close(client: httpx.Client, recorder: Recorder) -> None:
    created = client.post("/sessions")
    assert created.status_code == 201
    info = created.json()
    assert set(info) == {"session_id", "mcp_token", "mcp_path"}
    headers = {HEADER: info["session_id"]}
    client.cookies.clear()
    client.post("/reset", json={"episode_id": "deleted-one"}, headers=headers)
    assert client.get(f"/sessions/{info['session_id']}").json() == info
    assert client.delete(f"/sessions/{info['session_id']}").status_code == 204
    assert recorder.wait_closed_episode("deleted-one")
    assert detail(client.get("/state", headers=headers), 404)["code"] == "SESSION_NOT_FOUND"
    assert detail(client.delete(f"/sessions/{info['session_id']}"), 404)["code"] == "SESSION_NOT_FOUND"


def test_close_route_ends_the_session(client: httpx.Client, recorder: Recorder) -> None:
    headers = new_session(client, episode_id="closed-over-http")
    assert client.post("/close", headers=headers).status_code == 204
    assert recorder.wait_closed_episode("closed-over-http")
    assert detail(client.get("/state", headers=headers), 404)["code"] == "SESSION_NOT_FOUND"


# --- orchestrator-only calls ----------------------------------------------------------------------


def test_orchestrator_call(client: httpx.Client) -> None:
    headers = new_session(client)
    client.post("/step", json={"action": {"message": "graded"}}, headers=headers)
    response = client.post("/call/secret", json={"arguments": {"salt": "x"}}, headers=headers)
    assert response.json() == {"name": "secret", "result": {"answer": 42, "salt": "x", "messages": ["graded"]}}
    assert client.post("/call/secret", headers=headers).json()["result"]["salt"] == ""


def test_unknown_orchestrator_call(client: httpx.Client) -> None:
    assert detail(client.post("/call/secrt", headers=new_session(client)), 404) == {
        "message": "Unknown orchestrator call 'secrt'. Did you mean 'secret'? Available: ['secret', 'transcript']",
        "code": "UNKNOWN_CALL",
    }


def test_orchestrator_call_with_bad_arguments(client: httpx.Client) -> None:
    response = client.post("/call/secret", json={"arguments": {"pepper": 1}}, headers=new_session(client))
    assert detail(response, 422) == {
        "message": "Bad arguments for 'secret': got an unexpected keyword argument 'pepper'",
        "code": "VALIDATION_ERROR",
    }


def test_orchestrator_call_needs_a_session(client: httpx.Client) -> None:
    assert detail(client.post("/call/secret"), 400)["code"] == "SESSION_REQUIRED"


def test_environment_raising_is_500_execution_error() -> None:
    def broken(env: ProbeEnv, action: Any) -> Any:
        raise RuntimeError("kaput")

    with serve(create_app(ProbeEnv, factory=probe_factory(step_func=broken))) as url, httpx.Client(base_url=url) as c:
        headers = new_session(c)
        assert detail(c.post("/step", json={"action": {"message": "x"}}, headers=headers), 500) == {
            "message": "step raised RuntimeError: kaput",
            "code": "EXECUTION_ERROR",
        }
        assert c.get("/state", headers=headers).status_code == 200


def test_factory_error_is_500() -> None:
    def factory() -> ProbeEnv:
        raise OSError("no GPU")

    with serve(create_app(ProbeEnv, factory=factory)) as url, httpx.Client(base_url=url) as c:
        assert detail(c.post("/reset", json={}), 500) == {
            "message": "Could not create the environment: OSError: no GPU",
            "code": "FACTORY_ERROR",
        }


def test_oversized_body_is_refused_with_413_and_the_server_goes_on(echo_server: str) -> None:
    limit = ServerConfig().max_message_bytes
    with httpx.Client(base_url=echo_server, timeout=30) as http:
        big = {"action": {"message": "x" * (limit + 10)}}
        assert http.post("/reset").status_code == 200
        response = http.post("/step", json=big)
        assert response.status_code == 413
        assert response.json()["detail"]["code"] == "MESSAGE_TOO_LARGE"
        chunked = http.post("/step", content=iter([b'{"action": {"message": "', b"y" * (limit + 10), b'"}}']))
        assert chunked.status_code == 413
        assert http.post("/step", json={"action": {"message": "ok"}}).status_code == 200
