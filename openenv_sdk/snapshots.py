"""Checkpoint, restore and fork of a live episode: the environment's side and the wire's types.

An environment is checkpointed through two optional hooks on `Environment`:

- `snapshot(folder) -> dict`: the episode as JSON data; files it needs (a session's workspace)
  go into `folder`, an empty directory the server owns;
- `restore(data, folder)`: on a fresh instance (or one whose episode is discarded), continue
  that episode exactly where `snapshot` left it.

The defaults cover an environment whose episode is its pydantic `state`, `episode_done` and
plain-data attributes (`default_snapshot` / `default_restore`); one holding a sandbox overrides
both and keeps the sandbox's folders with `pack_folders` / `unpack_folders`. The server keeps
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

if TYPE_CHECKING:
    from .environment import Environment
    from .sandbox import Sandbox

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointRequest",
    "DropRequest",
    "RestoreRequest",
    "RestoredInfo",
    "SnapshotTooLarge",
    "SnapshotUnsupported",
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
# A snapshot's folders go into one file: one file written to the store's disk (creating hundreds
# of small files there costs far more than their bytes), read back into the new sandbox's tmpfs.
# Its format is the server's own, not tar: tar spends most of its time naming owners and writing
# a PAX header per file for times in nanoseconds, both of which this keeps for nothing. Each entry
# is a 4-byte big-endian length, a JSON header (path, kind, mode, times in ns, size or link) and,
# for a file, its bytes. It is made by `pack_folders` from a walk that never follows a link, and
# read only from the server's store.

_MAGIC = b"openenv-snapshot-1\n"
_CHUNK = 1 << 20


def pack_folders(root: Path, names: Sequence[str], archive: Path, *, max_bytes: int | None = None) -> int:
    """Write `root`'s folders `names` (those that exist) into the file `archive`: contents, modes
    and times (ns); symlinks as links, never followed; hard links kept; FIFOs kept; sockets and
    devices left out. Run it when no process of the agent runs. Returns the file's bytes.

    Raises:
        SnapshotTooLarge: the folders hold more than `max_bytes` of file contents.
    """
    total = 0
    seen: dict[tuple[int, int], str] = {}
    with open(archive, "wb") as out:
        out.write(_MAGIC)

        def entry(header: dict[str, Any]) -> None:
            data = json.dumps(header, separators=(",", ":")).encode()
            out.write(len(data).to_bytes(4, "big") + data)

        def walk(path: str, rel: str) -> None:
            nonlocal total
            info = os.lstat(path)
            mode = info.st_mode
            header: dict[str, Any] = {"p": rel, "m": stat.S_IMODE(mode), "t": [info.st_atime_ns, info.st_mtime_ns]}
            if stat.S_ISDIR(mode):
                entry({**header, "k": "d"})
                with os.scandir(path) as entries:
                    names_in = sorted(e.name for e in entries)
                for name in names_in:
                    walk(os.path.join(path, name), f"{rel}/{name}")
                entry({"p": rel, "k": "t", "t": header["t"]})  # the folder's times, once its contents are in
            elif stat.S_ISLNK(mode):
                entry({**header, "k": "l", "l": os.readlink(path)})
            elif stat.S_ISREG(mode):
                key = (info.st_dev, info.st_ino)
                if info.st_nlink > 1 and key in seen:
                    entry({**header, "k": "h", "l": seen[key]})
                    return
                seen[key] = rel
                total += info.st_size
                if max_bytes is not None and total > max_bytes:
                    raise SnapshotTooLarge(f"the episode's files are over {max_bytes} bytes (at {rel!r})")
                # never through a link (no process of the agent is left to swap one in; made sure of)
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as src:
                    entry({**header, "k": "f", "s": info.st_size})
                    left = info.st_size
                    while left:
                        chunk = src.read(min(left, _CHUNK))
                        if not chunk:
                            raise SnapshotUnsupported(f"{rel!r} changed while it was read")
                        out.write(chunk)
                        left -= len(chunk)
            elif stat.S_ISFIFO(mode):
                entry({**header, "k": "p"})
            # sockets and devices: their processes are gone, and a device cannot be made

        for name in names:
            top = root / name
            if top.is_dir() and not top.is_symlink():
                walk(str(top), name)
    return archive.stat().st_size


def unpack_folders(archive: Path, sandbox: Sandbox, names: Sequence[str]) -> None:
    """Fill the sandbox's folders `names` from a `pack_folders` file: each made again (as
    `make_dir` makes it) and emptied, its contents unpacked and handed to the sandbox's user.

    Raises:
        SnapshotUnsupported: the file is not a snapshot, or names a path outside the folders.
    """
    folders = {name: sandbox.make_dir(name) for name in names}
    for folder in folders.values():
        _empty(folder)
    root = sandbox.root
    owner = (sandbox.uid, sandbox.gid) if sandbox.privileged else None  # as `give` hands files over
    created: list[str] = []
    dir_modes: dict[str, int] = {}
    with open(archive, "rb") as src:
        if src.read(len(_MAGIC)) != _MAGIC:
            raise SnapshotUnsupported(f"{archive.name} is not a snapshot of this format")
        while size_bytes := src.read(4):
            header = json.loads(src.read(int.from_bytes(size_bytes, "big")))
            rel, kind = header["p"], header["k"]
            parts = rel.split("/")
            if parts[0] not in folders or any(p in ("", ".", "..") for p in parts):
                raise SnapshotUnsupported(f"the snapshot holds {rel!r}, outside its folders")
            path = os.path.join(root, rel)
            if owner is not None and len(parts) > 1 and kind != "t":
                created.append(path)
            if kind == "f":
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    left = int(header["s"])
                    while left:
                        chunk = src.read(min(left, _CHUNK))
                        if not chunk:
                            raise SnapshotUnsupported(f"the snapshot ends inside {rel!r}")
                        out.write(chunk)
                        left -= len(chunk)
            elif kind == "d":
                if len(parts) > 1:
                    os.mkdir(path, 0o700)
                    dir_modes[rel] = int(header["m"])
                continue  # its mode and times come with its "t" entry, once its contents are in
            elif kind == "t":
                if len(parts) > 1:
                    os.chmod(path, dir_modes.pop(rel, 0o700))
                os.utime(path, ns=tuple(header["t"]), follow_symlinks=False)
                continue
            elif kind == "l":
                os.symlink(header["l"], path)
                os.utime(path, ns=tuple(header["t"]), follow_symlinks=False)
                continue
            elif kind == "h":
                target = str(header["l"])
                if target.split("/")[0] not in folders or ".." in target.split("/"):
                    raise SnapshotUnsupported(f"the snapshot links {rel!r} outside its folders")
                os.link(os.path.join(root, target), path, follow_symlinks=False)
                continue
            elif kind == "p":
                os.mkfifo(path, 0o600)
            else:
                raise SnapshotUnsupported(f"the snapshot holds an entry of unknown kind {kind!r}")
            os.chmod(path, int(header["m"]))
            os.utime(path, ns=tuple(header["t"]), follow_symlinks=False)
    if owner is not None:
        for path in created:
            os.chown(path, *owner, follow_symlinks=False)


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
