"""The orchestrator's `checkpoint` / `restore` / `drop_checkpoint` verbs and the store behind them.

A checkpoint is the environment's `snapshot(folder)` (JSON data and the files it wrote), the
session's transcript, and the environment class it came from, kept on the server's disk under
`ServerConfig.checkpoint_dir` so that it outlives the server. It is named by an opaque handle
(`ckpt_` and 32 random characters, checked before it is ever joined to a path): a caller never
names a path. The store is bounded: `max_checkpoints` kept at once, `max_checkpoint_bytes` each
and `max_checkpoint_store_bytes` in all; past a bound the request gets `CHECKPOINT_LIMIT` and
nothing is evicted (a tree search holds its handles until it drops them). The bounds are counted
by the server that holds the store (a server reads what an earlier one kept when it starts);
servers that share one folder each count their own.

Never MCP tools: these are WebSocket message types and HTTP routes only, behind the
orchestrator token where one is set.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..snapshots import (
    ArchiveRejected,
    CheckpointInfo,
    CheckpointRequest,
    DropRequest,
    RestoredInfo,
    RestoreRequest,
    SnapshotTooLarge,
    SnapshotUnsupported,
    WorkspaceTooLarge,
)
from ..types import ErrorCode
from ._protocol import RequestRefused

if TYPE_CHECKING:
    from ._session import Session
    from ._state import ServerState

__all__ = ["SnapshotStore", "checkpoint", "drop_checkpoint", "restore", "store_for"]

logger = logging.getLogger("openenv_sdk.server")

_HANDLE = re.compile(r"ckpt_[A-Za-z0-9_-]{32}")
_META = "checkpoint.json"
_FILES = "files"
_STAGING = ".staging-"


def default_checkpoint_dir(env_name: str) -> Path:
    """`$OPENENV_CHECKPOINT_DIR`, else a folder per environment under the system's lasting temp dir
    (`/var/tmp`, which a reboot keeps, unlike `/tmp`)."""
    configured = os.environ.get("OPENENV_CHECKPOINT_DIR")
    if configured:
        return Path(configured)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", env_name) or "env"
    base = Path("/var/tmp") if os.path.isdir("/var/tmp") else Path(tempfile.gettempdir())
    return base / "openenv-checkpoints" / safe


def _tree_bytes(folder: Path) -> int:
    total = 0
    for top, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
    return total


_MAX_META_BYTES = 256 * 1024 * 1024
"""A checkpoint's metadata (its data and transcript) read back, at most."""


def _read_meta(path: Path) -> Any:
    """`checkpoint.json`, never through a link, never a FIFO or device, at most `_MAX_META_BYTES`.

    Raises:
        OSError: missing, a link (ELOOP), not a regular file, or too large.
        ValueError: not JSON.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_META_BYTES:
            raise OSError(errno.EINVAL, f"{path.name} is not a regular file of at most {_MAX_META_BYTES} bytes")
        return json.loads(f.read(_MAX_META_BYTES + 1))


class SnapshotStore:
    """Checkpoints on disk, one folder per handle: `checkpoint.json` and `files/`."""

    def __init__(self, root: Path, *, max_count: int, max_bytes_each: int, max_bytes_total: int) -> None:
        self.root = root
        self.max_count, self.max_bytes_each, self.max_bytes_total = max_count, max_bytes_each, max_bytes_total
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)  # the agent's files inside: no other user reads them
        for leftover in root.glob(f"{_STAGING}*"):  # a checkpoint a crash cut short
            shutil.rmtree(leftover, ignore_errors=True)
        # handle -> bytes, read once from disk (what an earlier server kept counts too)
        self._sizes: dict[str, int] = {}
        for p in root.iterdir():
            if _HANDLE.fullmatch(p.name) and (p / _META).is_file():
                try:
                    self._sizes[p.name] = int(_read_meta(p / _META)["bytes"])
                except (OSError, ValueError, KeyError, TypeError):
                    self._sizes[p.name] = _tree_bytes(p)

    # --- reading ---------------------------------------------------------------------------

    def handles(self) -> list[str]:
        return sorted(self._sizes)

    def used_bytes(self) -> int:
        return sum(self._sizes.values())

    def folder(self, handle: str) -> Path:
        """The folder of a kept checkpoint.

        Raises:
            RequestRefused: CHECKPOINT_NOT_FOUND (not a handle's shape, or not kept).
        """
        if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
            raise RequestRefused(
                ErrorCode.CHECKPOINT_NOT_FOUND,
                f"{str(handle)[:64]!r} is not a checkpoint handle (they read ckpt_ and 32 characters, from checkpoint)",
            )
        folder = self.root / handle
        if not (folder / _META).is_file():
            raise RequestRefused(
                ErrorCode.CHECKPOINT_NOT_FOUND, f"No checkpoint {handle!r}: it was dropped, or never kept by this server"
            )
        return folder

    def load(self, handle: str) -> tuple[dict[str, Any], Path]:
        """A kept checkpoint's metadata and files, read as the agent's data: the store's disk
        outlives the server, so neither is trusted to be what this server wrote.

        Raises:
            RequestRefused: CHECKPOINT_NOT_FOUND (as `folder`); SNAPSHOT_UNSUPPORTED when its
                metadata is not a regular file of JSON, or its files not a folder of its own.
        """
        folder = self.folder(handle)
        try:
            meta = _read_meta(folder / _META)
            files = os.lstat(folder / _FILES)
        except (OSError, ValueError) as e:
            raise RequestRefused(ErrorCode.SNAPSHOT_UNSUPPORTED, f"checkpoint {handle!r} is damaged: {e}") from e
        if not isinstance(meta, dict) or not stat.S_ISDIR(files.st_mode):
            raise RequestRefused(ErrorCode.SNAPSHOT_UNSUPPORTED, f"checkpoint {handle!r} is damaged: not what checkpoint keeps")
        return meta, folder / _FILES

    # --- writing ---------------------------------------------------------------------------

    def stage(self) -> tuple[str, Path]:
        """A new handle and its empty staging folder (its `files/` is what the snapshot fills).

        Raises:
            RequestRefused: CHECKPOINT_LIMIT when `max_count` are kept.
        """
        kept = len(self._sizes)
        if kept >= self.max_count:
            raise RequestRefused(
                ErrorCode.CHECKPOINT_LIMIT,
                f"{kept} checkpoints are kept (max_checkpoints is {self.max_count}): drop some with drop_checkpoint",
                details={"checkpoints": kept, "max_checkpoints": self.max_count},
            )
        handle = "ckpt_" + secrets.token_urlsafe(24)
        staging = self.root / f"{_STAGING}{handle}"
        staging.mkdir(mode=0o700)
        (staging / _FILES).mkdir(mode=0o700)
        return handle, staging

    def commit(self, handle: str, staging: Path, meta: dict[str, Any]) -> int:
        """Keep the staged checkpoint under its handle; returns its bytes.

        Raises:
            RequestRefused: CHECKPOINT_LIMIT past a size bound (the staging folder is removed).
        """
        size = _tree_bytes(staging / _FILES) + len(json.dumps(meta["data"]))
        try:
            if size > self.max_bytes_each:
                raise RequestRefused(
                    ErrorCode.CHECKPOINT_LIMIT,
                    f"the checkpoint is {size} bytes; max_checkpoint_bytes is {self.max_bytes_each}",
                    details={"bytes": size, "max_checkpoint_bytes": self.max_bytes_each},
                )
            with self._lock:
                if len(self._sizes) >= self.max_count:  # another checkpoint took the last place meanwhile
                    raise RequestRefused(
                        ErrorCode.CHECKPOINT_LIMIT,
                        f"{len(self._sizes)} checkpoints are kept (max_checkpoints is {self.max_count}): "
                        f"drop some with drop_checkpoint",
                        details={"checkpoints": len(self._sizes), "max_checkpoints": self.max_count},
                    )
                used = self.used_bytes()
                if used + size > self.max_bytes_total:
                    raise RequestRefused(
                        ErrorCode.CHECKPOINT_LIMIT,
                        f"the store holds {used} bytes; this checkpoint ({size} bytes) would pass "
                        f"max_checkpoint_store_bytes ({self.max_bytes_total}): drop some with drop_checkpoint",
                        details={"bytes": size, "store_bytes": used, "max_checkpoint_store_bytes": self.max_bytes_total},
                    )
                meta = {**meta, "bytes": size}
                (staging / _META).write_text(json.dumps(meta))
                os.rename(staging, self.root / handle)  # atomic: a handle is kept whole or not at all
                self._sizes[handle] = size
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return size

    def drop(self, handle: str) -> None:
        folder = self.folder(handle)
        doomed = self.root / f"{_STAGING}drop-{secrets.token_hex(8)}"
        os.rename(folder, doomed)  # gone at once for readers; removed after
        with self._lock:
            self._sizes.pop(handle, None)
        shutil.rmtree(doomed, ignore_errors=True)


def store_for(state: ServerState) -> SnapshotStore:
    """The server's store, made on first use from its config."""
    store = state.snapshots
    if store is None:
        config = state.config
        root = Path(config.checkpoint_dir) if config.checkpoint_dir else default_checkpoint_dir(state.env_cls.name)
        store = state.snapshots = SnapshotStore(
            root,
            max_count=config.max_checkpoints,
            max_bytes_each=config.max_checkpoint_bytes,
            max_bytes_total=config.max_checkpoint_store_bytes,
        )
    assert isinstance(store, SnapshotStore)
    return store


def _class_name(session: Session) -> str:
    cls = type(session.env)
    return f"{cls.__module__}.{cls.__qualname__}"


# --- the verbs ----------------------------------------------------------------------------------


async def checkpoint(session: Session, state: ServerState, data: dict[str, Any] | None) -> dict[str, Any]:
    """Keep the session's episode; the reply is a `CheckpointInfo`."""
    try:
        CheckpointRequest.model_validate(data or {})
    except ValidationError as e:
        raise RequestRefused.from_validation(e, "Invalid checkpoint request") from e
    session.require_reset("checkpoint")
    store = store_for(state)
    handle, staging = store.stage()
    try:
        async with session.lock:
            session.touch()
            try:
                snapshot = await session._runner.run(session.env.snapshot, (staging / _FILES,), what="snapshot")
            except SnapshotUnsupported as e:
                raise RequestRefused(ErrorCode.SNAPSHOT_UNSUPPORTED, f"checkpoint: {e}") from e
            except (SnapshotTooLarge, WorkspaceTooLarge) as e:
                raise RequestRefused(ErrorCode.CHECKPOINT_LIMIT, f"checkpoint: {e}") from e
            except RequestRefused:
                raise
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise RequestRefused(ErrorCode.EXECUTION_ERROR, f"snapshot raised {type(e).__name__}: {e}") from e
                raise RequestRefused(
                    ErrorCode.CHECKPOINT_LIMIT, f"checkpoint: the store's disk is full ({e.strerror}) at {store.root}"
                ) from e
            except Exception as e:
                logger.warning("session %s: snapshot raised %s: %s", session.id[:8], type(e).__name__, e)
                raise RequestRefused(ErrorCode.EXECUTION_ERROR, f"snapshot raised {type(e).__name__}: {e}") from e
            transcript = session._transcript
            meta = {
                "env": type(session.env).name,
                "class": _class_name(session),
                "created_at": time.time(),
                "data": snapshot,
                "transcript": {
                    "entries": list(transcript._entries or ()),
                    "bytes": transcript._bytes,
                    "dropped": transcript._dropped,
                },
            }
        try:
            json.dumps(snapshot, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise RequestRefused(
                ErrorCode.SNAPSHOT_UNSUPPORTED, f"checkpoint: snapshot() returned data that is not JSON: {e}"
            ) from e
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    size = store.commit(handle, staging, meta)
    step_count = snapshot.get("state", {}).get("step_count") if isinstance(snapshot, dict) else None
    return CheckpointInfo(
        handle=handle, env=meta["env"], bytes=size, step_count=step_count if isinstance(step_count, int) else None
    ).model_dump()


async def restore(session: Session, state: ServerState, data: dict[str, Any] | None) -> dict[str, Any]:
    """Replace the session's episode (if any) by a checkpoint's; the reply is a `RestoredInfo`."""
    try:
        request = RestoreRequest.model_validate(data or {})
    except ValidationError as e:
        raise RequestRefused.from_validation(e, "Invalid restore request") from e
    meta, files = store_for(state).load(request.handle)
    if meta.get("class") != _class_name(session):
        raise RequestRefused(
            ErrorCode.SNAPSHOT_UNSUPPORTED,
            f"checkpoint {request.handle!r} is of {meta.get('class')!r}; this server runs {_class_name(session)!r}",
        )
    async with session.lock:
        session.touch()
        try:
            await session._runner.run(session.env.restore, (meta["data"], files), what="restore")
        except SnapshotUnsupported as e:
            raise RequestRefused(ErrorCode.SNAPSHOT_UNSUPPORTED, f"restore: {e}") from e
        except ArchiveRejected as e:  # a damaged or tampered checkpoint: nothing of it was written
            logger.warning("session %s: checkpoint %s refused: %s", session.id[:8], request.handle, e)
            raise RequestRefused(ErrorCode.SNAPSHOT_UNSUPPORTED, f"restore: the checkpoint's files are refused: {e}") from e
        except RequestRefused:
            raise
        except Exception as e:
            logger.warning("session %s: restore raised %s: %s", session.id[:8], type(e).__name__, e)
            raise RequestRefused(ErrorCode.EXECUTION_ERROR, f"restore raised {type(e).__name__}: {e}") from e
        session.has_reset = True
        kept = meta.get("transcript") or {}
        transcript = session._transcript
        transcript.clear()
        if kept.get("entries"):
            import collections

            transcript._entries = collections.deque(kept["entries"])
            transcript._bytes = int(kept.get("bytes", 0))
            transcript._dropped = int(kept.get("dropped", 0))
    if request.drop:
        store_for(state).drop(request.handle)
    return RestoredInfo(handle=request.handle, session_id=session.id, state=await session.state()).model_dump()


async def drop_checkpoint(state: ServerState, data: dict[str, Any] | None) -> dict[str, Any]:
    """Forget a checkpoint (its files are removed); the reply names it."""
    try:
        request = DropRequest.model_validate(data or {})
    except ValidationError as e:
        raise RequestRefused.from_validation(e, "Invalid drop_checkpoint request") from e
    store_for(state).drop(request.handle)
    return {"handle": request.handle, "dropped": True}
