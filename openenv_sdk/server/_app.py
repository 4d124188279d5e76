"""`create_app(EnvClass)`: the ASGI application that serves one environment class."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..environment import Environment
from ..errors import EnvironmentDefinitionError
from ..types import ErrorCode, MetadataResponse, SchemaResponse
from ._http import protocol_error_response, router
from ._limits import BodyLimitMiddleware
from ._mcp_endpoint import McpEndpoint, warm_up_mcp
from ._protocol import ProtocolError
from ._session import SessionManager
from ._ws import serve_websocket

__all__ = ["ServerConfig", "ServerState", "create_app"]


class ServerConfig(BaseModel):
    """How a server holds sessions. Every field has a finite default."""

    model_config = ConfigDict(extra="forbid")

    max_sessions: int = Field(default=1024, ge=1, description="Sessions held at once; more get CAPACITY_REACHED.")
    idle_timeout_s: float | None = Field(
        default=600.0, gt=0, description="Close a session after this long without a message; None never does."
    )
    tool_timeout_s: float = Field(default=60.0, gt=0, description="The most one tool call may take.")
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="Largest accepted request body.")
    max_workers: int = Field(default=64, ge=1, description="Threads that run blocking sync environment code.")
    web: bool = Field(default=False, description="Serve the browser playground at `/web`.")


@dataclass
class ServerState:
    """What every route handler reads: the class, its schemas, the sessions."""

    env_cls: type[Environment[Any, Any, Any]]
    config: ServerConfig
    sessions: SessionManager
    metadata: MetadataResponse
    schema: SchemaResponse


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
        config: session limits and timeouts; see `ServerConfig`.
        readme: shown as `readme_content` in `/metadata`.

    Raises:
        EnvironmentDefinitionError: `env` is not an `Environment` subclass.
    """
    if not (isinstance(env, type) and issubclass(env, Environment)):
        raise EnvironmentDefinitionError(f"create_app needs an Environment subclass, got {env!r}")
    config = config or ServerConfig()
    max_sessions = config.max_sessions if env.SUPPORTS_CONCURRENT_SESSIONS else 1
    sessions = SessionManager(
        factory or env,
        max_sessions=max_sessions,
        idle_timeout_s=config.idle_timeout_s,
        tool_timeout_s=config.tool_timeout_s,
        max_workers=config.max_workers,
    )
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

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sessions.start_reaper()
        # Import the official MCP server in the background: /health answers meanwhile.
        warm = asyncio.get_running_loop().run_in_executor(None, warm_up_mcp)
        try:
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
    app.include_router(router)

    async def websocket_endpoint(websocket: WebSocket) -> None:
        await serve_websocket(websocket, state)

    app.router.routes.append(WebSocketRoute("/ws", websocket_endpoint))
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"]))
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_message_bytes)
    app.add_exception_handler(ProtocolError, protocol_error_response)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    if config.web:
        from ._web import mount_playground

        mount_playground(app)
    return app


def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    if any(e["type"] == "json_invalid" for e in errors):
        error = ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON body: {errors[0]['msg']}")
    else:
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        error = ProtocolError(ErrorCode.VALIDATION_ERROR, f"Invalid request: {where}", details={"errors": errors})
    return JSONResponse(status_code=error.http_status, content={"detail": error.payload()})
