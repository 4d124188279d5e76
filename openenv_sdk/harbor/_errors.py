"""The importer's errors.

    HarborImportError          a task that cannot be mapped; `problems` lists every reason
    ├── HarborNameError        `[task] name` (or the folder's name) breaks `TASK_NAME_PATTERN`
    ├── HarborSizeError        the instruction, a file or the whole folder is over its limit
    └── HarborComposeError     environment/docker-compose.yaml uses what the image builder does not support

`HarborImportError` is a `ValueError` (bad input), kept outside the SDK's `OpenEnvError` tree:
it is raised before anything runs. The narrower ones are raised at once, before the rest of
the task is read (a 200 MiB instruction is never loaded, a name that would inject lines into a
generated file never reaches one).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import OpenEnvError

__all__ = ["HarborComposeError", "HarborImportError", "HarborNameError", "HarborSizeError"]


class HarborImportError(OpenEnvError, ValueError):
    """A Harbor task that cannot be imported; `problems` says every reason."""

    def __init__(self, source: Path, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"cannot import the Harbor task {source}:\n" + "\n".join(f"- {p}" for p in problems))


class HarborNameError(HarborImportError):
    """The task's name is not a Harbor identifier (`org/name`): `name` and the `pattern` it breaks."""

    def __init__(self, source: Path, name: str, pattern: str, rule: str) -> None:
        self.name = name
        self.pattern = pattern
        super().__init__(source, [f"task name {name!r}: {rule} (pattern {pattern})"])


class HarborSizeError(HarborImportError):
    """Part of the task is over a limit: `what` (a path, or `the task folder`), its `size` and the `limit`."""

    def __init__(self, source: Path, what: str, size: int, limit: int, unit: str = "bytes") -> None:
        self.what = what
        self.size = size
        self.limit = limit
        super().__init__(source, [f"{what} is {size} {unit}; the limit is {limit} {unit} (docs/harbor.md, Limits)"])


class HarborComposeError(HarborImportError):
    """The task's compose file uses keys or values outside the supported subset; `keys` names them."""

    def __init__(self, source: Path, keys: list[str], problems: list[str]) -> None:
        self.keys = keys
        super().__init__(source, problems)
