"""`GET /metrics`: Prometheus text that counts what really happened on a real port."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from openenv_sdk import EnvClient, Environment, ServerConfig, create_app, tool
from openenv_sdk.testing import serve_app
from tests.fixtures.servers import wait_until


class CounterEnvironment(Environment):
    """Adds numbers; one tool always fails."""

    total = 0

    @tool
    def add(self, n: int) -> int:
        """Add n to the total."""
        self.total += n
        return self.total

    @tool
    def boom(self) -> str:
        """Fail."""
        raise RuntimeError("boom")


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_sessions_steps_and_tool_calls_are_counted() -> None:
    with serve_app(create_app(CounterEnvironment)) as url:
        with EnvClient(url, env_cls=CounterEnvironment) as env:
            env.reset()
            env.step({"tool": "add", "arguments": {"n": 2}})
            env.step({"tool": "boom", "arguments": {}})
            env.step({"tool": "no_such_tool_" + "x" * 40, "arguments": {}})
            env.call_tool("add", n=3)  # over MCP
            during = scrape(url)
        after = scrape(url)
    assert during[("openenv_sessions_active", ())] == 1
    assert during[("openenv_sessions_opened_total", (("kind", "ws"),))] == 1
    assert during[("openenv_resets_total", (("outcome", "ok"),))] == 1
    assert during[("openenv_steps_total", (("outcome", "ok"),))] == 3
    assert during[("openenv_tool_calls_total", (("outcome", "ok"), ("tool", "add")))] == 2
    assert during[("openenv_tool_calls_total", (("outcome", "execution_error"), ("tool", "boom")))] == 1
    assert during[("openenv_tool_calls_total", (("outcome", "tool_not_found"), ("tool", "<unknown>")))] == 1
    assert during[("openenv_call_duration_seconds_count", (("call", "tool"),))] == 4
    assert during[("openenv_tool_call_duration_seconds_count", (("tool", "add"),))] == 2
    assert after[("openenv_sessions_active", ())] == 0
    assert after[("openenv_sessions_closed_total", (("kind", "ws"), ("reason", "closed")))] == 1


def test_refused_calls_and_reaped_sessions_are_counted() -> None:
    app = create_app(CounterEnvironment, config=ServerConfig(unreset_grace_s=0.2))
    with serve_app(app) as url, httpx.Client(base_url=url) as http:
        session = http.post("/sessions").json()["session_id"]
        assert http.post("/step", json={"action": {"tool": "add", "arguments": {"n": 1}}},
                         headers={"X-OpenEnv-Session": session}).status_code == 409  # fmt: skip
        assert wait_until(lambda: scrape(url).get(("openenv_sessions_active", ())) == 0, timeout_s=10)
        seen = scrape(url)
    assert seen[("openenv_steps_total", (("outcome", "not_reset"),))] == 1
    assert seen[("openenv_sessions_closed_total", (("kind", "http"), ("reason", "reaped")))] == 1


def test_the_orchestrator_token_guards_metrics() -> None:
    app = create_app(CounterEnvironment, config=ServerConfig(orchestrator_token="s3cret"))
    with serve_app(app) as url:
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert scrape(url, Authorization="Bearer s3cret")[("openenv_sessions_active", ())] == 0
