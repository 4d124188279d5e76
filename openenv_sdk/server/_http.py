"""HTTP routes: discovery (`/health`, `/metadata`, `/schema`) and stateful reset/step/state.

A session is created by `POST /sessions` or by a `POST /reset` that names none (a reset that
fails leaves no session behind; one made so ends with its client: `unreset_grace_s` after the
connection that made it closed, unless a request on another connection named it); it is named by the `X-OpenEnv-Session` header (or the
`openenv_session` cookie that `/reset` sets, so a cookie-keeping client such as `httpx.Client`
is stateful with no extra code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ..types import ErrorCode, HealthResponse, MetadataResponse, SchemaResponse, SessionInfo, StepResult
from ._protocol import RequestRefused
from ._protocols import CONNECTION_KEY

if TYPE_CHECKING:
    from ._session import Session
    from ._state import ServerState

__all__ = ["SESSION_COOKIE", "SESSION_HEADER", "router"]

SESSION_HEADER = "X-OpenEnv-Session"
SESSION_COOKIE = "openenv_session"

router = APIRouter()


class StepRequest(BaseModel):
    """`POST /step` body (OpenEnv's shape)."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any] = Field(description="The action, as the environment's action schema defines it.")
    timeout_s: float | None = Field(default=None, gt=0, description="Accepted for compatibility; unused.")
    request_id: str | None = Field(default=None, max_length=255, description="Echoed back as X-Request-Id.")


class CallRequest(BaseModel):
    """`POST /call/{name}` body: arguments of an orchestrator-only call."""

    arguments: dict[str, Any] = Field(default_factory=dict)


class CallResponse(BaseModel):
    name: str
    result: Any = None


def _state(request: Request) -> ServerState:
    return request.app.state.openenv


def _session_id(request: Request) -> str | None:
    return request.headers.get(SESSION_HEADER) or request.cookies.get(SESSION_COOKIE)


def _require_session(request: Request) -> Session:
    session_id = _session_id(request)
    if not session_id:
        raise RequestRefused(
            ErrorCode.SESSION_REQUIRED,
            f"No session: send the {SESSION_HEADER} header (from POST /sessions or POST /reset), "
            f"or call POST /reset first with a cookie-keeping client",
        )
    session = _state(request).sessions.get(session_id)
    session.touch()
    if session.connection is not None:
        session.named_on(request.scope.get(CONNECTION_KEY))
    return session


def _bind(response: Response, session: Session) -> None:
    response.headers[SESSION_HEADER] = session.id
    response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="strict")


@router.get("/health", response_model=HealthResponse, tags=["discovery"])
async def health(request: Request) -> HealthResponse:
    """Liveness, with sessions (and those not reset yet), MCP sessions, and abandoned threads
    (sync calls that timed out and still run). `degraded` while new sessions are refused for
    abandoned threads."""
    state = _state(request)
    sessions = state.sessions
    abandoned = sessions.abandoned
    return HealthResponse(
        status="degraded" if abandoned.full else "healthy",
        active_sessions=sessions.active,
        max_sessions=sessions.max_sessions,
        unreset_sessions=sessions.unreset,
        mcp_sessions=state.mcp_sessions(),
        max_mcp_sessions=state.config.max_mcp_sessions,
        abandoned_threads=abandoned.count,
        max_abandoned_threads=abandoned.limit,
        isolation=getattr(request.app.state, "openenv_isolation", None),  # set by `openenv serve` when sandboxed
    )


@router.get("/metadata", response_model=MetadataResponse, response_model_exclude_none=True, tags=["discovery"])
async def metadata(request: Request) -> MetadataResponse:
    """Name, description, version and README of the environment."""
    return _state(request).metadata


@router.get("/schema", response_model=SchemaResponse, tags=["discovery"])
async def schema(request: Request) -> SchemaResponse:
    """JSON Schemas of the action, the observation and the environment's own state, and its tools."""
    return _state(request).schema


@router.post("/sessions", response_model=SessionInfo, status_code=201, tags=["sessions"])
async def create_session(request: Request, response: Response) -> SessionInfo:
    """Create a session; its id names it in later requests, its MCP token binds an agent to it."""
    session = await _state(request).sessions.create("http")
    _bind(response, session)
    return SessionInfo(session_id=session.id, mcp_token=session.mcp_token)


@router.get("/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"])
async def get_session(session_id: str, request: Request) -> SessionInfo:
    """A session's MCP binding."""
    session = _state(request).sessions.get(session_id)
    return SessionInfo(session_id=session.id, mcp_token=session.mcp_token)


@router.delete("/sessions/{session_id}", status_code=204, tags=["sessions"])
async def delete_session(session_id: str, request: Request) -> Response:
    """End a session and close its environment."""
    state = _state(request)
    state.sessions.get(session_id)
    await state.sessions.close(session_id)
    return Response(status_code=204)


@router.post("/reset", response_model=StepResult, tags=["episode"])
async def reset(request: Request, body: dict[str, Any] | None = Body(default=None)) -> Any:
    """Start an episode. Body: `seed`, `episode_id` and task fields. Without a session header a
    new session is created and named in the `X-OpenEnv-Session` header and cookie."""
    state = _state(request)
    session_id = _session_id(request)
    if session_id:
        session = state.sessions.get(session_id)
        if session.connection is not None:
            session.named_on(request.scope.get(CONNECTION_KEY))
        observation = await session.reset(body)
    else:
        session = await state.sessions.create("http")
        try:
            observation = await session.reset(body)
        except BaseException:
            await state.sessions.close(session.id)
            raise
        # made in passing, not by POST /sessions: it ends with its client (see SessionManager)
        state.sessions.bind_to_connection(session, request.scope.get(CONNECTION_KEY))
    reply = JSONResponse(observation)
    _bind(reply, session)
    return reply


@router.post("/step", response_model=StepResult, tags=["episode"])
async def step(request: Request, body: StepRequest) -> Any:
    """Apply one action in the session's episode."""
    session = _require_session(request)
    reply = JSONResponse(await session.step(body.action))
    if body.request_id is not None and "x-request-id" not in request.headers:
        reply.headers["X-Request-Id"] = body.request_id
    return reply


@router.get("/state", tags=["episode"])
async def get_state(request: Request) -> dict[str, Any]:
    """The session's environment state (its own state model, see `/schema`)."""
    return await _require_session(request).state()


@router.post("/close", status_code=204, tags=["episode"])
async def close(request: Request) -> Response:
    """End the session named by the header or cookie."""
    session = _require_session(request)
    await _state(request).sessions.close(session.id)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.post("/call/{name}", response_model=CallResponse, tags=["orchestrator"])
async def call(name: str, request: Request, body: CallRequest | None = None) -> CallResponse:
    """An orchestrator-only call (for graders); never reachable over MCP."""
    session = _require_session(request)
    result = await session.call(name, (body or CallRequest()).arguments)
    return CallResponse(name=name, result=result)


def protocol_error_response(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestRefused)
    return JSONResponse(status_code=exc.http_status, content={"detail": exc.payload()})
