"""HTTP routes of the checkpoint verbs (orchestrator-only; never MCP tools): `POST /checkpoint`,
`POST /restore` and `DELETE /checkpoints/{handle}`. The logic is `_snapshots.py`'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from ..snapshots import CheckpointInfo, RestoredInfo, RestoreRequest
from . import _snapshots
from ._http import _bind, _require_session, _session_id, _state
from ._protocols import CONNECTION_KEY

__all__ = ["router"]

router = APIRouter()


@router.post("/checkpoint", response_model=CheckpointInfo, tags=["checkpoints"])
async def checkpoint(request: Request) -> Any:
    """Keep the session's episode (environment state and workspace) under a new opaque handle."""
    return await _snapshots.checkpoint(_require_session(request), _state(request), None)


@router.post("/restore", response_model=RestoredInfo, tags=["checkpoints"])
async def restore(request: Request, body: RestoreRequest) -> Any:
    """Continue a checkpoint's episode: in the session named (its episode is replaced), or without
    one in a new session, named in the `X-OpenEnv-Session` header and cookie."""
    state = _state(request)
    if _session_id(request):
        session = _require_session(request)
        info = await _snapshots.restore(session, state, body.model_dump())
    else:
        session = await state.sessions.create("http")
        try:
            info = await _snapshots.restore(session, state, body.model_dump())
        except BaseException:
            await state.sessions.close(session.id)
            raise
        state.sessions.bind_to_connection(session, request.scope.get(CONNECTION_KEY))
    reply = JSONResponse(info)
    _bind(reply, session)
    return reply


@router.delete("/checkpoints/{handle}", status_code=204, tags=["checkpoints"])
async def drop(handle: str, request: Request) -> Response:
    """Forget a checkpoint and remove its files."""
    await _snapshots.drop_checkpoint(_state(request), {"handle": handle})
    return Response(status_code=204)
