"""The Task API, wire-compatible with OpenEnv 0.10's (the shape of OpenReward's ORS).

`GET /list_environments`, `GET /{env}/splits`, `POST /{env}/tasks | num_tasks | task | task_range`,
answered from the environment's `tasks()` classmethod (read once, on the first request). `{env}`
is the environment's name or its class name, in any case. Additive: `POST /{env}/task` also takes
`{"id": ...}` in place of a split and an index, and each split carries `num_tasks`.

These are orchestrator routes: with an orchestrator token set, they need it, as reset and step do.
A trainer picks tasks here; the agent has no business listing the test split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool

from ..tasks import TaskIndex, TaskSplit
from ..types import ErrorCode
from ._protocol import RequestRefused

if TYPE_CHECKING:
    from ._state import ServerState

__all__ = ["router"]

router = APIRouter(tags=["tasks"])


class ListTasksRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    split: str = Field(description="Task split name.")


class GetTaskRequest(BaseModel):
    """A task by split and index (OpenEnv's), or by id (this SDK's)."""

    model_config = ConfigDict(extra="forbid")

    split: str | None = Field(default=None, description="Task split name.")
    index: int | None = Field(default=None, description="Task index within the split.")
    id: str | None = Field(default=None, description="A task id, in place of split and index.")

    @model_validator(mode="after")
    def _one_way(self) -> GetTaskRequest:
        by_position = self.split is not None and self.index is not None
        mixed = self.id is not None and (self.split, self.index) != (None, None)
        if by_position == (self.id is not None) or mixed:
            raise ValueError("send either split and index, or id")
        return self


class GetTaskRangeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    split: str = Field(description="Task split name.")
    start: int | None = Field(default=None, description="Inclusive start index.")
    stop: int | None = Field(default=None, description="Exclusive stop index.")


async def _index(request: Request, env_name: str | None) -> TaskIndex:
    state: ServerState = request.app.state.openenv
    if env_name is not None and env_name.lower() not in (state.env_cls.name.lower(), state.env_cls.__name__.lower()):
        raise RequestRefused(
            ErrorCode.VALIDATION_ERROR,
            f"unknown environment {env_name!r}: this server serves {state.env_cls.name!r} (GET /list_environments)",
        )
    index: TaskIndex | None = getattr(request.app.state, "openenv_tasks", None)
    if index is None:  # two first requests at once both read the tasks: harmless, tasks() has no effects
        try:
            index = await run_in_threadpool(lambda: TaskIndex(state.env_cls.tasks()))
        except Exception as e:
            raise RequestRefused(
                ErrorCode.EXECUTION_ERROR, f"{state.env_cls.__name__}.tasks() failed: {type(e).__name__}: {e}"
            ) from e
        request.app.state.openenv_tasks = index
    return index


def _lookup(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except LookupError as e:
        raise RequestRefused(ErrorCode.VALIDATION_ERROR, str(e)) from e


@router.get("/list_environments")
async def list_environments(request: Request) -> list[str]:
    """The environments this server serves: one, by its name."""
    return [request.app.state.openenv.env_cls.name]


@router.get("/{env_name}/splits", response_model=list[TaskSplit])
async def splits(env_name: str, request: Request) -> list[TaskSplit]:
    """The splits, each with its type (`train`, `validation`, `test`) and task count."""
    return (await _index(request, env_name)).splits()


@router.post("/{env_name}/tasks")
async def tasks(env_name: str, body: ListTasksRequest, request: Request) -> dict[str, Any]:
    """Every task of a split."""
    index = await _index(request, env_name)
    return {"tasks": _lookup(index.task_range, body.split), "env_name": request.app.state.openenv.env_cls.name}


@router.post("/{env_name}/num_tasks")
async def num_tasks(env_name: str, body: ListTasksRequest, request: Request) -> dict[str, int]:
    """How many tasks a split has."""
    return {"num_tasks": _lookup((await _index(request, env_name)).num_tasks, body.split)}


@router.post("/{env_name}/task")
async def task(env_name: str, body: GetTaskRequest, request: Request) -> dict[str, Any]:
    """One task, by split and index or by id."""
    index = await _index(request, env_name)
    if body.id is not None:
        return {"task": _lookup(index.by_id, body.id)}
    return {"task": _lookup(index.task, body.split, body.index)}


@router.post("/{env_name}/task_range")
async def task_range(env_name: str, body: GetTaskRangeRequest, request: Request) -> dict[str, Any]:
    """Tasks `[start, stop)` of a split, with Python slice bounds."""
    return {"tasks": _lookup((await _index(request, env_name)).task_range, body.split, body.start, body.stop)}
