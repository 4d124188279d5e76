"""OpenTelemetry traces (`openenv_sdk.tracing`): one trace from the client through a real server
on a real port into the sandbox, carried by `traceparent`; off by default, and then free.

Spans are read from the OpenTelemetry SDK's in-memory exporter. The server runs in a thread of
this process, so its spans reach the same exporter; they join the client's trace only through
the trace context on the wire (another thread has none of the client's context).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.client.streamable_http  # noqa: F401  (imported here, not first by two threads at once)
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openenv_sdk import create_app, grade, tracing
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import load_environment
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = ROOT / "environments" / "terminal"
ECHO = ROOT / "environments" / "echo"

_exporter = InMemorySpanExporter()


class _WhileTesting(SimpleSpanProcessor):
    """Exports only during a test of this module: the process's tracer provider is set once and
    for good, and the mcp SDK traces every later test's MCP calls through it."""

    active = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            super().on_end(span)


_processor = _WhileTesting(_exporter)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on, into the in-memory exporter."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_processor)
        trace.set_tracer_provider(provider)
    monkeypatch.setenv(tracing.ENABLE_ENV, "1")
    assert tracing.refresh()
    _exporter.clear()
    _processor.active = True
    try:
        yield _exporter
    finally:
        _processor.active = False
        monkeypatch.delenv(tracing.ENABLE_ENV)
        assert not tracing.refresh()


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        out.setdefault(span.name, []).append(span)
    return out


def _parent(span: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    wanted = span.parent.span_id if span.parent else None
    return next((s for s in finished if s.context.span_id == wanted), None)


def _ancestors(span: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> list[str]:
    names, current = [], _parent(span, finished)
    while current is not None:
        names.append(current.name)
        current = _parent(current, finished)
    return names


def test_one_trace_from_the_client_through_the_server_into_the_sandbox(spans: InMemorySpanExporter) -> None:
    sys.path.insert(0, str(TERMINAL / "tests"))
    from terminal_testkit import terminal_grader  # the grader, under a name of its own

    tracer = trace.get_tracer("a-trainer")
    with serve_app(create_app(load_environment(TERMINAL).env_cls)) as url:
        with GenericEnvClient(url) as env, tracer.start_as_current_span("episode") as episode:
            env.reset(task_id="git_revert")  # its setup.sh runs in the sandbox
            assert env.call_tool("bash", command="git -C repo log --oneline | wc -l").content[0].text.startswith("4")
            assert env.state()["task_id"] == "git_revert"
            assert env.tasks("train")[0].id == "clean_tmp_files"  # the Task API, over HTTP
            score = grade(terminal_grader.TerminalGrader(), env)
    assert score.value == 0.0
    finished = spans.get_finished_spans()
    names = _by_name(finished)
    trace_id = episode.get_span_context().trace_id
    # one trace: every span of ours, client, server (another thread) and sandbox (the mcp SDK's
    # own spans of its session's lifetime, `initialize` and the stream, are traces of their own)
    # (nor are `openenv.ws session`, the connection's first message, sent before the client knows
    # the server takes a traceparent, which OpenEnv's servers would refuse, and the environment's
    # `close()` when the connection ends)
    ours = [s for s in finished if s.name.startswith("openenv.") and s.name not in ("openenv.ws session", "openenv.env close()")]
    assert {s.context.trace_id for s in ours} == {trace_id}, [s.name for s in ours if s.context.trace_id != trace_id]

    reset_ws = names["openenv.ws reset"][0]
    assert reset_ws.kind is trace.SpanKind.SERVER
    assert _parent(reset_ws, finished) is names["openenv.client.reset"][0]  # through the envelope's traceparent
    assert _ancestors(names["openenv.env reset()"][0], finished) == ["openenv.ws reset", "openenv.client.reset", "episode"]
    setup = next(s for s in names["openenv.sandbox.run"] if _parent(s, finished).name == "openenv.env reset()")
    assert setup.attributes["process.exit.code"] == 0

    tool = names["openenv.env tool 'bash'"][0]  # through the mcp SDK's `_meta` traceparent
    assert "openenv.client.call_tool" in _ancestors(tool, finished)
    command = next(s for s in names["openenv.sandbox.run"] if _parent(s, finished) is tool)
    assert command.attributes["process.executable.name"] == "bash"
    assert command.attributes["openenv.sandbox.isolation"] == "bubblewrap"

    checks = names["openenv.env run_checks()"][0]  # the grader's orchestrator call
    assert _ancestors(checks, finished)[:3] == ["openenv.ws call", "openenv.client.call", "openenv.grade"]
    assert names["openenv.grade"][0].attributes["openenv.reward"] == 0.0
    assert any(_parent(s, finished) is checks for s in names["openenv.sandbox.run"])

    http = [s for s in finished if s.name.startswith("openenv.http ")]
    assert {s.name for s in http} == {"openenv.http GET /list_environments", "openenv.http POST /terminal/tasks"}
    assert {s.attributes["http.response.status_code"] for s in http} == {200}
    assert {_parent(s, finished).name for s in http} == {"episode"}  # through the traceparent header
    assert {"openenv.ws state", "openenv.client.state"} <= set(names)


@pytest.mark.anyio
async def test_the_async_client_carries_the_trace_too(spans: InMemorySpanExporter) -> None:
    from openenv_sdk.client import AsyncGenericEnvClient

    with serve_app(create_app(load_environment(ECHO).env_cls)) as url:
        async with AsyncGenericEnvClient(url) as env:
            with trace.get_tracer("a-trainer").start_as_current_span("episode") as episode:
                await env.reset()
                await env.step({"message": "hi"})
                assert (await env.call_tool("echo", message="hi")).content[0].text == "hi"
    finished = spans.get_finished_spans()
    names = _by_name(finished)
    assert _ancestors(names["openenv.env step()"][0], finished) == ["openenv.ws step", "openenv.client.step", "episode"]
    assert "openenv.client.call_tool" in _ancestors(names["openenv.env tool 'echo'"][0], finished)
    assert names["openenv.env tool 'echo'"][0].context.trace_id == episode.get_span_context().trace_id


def test_a_server_span_without_trace_context_starts_its_own_trace(spans: InMemorySpanExporter) -> None:
    with serve_app(create_app(load_environment(ECHO).env_cls)) as url:
        with GenericEnvClient(url) as env:
            env.reset()
            env.step({"message": "hi"})
    finished = spans.get_finished_spans()
    names = _by_name(finished)
    for verb in ("reset", "step"):
        client, server = names[f"openenv.client.{verb}"][0], names[f"openenv.ws {verb}"][0]
        assert client.parent is None  # no ambient span: each request is a trace of its own
        assert server.context.trace_id == client.context.trace_id and _parent(server, finished) is client


def test_the_envelope_carries_traceparent_only_to_our_servers(spans: InMemorySpanExporter) -> None:
    client = GenericEnvClient("http://127.0.0.1:9")  # never connected
    with trace.get_tracer("t").start_as_current_span("x") as current:
        client._send_ids = True
        _, text = client._encode("reset", {})
        carrier = json.loads(text)
        context = current.get_span_context()
        assert carrier["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
        client._send_ids = False  # an OpenEnv server: its envelope refuses unknown fields
        assert json.loads(client._encode("reset", {})[1]) == {"type": "reset", "data": {}}


def _python(code: str, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENENV_OTEL", "OTEL_"))}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
        env={**environ, **env}, cwd=ROOT, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_off_by_default_nothing_of_the_sdk_is_imported_and_nothing_is_sent() -> None:
    found = _python(
        """
        import json, sys
        from openenv_sdk import create_app, tracing
        from openenv_sdk.client import GenericEnvClient
        from openenv_sdk.loader import load_environment
        from openenv_sdk.testing import serve_app
        app = create_app(load_environment("environments/echo").env_cls)
        with serve_app(app) as url, GenericEnvClient(url) as env:
            env.reset()
            env.step({"message": "hi"})
            assert env.call_tool("echo", message="hi").content[0].text == "hi"
            sent = json.loads(env._encode("step", {"message": "x"})[1])
        print(json.dumps({
            "enabled": tracing.enabled(),
            "sdk": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk") or "exporter" in m),
            "tracer": tracing._tracer is not None,
            "middleware": "TracingMiddleware" in [m.cls.__name__ for m in app.user_middleware],
            "sent": sorted(sent),
        }))
        """
    )
    assert found == {
        "enabled": False, "sdk": [], "tracer": False,
        "middleware": False, "sent": ["data", "id", "type"],
    }  # fmt: skip


def test_otel_sdk_disabled_turns_it_off_again() -> None:
    found = _python(
        "import json; from openenv_sdk import tracing; print(json.dumps({'enabled': tracing.enabled()}))",
        OPENENV_OTEL="1", OTEL_SDK_DISABLED="true",
    )
    assert found == {"enabled": False}


def test_the_console_exporter_names_the_service() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENENV_OTEL", "OTEL_"))}
    code = (
        "from openenv_sdk import tracing\n"
        "with tracing.span('openenv.test', attributes={'a': 1}): pass\n"
        "from opentelemetry import trace\ntrace.get_tracer_provider().force_flush()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True,
        env={**environ, "OPENENV_OTEL": "1", "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "trainer-7"},
    )  # fmt: skip
    span = json.loads(out.stdout[out.stdout.index("{"):])
    assert span["name"] == "openenv.test" and span["attributes"] == {"a": 1}
    assert span["resource"]["attributes"]["service.name"] == "trainer-7"


def test_spans_reach_an_otlp_collector_over_http() -> None:
    """The default exporter (`OTEL_TRACES_EXPORTER` unset: OTLP over HTTP), to a receiver on a real
    port that decodes what it gets as the OTLP protobuf a collector reads."""
    import http.server
    import threading

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, str, bytes]] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENENV_OTEL", "OTEL_"))}
        code = (
            "from openenv_sdk import tracing\n"
            "with tracing.span('openenv.client.reset', kind='client', attributes={'openenv.session_id': 's1'}):\n"
            "    pass\n"
            "from opentelemetry import trace\ntrace.get_tracer_provider().shutdown()\n"
        )
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True,
            env={**environ, "OPENENV_OTEL": "1", "OTEL_SERVICE_NAME": "trainer-7",
                 "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}"},
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert [(path, kind) for path, kind, _ in received] == [("/v1/traces", "application/x-protobuf")]
    request = ExportTraceServiceRequest.FromString(received[0][2])
    (resource,) = request.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
    (span,) = [s for scope in resource.scope_spans for s in scope.spans]
    assert (service, span.name, span.kind) == ("trainer-7", "openenv.client.reset", 3)  # 3: SPAN_KIND_CLIENT
    assert {a.key: a.value.string_value for a in span.attributes} == {"openenv.session_id": "s1"}
