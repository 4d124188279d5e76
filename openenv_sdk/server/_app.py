"""`create_app(EnvClass)`: the ASGI application that serves one environment class."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import SecretStr
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from .. import tracing
from ..environment import Environment
from ..errors import EnvironmentDefinitionError
from ..types import ErrorCode, MetadataResponse, SchemaResponse
from ._auth import OrchestratorAuthMiddleware, RequestIdMiddleware, take_token_from_environ
from ._config import ServerConfig
from ._gc import serving_gc
from ._http import protocol_error_response, router
from ._limits import BodyLimitMiddleware
from ._manager import SessionManager
from ._mcp_endpoint import McpEndpoint, warm_up_mcp
from ._metrics import ServerMetrics
from ._metrics import router as metrics_router
from ._protocol import RequestRefused
from ._protocols import ServerHttpProtocol, ServerWebSocketProtocol
from ._snapshot_routes import router as snapshot_router
from ._state import ServerState
from ._tasks import router as tasks_router
from ._tracing import TracingMiddleware
from ._ws import serve_websocket

__all__ = ["create_app", "uvicorn_limits"]

logger = logging.getLogger("openenv_sdk.server")


def uvicorn_limits(config: ServerConfig) -> dict[str, Any]:
    """uvicorn settings in step with `config`.

    A WebSocket message over `max_message_bytes` is answered with a typed `MESSAGE_TOO_LARGE`
    error naming the limit and the request's id, and the session goes on: one a little over (by
    up to an eighth, at least 64 KiB) is read, a larger one is passed over as it arrives, never
    held (`ServerWebSocketProtocol`). Request headers are limited to 64 KiB and to `header_timeout_s` (`ServerHttpProtocol`);
    bodies by `max_message_bytes`, in the app.

    No per-message compression on WebSockets: each connection's zlib streams cost tens of KiB,
    and freeing them as connections churn left the heap fragmented (RSS grew ~12 MiB per 1,000
    finished sessions and never came back); a step's few hundred bytes of JSON gain nothing.
    """
    slack = max(64 * 1024, config.max_message_bytes // 8)
    return {
        "ws_max_size": config.max_message_bytes + slack,
        "h11_max_incomplete_event_size": 64 * 1024,
        "http": ServerHttpProtocol.with_header_timeout(config.header_timeout_s),
        "ws_per_message_deflate": False,
        "ws": ServerWebSocketProtocol,
    }


class _RedactTokens(logging.Filter):
    """Hides MCP session tokens (`?session=...`) in uvicorn's access log lines."""

    _QUERY = re.compile(r"([?&]session=)[^&\s\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and isinstance(record.args, tuple):
            record.args = tuple(
                self._QUERY.sub(r"\1<redacted>", a) if isinstance(a, str) and "session=" in a else a
                for a in record.args
            )
        return True


def _redact_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactTokens) for f in access.filters):
        access.addFilter(_RedactTokens())


def _sdk_version() -> str:
    try:
        return importlib.metadata.version("openenv-sdk")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def create_app(
    env: type[Environment[Any, Any, Any]],
    *,
    factory: Callable[[], Environment[Any, Any, Any]] | None = None,
    config: ServerConfig | None = None,
    readme: str | None = None,
) -> FastAPI:
    """Build the server for an environment class.

    Args:
        env: the environment class (its models give `/schema`, its `@tool` methods the MCP tools).
        factory: makes one instance per session; defaults to calling `env()`.
        config: session limits, timeouts and the orchestrator token; see `ServerConfig`. Without
            `config.orchestrator_token`, the token is read from `OPENENV_ORCHESTRATOR_TOKEN`;
            that variable is removed from `os.environ` in any case.
        readme: shown as `readme_content` in `/metadata`.

    Raises:
        EnvironmentDefinitionError: `env` is not an `Environment` subclass, or breaks a rule
            of `openenv validate` about the class (`EnvCheckError`, naming each rule and its fix).
    """
    if not (isinstance(env, type) and issubclass(env, Environment)):
        raise EnvironmentDefinitionError(f"create_app needs an Environment subclass, got {env!r}")
    _check_class(env)
    config = config or ServerConfig()
    from_environ = take_token_from_environ()  # removed either way: no child process inherits it
    if config.orchestrator_token is None and from_environ:
        config = config.model_copy(update={"orchestrator_token": SecretStr(from_environ)})
    sessions = SessionManager(config, factory or env, concurrent=env.SUPPORTS_CONCURRENT_SESSIONS)
    state = ServerState(
        env_cls=env,
        config=config,
        sessions=sessions,
        metadata=MetadataResponse(
            name=env.name, description=env.description, version=env.version, readme_content=readme
        ),
        schema=SchemaResponse(
            action=env.action_type.model_json_schema(),
            observation=env.observation_type.model_json_schema(),
            state=env.state_type.model_json_schema(),
            tools=[spec.schema() for spec in env.tool_specs.values()],
        ),
    )
    mcp = McpEndpoint(state)
    state.mcp_sessions = mcp.session_count
    server_metrics = ServerMetrics(state)
    sessions.observer = server_metrics

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sessions.start_reaper()
        # Import the official MCP server in the background: /health answers meanwhile.
        warm = asyncio.get_running_loop().run_in_executor(None, warm_up_mcp)
        try:
            async with serving_gc(config.gc_full_interval_s):
                yield
        finally:
            await mcp.aclose()
            await sessions.stop_reaper()
            await sessions.close_all()
            await warm

    app = FastAPI(
        title=f"{env.name} (openenv-sdk)",
        description=env.description,
        version=_sdk_version(),
        lifespan=lifespan,
    )
    app.state.openenv = state
    app.state.openenv_metrics = server_metrics
    app.include_router(router)
    app.include_router(tasks_router)
    app.include_router(metrics_router)
    app.include_router(snapshot_router)

    async def websocket_endpoint(websocket: WebSocket) -> None:
        await serve_websocket(websocket, state)

    app.router.routes.append(WebSocketRoute("/ws", websocket_endpoint))
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"]))
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_message_bytes, max_json_depth=config.max_json_depth)
    if config.orchestrator_token is not None:
        app.add_middleware(OrchestratorAuthMiddleware, token=config.orchestrator_token.get_secret_value())
    app.add_middleware(RequestIdMiddleware)
    if tracing.enabled():  # outermost: its span covers the whole request
        app.add_middleware(TracingMiddleware)
    _redact_access_log()
    app.add_exception_handler(RequestRefused, protocol_error_response)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    if config.web:
        from ._web import mount_playground

        mount_playground(app)
    return app


def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    if any(e["type"] == "json_invalid" for e in errors):
        error = RequestRefused(ErrorCode.INVALID_JSON, f"Invalid JSON body: {errors[0]['msg']}")
    else:
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        error = RequestRefused(ErrorCode.VALIDATION_ERROR, f"Invalid request: {where}", details={"errors": errors})
    return JSONResponse(status_code=error.http_status, content={"detail": error.payload()})


def _check_class(env: type[Environment[Any, Any, Any]]) -> None:
    """The class rules `openenv validate` and `check_env` run (one rule set): a failed one stops
    the server before it serves anything; advice is logged."""
    # imported here: the checks serve classes through this module
    from ..checks._result import ValidationReport
    from ..checks._static import EnvClass, run_class_checks

    report = ValidationReport(
        target=f"{env.__module__}.{env.__qualname__}", kind="class", checks=list(run_class_checks(EnvClass(env)))
    )
    for result in report.checks:
        if result.status == "warn":
            logger.warning("%s", result.line())
    report.raise_for_failures("create_app: ")

