"""A workspace as a bounded tar.gz, and its safe unpacking: the archive is the agent's data.

What the agent left in its workspace is hostile: names that climb out (`../x`, `/etc/x`), a
member written through a symlink that an earlier member made (`link -> /`, then `link/etc/x`),
hard links to files outside, device files, a file or a count of files past any reason, a small
archive that inflates to gigabytes. `unpack_workspace` reads the whole archive once, checking
every header against `ArchiveLimits` (nothing is written before the archive is known good), then
extracts it with the same rules into a folder that must be empty.

Symlinks themselves are kept as they are, whatever they point at (the grader's copy of the
original workspace kept them too, `cp -a`): only a member *through* one is refused.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import OpenEnvError

__all__ = ["ArchiveLimits", "ArchiveRejected", "WorkspaceTooLarge", "pack_workspace", "unpack_workspace"]

_MIB = 1024 * 1024


class ArchiveRejected(OpenEnvError, ValueError):
    """regrade: a workspace archive that breaks a rule (a name out of the folder, a link through
    which a member would be written, a device file, a limit); nothing of it was written."""


class WorkspaceTooLarge(OpenEnvError, ValueError):
    """regrade: the workspace is over a limit of `ArchiveLimits`: it is not kept (the episode's
    grade stands; it cannot be regraded)."""


@dataclass(frozen=True, kw_only=True)
class ArchiveLimits:
    """The bounds of one workspace archive (packing refuses past them, unpacking too)."""

    max_archive_bytes: int = 4 * _MIB
    """The compressed archive; 4 MiB keeps it, base64-encoded, inside one 8 MiB server message."""
    max_unpacked_bytes: int = 64 * _MIB
    """The sum of the files' sizes, unpacked."""
    max_members: int = 20_000
    """Files, folders and links."""
    max_name_bytes: int = 4096

    def __post_init__(self) -> None:
        if min(self.max_archive_bytes, self.max_unpacked_bytes, self.max_members, self.max_name_bytes) < 1:
            raise ValueError("every archive limit must be at least 1")


_KEPT_MODE_BITS = 0o1777
"""Permission bits kept: setuid and setgid are dropped (the workspace is nosuid anyway)."""


def pack_workspace(folder: Path, limits: ArchiveLimits | None = None) -> bytes:
    """`folder`'s contents as a tar.gz: files, folders, symlinks (never followed), FIFOs; sockets
    are left out. Run it once nothing of the agent runs any more.

    Raises:
        WorkspaceTooLarge: past a limit (the message names it and the size found).
    """
    limits = limits or ArchiveLimits()
    buffer = _BoundedBuffer(limits.max_archive_bytes)
    members = total = 0
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=6) as tar:
        for top, dirs, files in os.walk(folder, followlinks=False):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, folder))
                if info is None:  # a socket: nothing a grader reads
                    continue
                members += 1
                if members > limits.max_members:
                    raise WorkspaceTooLarge(f"the workspace holds more than {limits.max_members} files and folders")
                total += info.size if info.isreg() else 0
                if total > limits.max_unpacked_bytes:
                    raise WorkspaceTooLarge(
                        f"the workspace's files are over {_size(limits.max_unpacked_bytes)} (max_unpacked_bytes)"
                    )
                if info.isreg():
                    with open(path, "rb", opener=_no_follow) as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buffer.getvalue()


def _size(n: int) -> str:
    return f"{n / _MIB:g} MiB" if n >= _MIB else f"{n} bytes"


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


class _BoundedBuffer(io.BytesIO):
    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self.max_bytes:
            raise WorkspaceTooLarge(
                f"the workspace archive is over {_size(self.max_bytes)} compressed (max_archive_bytes)"
            )
        return super().write(data)


def _check_name(name: str, limits: ArchiveLimits) -> PurePosixPath:
    if not name or len(name.encode("utf-8", "surrogateescape")) > limits.max_name_bytes or "\x00" in name:
        raise ArchiveRejected(f"a member's name is empty, too long or holds NUL: {name[:80]!r}")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name.startswith("/"):
        raise ArchiveRejected(f"member {name!r} would land outside the workspace")
    parts = [p for p in path.parts if p != "."]
    if not parts:
        raise ArchiveRejected(f"member {name!r} names the workspace itself")
    return PurePosixPath(*parts)


def _checked_members(tar: tarfile.TarFile, limits: ArchiveLimits) -> list[tarfile.TarInfo]:
    """Every member, checked; raises at the first that breaks a rule."""
    seen: dict[PurePosixPath, tarfile.TarInfo] = {}
    links: set[PurePosixPath] = set()
    total = 0
    while True:
        try:
            info = tar.next()
        except (tarfile.TarError, EOFError, OSError, UnicodeError) as e:  # zlib.error is an OSError
            raise ArchiveRejected(f"the archive is damaged: {type(e).__name__}: {e}") from e
        if info is None:
            break
        if len(seen) >= limits.max_members:
            raise ArchiveRejected(f"the archive holds more than {limits.max_members} members (max_members)")
        path = _check_name(info.name, limits)
        if path in seen:
            raise ArchiveRejected(f"member {info.name!r} appears twice")
        for parent in path.parents:
            if parent in links:
                raise ArchiveRejected(f"member {info.name!r} would be written through the link {str(parent)!r}")
            if parent != PurePosixPath(".") and parent in seen and not seen[parent].isdir():
                raise ArchiveRejected(f"member {info.name!r} is under {str(parent)!r}, which is not a folder")
        if info.isreg():
            total += info.size
            if total > limits.max_unpacked_bytes:
                raise ArchiveRejected(
                    f"the archive unpacks to over {_size(limits.max_unpacked_bytes)} (max_unpacked_bytes)"
                )
        elif info.issym():
            if not info.linkname or "\x00" in info.linkname or len(info.linkname) > limits.max_name_bytes:
                raise ArchiveRejected(f"symlink {info.name!r} has an unusable target")
            links.add(path)
        elif info.islnk():
            target = _check_name(info.linkname, limits)
            if target not in seen or not seen[target].isreg():
                raise ArchiveRejected(f"hard link {info.name!r} points at {info.linkname!r}, not an earlier file of the archive")
            links.add(path)
        elif not (info.isdir() or info.isfifo()):
            raise ArchiveRejected(f"member {info.name!r} is a device or special file ({_kind(info)})")
        seen[path] = info
    return list(seen.values())


def _kind(info: tarfile.TarInfo) -> str:
    return {tarfile.CHRTYPE: "character device", tarfile.BLKTYPE: "block device"}.get(info.type, f"type {info.type!r}")


def unpack_workspace(data: bytes, dest: Path, limits: ArchiveLimits | None = None) -> int:
    """Unpack a `pack_workspace` archive into `dest` (an existing, empty folder); the count of members.

    Raises:
        ArchiveRejected: the archive breaks a rule; nothing was written.
    """
    limits = limits or ArchiveLimits()
    if len(data) > limits.max_archive_bytes:
        raise ArchiveRejected(f"the archive is {len(data)} bytes, over {limits.max_archive_bytes} (max_archive_bytes)")
    if any(dest.iterdir()):
        raise ArchiveRejected(f"{dest} is not empty: a workspace is restored into a fresh folder only")
    raw = _inflate(data, limits.max_unpacked_bytes + limits.max_members * _HEADER_ALLOWANCE + _MIB)
    try:
        tar = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ArchiveRejected(f"not a tar archive: {type(e).__name__}: {e}") from e
    with tar:
        members = _checked_members(tar, limits)
        folders = []
        for info in members:
            target = dest / info.name
            # every parent is a folder this loop made (checked above): nothing is followed
            mode = info.mode & _KEPT_MODE_BITS
            if info.isdir():
                target.mkdir(mode=0o700, parents=True, exist_ok=True)
                folders.append((target, mode, info.mtime))
                continue
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if info.issym():
                os.symlink(info.linkname, target)
                continue
            if info.islnk():
                os.link(dest / _check_name(info.linkname, limits), target, follow_symlinks=False)
                continue
            if info.isfifo():
                os.mkfifo(target, mode)
            else:
                source = tar.extractfile(info)
                assert source is not None
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    _copy(source, out, info.size)
            os.chmod(target, mode)
            os.utime(target, (info.mtime, info.mtime), follow_symlinks=False)
        for folder, mode, mtime in reversed(folders):  # once their contents are in
            os.chmod(folder, mode)
            os.utime(folder, (mtime, mtime), follow_symlinks=False)
    return len(members)


_HEADER_ALLOWANCE = 3 * 512
"""Tar bytes per member besides its data, at most (its header, a PAX header and its record)."""


def _inflate(data: bytes, max_bytes: int) -> bytes:
    """The gzip stream's content, refused past `max_bytes`: a bomb stops there, never in memory."""
    inflater = zlib.decompressobj(wbits=31)  # gzip only
    out = bytearray()
    try:
        chunk = inflater.decompress(data, max_bytes + 1 - len(out))
        out += chunk
        while inflater.unconsumed_tail and len(out) <= max_bytes:
            out += inflater.decompress(inflater.unconsumed_tail, max_bytes + 1 - len(out))
    except zlib.error as e:
        raise ArchiveRejected(f"not a gzip stream: {e}") from e
    if len(out) > max_bytes:
        raise ArchiveRejected(f"the archive inflates to over {max_bytes} bytes: refused before unpacking")
    if not inflater.eof:
        raise ArchiveRejected("the gzip stream is cut short")
    return bytes(out)


def _copy(source: IO[bytes], out: IO[bytes], size: int) -> None:
    left = size
    while left > 0:
        chunk = source.read(min(left, _MIB))
        if not chunk:
            raise ArchiveRejected("the archive ends inside a file")
        out.write(chunk)
        left -= len(chunk)
