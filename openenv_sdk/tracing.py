"""Optional OpenTelemetry traces across client, server and sandbox; off unless `OPENENV_OTEL=1`.

When on, the SDK makes spans for what it does, and carries the W3C trace context between
processes, so one trace follows an episode from the trainer to the sandbox:

    openenv.client.reset / step / state / call / call_tool / grade     (client, host side)
      -> traceparent: in each WebSocket envelope, in HTTP headers, in MCP's `_meta` (the mcp SDK's own)
    openenv.ws <type>, openenv.http <route>   (server: one span per request)
      openenv.env <what>                      (the environment's code: reset(), tool 'bash', run_checks())
        openenv.sandbox.run                   (each sandboxed command)

Configuration is OpenTelemetry's own: a tracer provider the program has set is used as is
(`opentelemetry.trace.set_tracer_provider`); otherwise the SDK makes one on first use, named by
`OTEL_SERVICE_NAME` (default `openenv-sdk`) and exporting as `OTEL_TRACES_EXPORTER` says (`otlp`,
the default: OTLP over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`; `console`; `none`).
`OTEL_SDK_DISABLED=true` turns it off again. Install `openenv-sdk[otel]`.

Off, every hook here is one environment lookup, and this module imports nothing of
OpenTelemetry (the `mcp` and `fastapi` packages import its API for their own no-op spans).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ["ENABLE_ENV", "enabled", "extract", "inject", "refresh", "set_attributes", "span", "wrap"]

ENABLE_ENV = "OPENENV_OTEL"
"""Set to `1` to trace; anything else (or unset) leaves tracing off."""

TRACER_NAME = "openenv_sdk"
CARRIER_KEYS = ("traceparent", "tracestate")
"""The W3C trace-context fields: HTTP headers, and optional top-level fields of a `/ws` envelope."""

logger = logging.getLogger("openenv_sdk.tracing")
_NO_SPAN = contextlib.nullcontext()
_tracer: Any = None
_lock = threading.Lock()


def _read_env() -> bool:
    return os.environ.get(ENABLE_ENV) == "1" and os.environ.get("OTEL_SDK_DISABLED", "").lower() != "true"


_enabled = _read_env()


def enabled() -> bool:
    """Whether tracing is on: `OPENENV_OTEL=1` and not `OTEL_SDK_DISABLED=true`, as they were at
    import (or at the last `refresh()`)."""
    return _enabled


def refresh() -> bool:
    """Read `OPENENV_OTEL` again (a program that sets it after importing the SDK); returns `enabled()`.
    Servers decide at `create_app`, so set it before making the app."""
    global _enabled
    _enabled = _read_env()
    return _enabled


def span(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Mapping[str, Any] | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (the current span's child, or `parent`'s, a W3C carrier); a no-op when off.

    Args:
        name: the span's name.
        kind: `internal`, `client` or `server`.
        attributes: the span's attributes (None values are left out).
        parent: a carrier (`traceparent`, `tracestate`) received from another process.
    """
    if not enabled():
        return _NO_SPAN
    return _start(name, kind, attributes, parent)


@contextlib.contextmanager
def _start(name: str, kind: str, attributes: Mapping[str, Any] | None, parent: Mapping[str, Any] | None) -> Iterator[Any]:
    from opentelemetry import propagate, trace

    context = propagate.extract(dict(parent)) if parent else None
    kept = {k: v for k, v in (attributes or {}).items() if v is not None}
    with _get_tracer().start_as_current_span(name, context=context, kind=getattr(trace.SpanKind, kind.upper()), attributes=kept) as current:
        yield current


def inject(carrier: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Add the current span's `traceparent` (and `tracestate`) to `carrier`; unchanged when off."""
    if enabled():
        from opentelemetry import propagate

        _get_tracer()
        propagate.inject(carrier)
    return carrier


def extract(carrier: Mapping[str, Any]) -> dict[str, str] | None:
    """The trace-context fields of `carrier` (headers or an envelope), or None when it has none or tracing is off."""
    if not enabled():
        return None
    found = {key: value for key in CARRIER_KEYS if isinstance(value := carrier.get(key), str)}
    return found or None


def wrap(fn: Callable[..., Any], name: str, attributes: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """`fn` in a span named `name`, a child of the current span even when `fn` runs on another
    thread (the server's workers); a coroutine function stays one. Call only when `enabled()`."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            with span(name, attributes=attributes):
                return await fn(*args, **kwargs)

        return run_async
    context = contextvars.copy_context()

    def in_span(*args: Any, **kwargs: Any) -> Any:
        with span(name, attributes=attributes):
            return fn(*args, **kwargs)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return context.copy().run(in_span, *args, **kwargs)

    return run


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set attributes on a span from `span()` (nothing when tracing is off)."""
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        with _lock:
            if _tracer is None:
                from opentelemetry import trace

                if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
                    _configure()
                _tracer = trace.get_tracer(TRACER_NAME)
    return _tracer


def _configure() -> None:
    """A tracer provider from the OTEL_* variables, for a program that set none."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    service = os.environ.get("OTEL_SERVICE_NAME") or "openenv-sdk"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter_name = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if exporter_name == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning(
                "OPENENV_OTEL=1 but the OTLP exporter is not installed: spans are not exported "
                "(pip install 'openenv-sdk[otel]', or OTEL_TRACES_EXPORTER=console)"
            )
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
