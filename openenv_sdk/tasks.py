"""Task records: what an environment declares through `Environment.tasks()`, and the Task API serves.

An environment with a task set (files in its folder, a word list, a dataset) lists it once::

    class CodingEnvironment(Environment[...]):
        @classmethod
        def tasks(cls) -> list[TaskRecord]:
            return [TaskRecord(id=t.id, split="train", title=t.title, prompt=t.prompt) for t in load_tasks()]

and the server answers OpenEnv 0.10's Task API (`GET /list_environments`, `GET /{env}/splits`,
`POST /{env}/tasks | num_tasks | task | task_range`) from it; the clients' `splits()`, `tasks()`
and `task()` read it. A record holds public fields only: the answer, the tests and any other
hidden data never go in one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._suggest import did_you_mean

__all__ = ["ServedTask", "SplitType", "TaskIndex", "TaskRecord", "TaskSplit", "records_from_task_provider"]

SplitType = Literal["train", "validation", "test"]


class TaskRecord(BaseModel):
    """One task, as the Task API serves it. Extra keyword fields (title, prompt, difficulty, ...)
    are kept and served as they are; they must be JSON values and public."""

    model_config = ConfigDict(extra="allow", frozen=True)

    if TYPE_CHECKING:
        # extra="allow": the extra keyword fields are the API; the signature mypy derives from
        # the declared fields alone would refuse `TaskRecord(id=..., title=...)`.
        def __init__(self, *, id: str, split: str = ..., reset_kwargs: dict[str, Any] = ..., **extra: Any) -> None: ...

    id: str = Field(min_length=1, description="Unique among the environment's tasks, whatever the split.")
    split: str = Field(default="train", min_length=1, description="The split the task belongs to.")
    reset_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of `reset` that start this task; `{'task_id': id}` when not given.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_reset_kwargs(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("reset_kwargs") and "id" in data:
            data = {**data, "reset_kwargs": {"task_id": data["id"]}}
        return data


class ServedTask(TaskRecord):
    """A task as a client reads it from the Task API: the record and its position in its split."""

    index: int = Field(ge=0, description="Position of the task in its split.")


class TaskSplit(BaseModel):
    """One split, as `GET /{env}/splits` serves it (OpenEnv's `{"name", "type"}`, plus a count)."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: SplitType = Field(description="`train`, `validation` or `test`: the name when it is one, else `validation`.")
    num_tasks: int = Field(ge=0)


def _split_type(name: str) -> SplitType:
    # OpenEnv 0.10's rule (`http_server._normalize_split`).
    return name if name in ("train", "validation", "test") else "validation"  # type: ignore[return-value]


class TaskIndex:
    """An environment's tasks by split and position, in the order `tasks()` gave them.

    Raises:
        ValueError: two records share an id. Lookups raise `LookupError` with the known names.
    """

    def __init__(self, records: Iterable[TaskRecord]) -> None:
        self._by_split: dict[str, list[TaskRecord]] = {}
        self._by_id: dict[str, tuple[int, TaskRecord]] = {}
        for record in records:
            if not isinstance(record, TaskRecord):
                raise TypeError(f"tasks() must return TaskRecord objects, got {type(record).__name__}")
            if record.id in self._by_id:
                raise ValueError(f"two tasks have the id {record.id!r}: ids must be unique across splits")
            rows = self._by_split.setdefault(record.split, [])
            self._by_id[record.id] = (len(rows), record)
            rows.append(record)

    def splits(self) -> list[TaskSplit]:
        """Every split, in the order of its first task."""
        return [TaskSplit(name=n, type=_split_type(n), num_tasks=len(rows)) for n, rows in self._by_split.items()]

    def _rows(self, split: str) -> list[TaskRecord]:
        if split not in self._by_split:
            known = ", ".join(repr(s) for s in self._by_split) or "none"
            raise LookupError(f"unknown split {split!r}.{did_you_mean(split, self._by_split)} Splits: {known}")
        return self._by_split[split]

    def num_tasks(self, split: str) -> int:
        return len(self._rows(split))

    def task(self, split: str, index: int) -> dict[str, Any]:
        """The task at `index` (0-based, no negative indices) of `split`, as served."""
        rows = self._rows(split)
        if not 0 <= index < len(rows):
            raise LookupError(f"index {index} is out of range: split {split!r} has tasks 0 to {len(rows) - 1}")
        return _served(index, rows[index])

    def task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        """Tasks `[start, stop)` of `split`, with Python slice bounds (as OpenEnv's `get_task_range`)."""
        rows = self._rows(split)
        positions = range(len(rows))[slice(start, stop)]
        return [_served(i, rows[i]) for i in positions]

    def by_id(self, task_id: str) -> dict[str, Any]:
        """The task with this id, whatever its split."""
        if task_id not in self._by_id:
            raise LookupError(f"unknown task id {task_id!r}.{did_you_mean(task_id, self._by_id)}")
        index, record = self._by_id[task_id]
        return _served(index, record)


def _served(index: int, record: TaskRecord) -> dict[str, Any]:
    return {"index": index, **record.model_dump(mode="json")}


def records_from_task_provider(env: Any) -> list[TaskRecord]:
    """The tasks of an environment written for OpenEnv's `TaskProvider` (`list_splits()` and
    `list_tasks(split)`, sync or async), as records: a task's `id` is kept (else `{split}-{index}`),
    its other fields become the record's, and it starts with `reset(split=..., index=...)`, as
    OpenEnv's Task API guide says."""
    records = []
    for split in _wait(env.list_splits()):
        name = _split_name(split)
        for i, task in enumerate(_wait(env.list_tasks(name))):
            if isinstance(task, BaseModel):
                task = task.model_dump(mode="json")
            data = dict(task) if isinstance(task, Mapping) else {"task": task}
            task_id = data.pop("id", None)
            for key in ("index", "split", "reset_kwargs"):
                data.pop(key, None)
            records.append(
                TaskRecord(
                    id=str(task_id) if task_id is not None else f"{name}-{i}",
                    split=name,
                    reset_kwargs={"split": name, "index": i},
                    **data,
                )
            )
    return records


def _wait(value: Any) -> Any:
    return asyncio.run(value) if inspect.iscoroutine(value) else value


def _split_name(split: Any) -> str:
    if isinstance(split, BaseModel):
        split = split.model_dump()
    if isinstance(split, Mapping):
        return str(split["name"])
    return str(split)
