"""A Harbor task folder, read: `instruction.md`, `task.toml`, and where the other parts are.

    task/
    ├── instruction.md        what the agent reads
    ├── task.toml             [metadata] [verifier] [agent] [environment] (schema 1.x)
    ├── environment/          Dockerfile (or docker-compose.yaml) and its build context
    ├── tests/test.sh         the verifier: writes /logs/verifier/reward.txt (or reward.json)
    └── solution/solve.sh     the reference solution (Harbor's oracle agent runs it)

Terminal-Bench 2 ships in this format; Terminal-Bench 1's (`task.yaml`, `run-tests.sh`) is not read:
convert it with Harbor's own adapter first.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._limits import check_task_name, check_task_size

__all__ = ["HarborTask", "read_harbor_task"]


class HarborTask(BaseModel):
    """What the importer reads of a Harbor task folder."""

    model_config = ConfigDict(frozen=True)

    folder: Path
    name: str = Field(description="`[task] name`, else the folder's name.")
    instruction: str
    metadata: dict[str, Any] = Field(default_factory=dict, description="`[metadata]`: difficulty, category, tags...")
    verifier: dict[str, Any] = Field(default_factory=dict, description="`[verifier]`: timeout_sec, env, user.")
    agent: dict[str, Any] = Field(default_factory=dict, description="`[agent]`: timeout_sec.")
    environment: dict[str, Any] = Field(default_factory=dict, description="`[environment]`: cpus, memory_mb, ...")
    problems: list[str] = Field(default_factory=list, description="Missing or unreadable parts.")

    @property
    def tests_dir(self) -> Path:
        return self.folder / "tests"

    @property
    def environment_dir(self) -> Path:
        return self.folder / "environment"

    @property
    def solution_dir(self) -> Path:
        return self.folder / "solution"


def read_harbor_task(folder: str | Path) -> HarborTask:
    """Read a Harbor task folder; what is missing or unreadable is listed in `problems`.

    Raises:
        FileNotFoundError: `folder` is not a folder.
        HarborSizeError: the instruction, a file or the folder is over its limit (`_limits.py`).
        HarborNameError: `[task] name` (else the folder's name) is not a Harbor identifier.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder (a Harbor task is a folder with task.toml)")
    check_task_size(folder)  # before anything is read
    problems: list[str] = []
    config: dict[str, Any] = {}
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        hint = " (a Terminal-Bench 1 task: convert it with Harbor's adapter first)" if (folder / "task.yaml").is_file() else ""
        problems.append(f"task.toml is missing{hint}")
    else:
        try:
            config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            problems.append(f"task.toml does not parse: {e}")
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            problems.append(f"{path.relative_to(folder)} is a link out of the task folder: nothing outside it is read")
    instruction = ""
    if (folder / "instruction.md").is_file():
        instruction = (folder / "instruction.md").read_text(encoding="utf-8", errors="replace").strip()
    if not instruction:
        problems.append("instruction.md is missing or empty")

    def table(key: str) -> dict[str, Any]:
        value = config.get(key) or {}
        if not isinstance(value, dict):
            problems.append(f"task.toml: [{key}] is not a table")
            return {}
        return value

    task_table = table("task")
    name = task_table.get("name") or folder.resolve().name
    check_task_name(folder, name if isinstance(name, str) else repr(name))
    return HarborTask(
        folder=folder,
        name=name,
        instruction=instruction,
        metadata=table("metadata"),
        verifier=table("verifier"),
        agent=table("agent"),
        environment=table("environment"),
        problems=problems,
    )
