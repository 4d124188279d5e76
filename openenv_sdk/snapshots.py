"""Checkpoint, restore and fork of a live episode: the environment's side and the wire's types.

An environment is checkpointed through two optional hooks on `Environment`:

- `snapshot(folder) -> dict`: the episode as JSON data; files it needs (a session's workspace)
  go into `folder`, an empty directory the server owns;
- `restore(data, folder)`: on a fresh instance (or one whose episode is discarded), continue
  that episode exactly where `snapshot` left it.

The defaults cover an environment whose episode is its pydantic `state`, `episode_done` and
plain-data attributes (`default_snapshot` / `default_restore`); one holding a sandbox overrides
both and keeps the sandbox's folders with `pack_folders` / `unpack_folders` (their archive and
its hostile-safe unpacking are `openenv_sdk.workspace_archive`'s, as regrade's are). The server keeps
checkpoints in a store of its own (`openenv_sdk.server._snapshots`) and names each by an opaque
handle; they are orchestrator-only (WebSocket `checkpoint` / `restore`, HTTP `POST /checkpoint`,
`POST /restore`), never MCP tools.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .errors import CheckpointError, OpenEnvError
from .workspace_archive import ArchiveLimits, ArchiveRejected, WorkspaceTooLarge, pack_folders, read_folders

if TYPE_CHECKING:
    from .environment import Environment
    from .sandbox import Sandbox

__all__ = [
    "ArchiveRejected",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointRequest",
    "DropRequest",
    "RestoreRequest",
    "RestoredInfo",
    "SnapshotTooLarge",
    "SnapshotUnsupported",
    "WorkspaceTooLarge",
    "default_restore",
    "default_snapshot",
    "pack_folders",
    "rewrite_text",
    "unpack_folders",
]

SNAPSHOT_FORMAT = 1
"""Bumped when what `default_snapshot` writes changes shape."""


# --- errors ------------------------------------------------------------------------------


class SnapshotUnsupported(OpenEnvError):
    """The environment cannot snapshot this episode (no episode yet, or an attribute that is not
    plain data and no `snapshot` override); the message names what."""


class SnapshotTooLarge(OpenEnvError):
    """The episode's files are over the checkpoint store's bound (bytes or entries)."""


# --- wire types --------------------------------------------------------------------------


class CheckpointRequest(BaseModel):
    """`checkpoint` (WS `data`, HTTP body): nothing is needed; the session named is checkpointed."""

    model_config = {"extra": "forbid"}


class CheckpointInfo(BaseModel):
    """The reply to `checkpoint`: an opaque handle (never a path), and what it holds."""

    handle: str = Field(description="Opaque id of the checkpoint; pass it to `restore`.")
    env: str = Field(description="The environment's name; a handle restores only into the same environment.")
    bytes: int = Field(ge=0, description="Size of the checkpoint's files on the server, in bytes.")
    step_count: int | None = Field(default=None, description="The episode's step count when checkpointed, if its state has one.")


class RestoreRequest(BaseModel):
    """`restore` (WS `data`, HTTP body): the handle to continue from."""

    model_config = {"extra": "forbid"}

    handle: str = Field(min_length=1, max_length=128, description="A handle from `checkpoint`.")
    drop: bool = Field(default=False, description="Forget the checkpoint once restored (a fork's last copy).")


class DropRequest(BaseModel):
    """`drop_checkpoint` (WS `data`): the handle to forget."""

    model_config = {"extra": "forbid"}

    handle: str = Field(min_length=1, max_length=128, description="A handle from `checkpoint`.")


class RestoredInfo(BaseModel):
    """The reply to `restore`: the session now holds the checkpointed episode."""

    handle: str
    session_id: str
    state: dict[str, Any] = Field(description="The restored episode's state (the environment's state model).")


# --- the default hooks -------------------------------------------------------------------

_SKIPPED_ATTRS = frozenset({"_state", "episode_done"})


def default_snapshot(env: Environment[Any, Any, Any]) -> dict[str, Any]:
    """The episode of an environment made of plain data: its state, `episode_done`, and every
    instance attribute that JSON holds exactly (str, int, float, bool, None, and lists and
    string-keyed dicts of those).

    Raises:
        SnapshotUnsupported: an attribute is something else (a sandbox, a file, a tuple): the
            class must override `snapshot` and `restore`.
    """
    attrs: dict[str, Any] = {}
    for name, value in vars(env).items():
        if name in _SKIPPED_ATTRS:
            continue
        if not _plain(value):
            raise SnapshotUnsupported(
                f"{type(env).__name__}.{name} is a {type(value).__name__}, not plain JSON data: the default "
                f"snapshot keeps state, episode_done and plain attributes only; override snapshot(folder) "
                f"and restore(data, folder) to keep this episode"
            )
        attrs[name] = value
    return {
        "format": SNAPSHOT_FORMAT,
        "state": env.state.model_dump(mode="json"),
        "episode_done": bool(env.episode_done),
        "attrs": json.loads(json.dumps(attrs)),  # a copy: the live episode goes on changing its own
    }


def default_restore(env: Environment[Any, Any, Any], data: dict[str, Any]) -> None:
    """Put back what `default_snapshot` took.

    Raises:
        SnapshotUnsupported: `data` is not a default snapshot of this format.
    """
    if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT or not isinstance(data.get("attrs"), dict):
        raise SnapshotUnsupported(f"not a snapshot of format {SNAPSHOT_FORMAT} taken by default_snapshot")
    env.state = env.state_type.model_validate(data["state"])
    env.episode_done = bool(data.get("episode_done"))
    for name, value in json.loads(json.dumps(data["attrs"])).items():
        setattr(env, name, value)


def _plain(value: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


# --- files --------------------------------------------------------------------------------
#
# A snapshot's folders go into one file, packed and unpacked by `openenv_sdk.workspace_archive`
# (the one owner of workspace archives, regrade's too): the fast, uncompressed encoding, read
# back as hostile (a checkpoint on disk outlives the server that wrote it).


def unpack_folders(archive: Path, sandbox: Sandbox, names: Sequence[str], *, limits: ArchiveLimits | None = None) -> None:
    """Fill the sandbox's folders `names` from a `pack_folders` file: the file is read and
    checked whole first (`read_folders`), then each folder is made again (as `make_dir` makes
    it) and emptied, the contents unpacked and handed to the sandbox's user.

    Raises:
        ArchiveRejected: the file is not a snapshot's, or breaks a rule (a name outside the
            folders, a member through a link, a device, a limit); nothing of it is written.
    """
    with read_folders(archive, names, limits=limits) as checked:
        for name in names:
            _empty(sandbox.make_dir(name))
        checked.write(sandbox.root, owner=(sandbox.uid, sandbox.gid) if sandbox.privileged else None)


def _empty(folder: Path) -> None:
    from .sandbox import remove_tree

    for entry in list(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()


_MAX_TEXT_BYTES = 64 * 1024 * 1024


def rewrite_text(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` in a text file the server reads back (a saved shell's state names
    the session's folder, which a restored copy has elsewhere); nothing when it is missing, or
    is not a regular file of its own (the agent can leave a link or a FIFO there: never
    followed, never waited on), or is over 64 MiB."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # missing, or a link (ELOOP)
        return
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_TEXT_BYTES:
        os.close(fd)
        return
    with os.fdopen(fd, "r+b") as f:
        text = f.read()
        if old.encode() in text:  # rewritten in place: the file keeps its owner and mode
            f.seek(0)
            f.write(text.replace(old.encode(), new.encode()))
            f.truncate()
