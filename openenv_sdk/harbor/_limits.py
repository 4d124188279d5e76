"""What a Harbor task may be, checked before anything of it is read: its name and its sizes.

A task's name ends up in generated files (a comment of `task.yaml` and `check.sh`) and in
reports; a task's files end up in the environment's image and in every episode's workspace.
So a name must be a Harbor identifier (`org/name`, letters, digits, `.`, `_`, `-`), and the
folder is measured with `lstat` (links not followed, nothing read) against the limits below.
The generated files quote what they embed regardless (`yaml.safe_dump`, `shlex.quote`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._errors import HarborNameError, HarborSizeError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_INSTRUCTION_BYTES",
    "MAX_NAME_CHARS",
    "MAX_TASK_BYTES",
    "MAX_TASK_FILES",
    "TASK_NAME_PATTERN",
    "check_task_name",
    "check_task_size",
    "one_line",
]

TASK_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"
"""A Harbor task identifier: `name` or `org/name` (`[task] name`), else the folder's name."""
MAX_NAME_CHARS = 128
MAX_INSTRUCTION_BYTES = 256 * 1024
"""instruction.md: Terminal-Bench 2's longest are a few KiB; the prompt goes to the agent every episode."""
MAX_FILE_BYTES = 32 * 1024 * 1024
"""Any one file of the task folder (a data file the Dockerfile copies into the workspace)."""
MAX_TASK_BYTES = 128 * 1024 * 1024
"""The whole task folder: it is copied into the environment (or built into its image)."""
MAX_TASK_FILES = 10_000
"""Entries in the task folder (files, folders and links)."""


def check_task_name(source: Path, name: str) -> None:
    """Raise `HarborNameError` unless `name` is a Harbor identifier of at most `MAX_NAME_CHARS`."""
    if len(name) > MAX_NAME_CHARS:
        raise HarborNameError(
            source, name[:MAX_NAME_CHARS] + "...", TASK_NAME_PATTERN, f"longer than {MAX_NAME_CHARS} characters"
        )
    if not re.fullmatch(TASK_NAME_PATTERN, name):
        raise HarborNameError(
            source, name, TASK_NAME_PATTERN,
            "use `name` or `org/name` with letters, digits, '.', '_' and '-' only (no spaces, newlines or quotes)",
        )  # fmt: skip


def check_task_size(folder: Path) -> None:
    """Raise `HarborSizeError` at the first part of `folder` over its limit (sizes from `lstat`)."""
    instruction = folder / "instruction.md"
    if instruction.is_file() and not instruction.is_symlink():
        size = instruction.stat().st_size
        if size > MAX_INSTRUCTION_BYTES:
            raise HarborSizeError(folder, "instruction.md", size, MAX_INSTRUCTION_BYTES)
    total = count = 0
    for root, dirs, files in os.walk(folder):  # links to folders are listed, never entered
        for name in [*dirs, *files]:
            count += 1
            if count > MAX_TASK_FILES:
                raise HarborSizeError(folder, "the task folder", count, MAX_TASK_FILES, unit="entries")
            path = Path(root, name)
            size = path.lstat().st_size
            if size > MAX_FILE_BYTES:
                raise HarborSizeError(folder, path.relative_to(folder).as_posix(), size, MAX_FILE_BYTES)
            total += size
            if total > MAX_TASK_BYTES:
                raise HarborSizeError(folder, "the task folder", total, MAX_TASK_BYTES)


def one_line(text: str) -> str:
    """`text` as it may stand in a comment line of a generated file: itself when every character
    is printable (no line break of any kind), else its escaped `ascii()` form."""
    return text if text.isprintable() else ascii(text)
