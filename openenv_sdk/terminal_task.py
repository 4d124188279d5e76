"""The terminal environment's task format: `tasks/<id>/task.yaml` (with optional `files/` and
`setup.sh` beside it). The one owner: `environments/terminal` reads its tasks through
`TerminalTaskSpec`, and `openenv harbor import` writes them through `task_yaml`, so an imported
task is one the environment loads.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CATEGORIES",
    "DIFFICULTIES",
    "TASK_ENV_NAMES",
    "TASK_ID_PATTERN",
    "TASK_IMAGE_ENV",
    "Category",
    "Difficulty",
    "TerminalTaskSpec",
    "task_yaml",
]

Category = Literal["files", "text", "config", "git", "scripting", "permissions", "archives"]
CATEGORIES: tuple[str, ...] = get_args(Category)
Difficulty = Literal["easy", "medium", "hard"]
DIFFICULTIES: tuple[str, ...] = get_args(Difficulty)
TASK_ID_PATTERN = r"^[a-z0-9][a-z0-9_]*$"
"""A task id, the name of its folder under `tasks/`: lowercase letters, digits and `_`."""
TASK_IMAGE_ENV = "OPENENV_TERMINAL_TASK_IMAGE"
"""Set (to the task's id) in the image built for a task with `image: true`: the server in that
image may play that task; any other server refuses it."""
TASK_ENV_NAMES = "OPENENV_TERMINAL_TASK_ENV"
"""Set in a task's own image: the names of the ENV its Dockerfile and compose file set
(comma-separated), which the agent's shell gets there."""


class TerminalTaskSpec(BaseModel):
    """One `task.yaml`: what the agent is asked, and how its workspace starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(min_length=1, description="A few words.")
    category: Category
    difficulty: Difficulty
    workdir: str | None = Field(
        default=None,
        pattern=r"^/[A-Za-z0-9._/-]+$",
        description="Where the workspace appears in the sandbox, in the agent's shell and in the check "
        "(a Harbor task's WORKDIR, such as /app); default: its own path.",
    )
    harbor: bool = Field(
        default=False,
        description="Imported from a Harbor task (`openenv harbor import`): during the check, the check "
        "files' `tests/` folder is at /tests and /logs is writable, as Harbor's verifier expects.",
    )
    image: bool = Field(
        default=False,
        description="The task brings its own image (`environment/Dockerfile` beside `task.yaml`, built on the "
        "environment's server image by `openenv harbor build`): only a server in that image plays it, and "
        "its workspace starts as a copy of the image's `workdir`.",
    )
    prompt: str = Field(min_length=1, description="What the agent is asked to do, as it reads it.")


class _Dumper(yaml.SafeDumper):
    pass


# Multi-line strings (the prompt) as `|` blocks, readable and diffable.
_Dumper.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)


def task_yaml(spec: TerminalTaskSpec, *, header: str = "") -> str:
    """`spec` as the text of a `task.yaml` (fields left at their defaults omitted), after `header`
    (comment lines, each starting with `#`).

    Raises:
        ValueError: `header` is not comment lines (a line that does not start with `#`, or holds a
            character YAML could read as a line break).
    """
    if header and (
        not header.endswith("\n")
        or any(not line.startswith("#") or not line.isprintable() for line in header[:-1].split("\n"))
    ):
        raise ValueError(f"header must be comment lines, each starting with '#', got {header!r}")
    fields: dict[str, Any] = spec.model_dump(mode="json", exclude_defaults=True)
    return header + yaml.dump(fields, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
