"""Checkpoint, restore and fork of a live episode: the environment's side and the wire's types.

An environment is checkpointed through two optional hooks on `Environment`:

- `snapshot(folder) -> dict`: the episode as JSON data; files it needs (a session's workspace)
  go into `folder`, an empty directory the server owns;
- `restore(data, folder)`: on a fresh instance (or one whose episode is discarded), continue
  that episode exactly where `snapshot` left it.

The defaults cover an environment whose episode is its pydantic `state`, `episode_done` and
plain-data attributes (`default_snapshot` / `default_restore`); one holding a sandbox overrides
both and copies the sandbox's folders with `copy_tree` / `restore_tree`. The server keeps
checkpoints in a store of its own (`openenv_sdk.server._snapshots`) and names each by an opaque
handle; they are orchestrator-only (WebSocket `checkpoint` / `restore`, HTTP `POST /checkpoint`,
`POST /restore`), never MCP tools.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .errors import OpenEnvError, ServerError

if TYPE_CHECKING:
    from .environment import Environment
    from .sandbox import Sandbox

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointRequest",
    "RestoreRequest",
    "RestoredInfo",
    "SnapshotTooLarge",
    "SnapshotUnsupported",
    "copy_tree",
    "default_restore",
    "default_snapshot",
    "restore_tree",
    "rewrite_text",
]

SNAPSHOT_FORMAT = 1
"""Bumped when what `default_snapshot` writes changes shape."""


# --- errors ------------------------------------------------------------------------------


class SnapshotUnsupported(OpenEnvError):
    """The environment cannot snapshot this episode (no episode yet, or an attribute that is not
    plain data and no `snapshot` override); the message names what."""


class SnapshotTooLarge(OpenEnvError):
    """The episode's files are over the checkpoint store's bound (bytes or entries)."""


class CheckpointError(ServerError):
    """Client side: the server refused a checkpoint or restore (unknown handle, the store's
    bound reached, the environment cannot snapshot); `code` says which."""


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


class _Budget:
    def __init__(self, max_bytes: int | None, max_entries: int | None) -> None:
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.bytes = self.entries = 0

    def take(self, size: int, what: Path) -> None:
        self.bytes += size
        self.entries += 1
        if self.max_bytes is not None and self.bytes > self.max_bytes:
            raise SnapshotTooLarge(f"the episode's files are over {self.max_bytes} bytes (at {what.name!r})")
        if self.max_entries is not None and self.entries > self.max_entries:
            raise SnapshotTooLarge(f"the episode's files are over {self.max_entries} entries")


def copy_tree(source: Path, target: Path, *, max_bytes: int | None = None, max_entries: int | None = None) -> int:
    """Copy a tree the agent wrote into `target` (made; it must not exist), as the server's own
    files: contents, modes and times; symlinks copied as links, never followed; FIFOs made
    again; sockets and devices left out. Returns the bytes copied. Run it when no process of
    the agent runs (the copy is then the folder as it stands).

    Raises:
        SnapshotTooLarge: past `max_bytes` of file contents or `max_entries` entries (the
            partial copy is left for the caller to remove).
    """
    budget = _Budget(max_bytes, max_entries)
    _copy_dir(source, target, budget)
    return budget.bytes


def _copy_dir(source: Path, target: Path, budget: _Budget) -> None:
    info = os.lstat(source)
    os.mkdir(target, 0o700)
    with os.scandir(source) as entries:
        for entry in entries:
            src, dst = Path(entry.path), target / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                budget.take(0, src)
                _copy_dir(src, dst, budget)
            elif stat.S_ISREG(mode):
                budget.take(entry.stat(follow_symlinks=False).st_size, src)
                shutil.copyfile(src, dst, follow_symlinks=False)
                shutil.copystat(src, dst, follow_symlinks=False)
            elif stat.S_ISLNK(mode):
                budget.take(0, src)
                os.symlink(os.readlink(src), dst)
            elif stat.S_ISFIFO(mode):
                budget.take(0, src)
                os.mkfifo(dst, stat.S_IMODE(mode))
            # sockets and devices: nothing to keep (their processes are gone; devices cannot be made)
    os.chmod(target, stat.S_IMODE(info.st_mode))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


def restore_tree(source: Path, sandbox: Sandbox, name: str) -> Path:
    """Fill the sandbox's folder `name` (made again, empty, as `make_dir` makes it) with a copy
    of `source` from `copy_tree`, handed to the sandbox's user. Returns the folder."""
    folder = sandbox.make_dir(name)
    _empty(folder)
    budget = _Budget(None, None)
    with os.scandir(source) as entries:
        for entry in entries:
            src, dst = Path(entry.path), folder / entry.name
            if entry.is_dir(follow_symlinks=False):
                _copy_dir(src, dst, budget)
            elif entry.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(src, dst, follow_symlinks=False)
                shutil.copystat(src, dst, follow_symlinks=False)
            else:
                os.mkfifo(dst, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode))
            sandbox.give(dst)
    info = os.lstat(source)
    os.utime(folder, ns=(info.st_atime_ns, info.st_mtime_ns))
    return folder


def _empty(folder: Path) -> None:
    from .sandbox import remove_tree

    for entry in list(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()


def rewrite_text(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` in a text file the server reads back (a saved shell's state names
    the session's folder, which a restored copy has elsewhere); nothing when it is missing."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return
    if old.encode() in text:
        info = os.lstat(path)
        path.write_bytes(text.replace(old.encode(), new.encode()))
        os.chown(path, info.st_uid, info.st_gid)
