"""A session's folders as one archive, and their hostile-safe unpacking: the one owner of both.

Everything in a workspace was written by the agent, and an archive is read back later (a
checkpoint after a server restart, a kept run by `openenv regrade`), so unpacking treats it as
hostile whatever wrote it. Two encodings of the same entries (folders, files, symlinks, hard
links, FIFOs; sockets and devices are never packed):

- **folders** (`pack_folders` / `read_folders`): the server's own format, uncompressed, one file
  on the checkpoint store's disk; used by checkpoint, restore and fork, where speed counts (tar
  spends most of a fork's time naming owners and writing a PAX header per file). Each entry is a
  4-byte big-endian length, a JSON header (path, kind, mode, times in ns, size or link) and, for
  a file, its bytes; a folder's times come in a second entry once its contents are in.
- **workspace** (`pack_workspace` / `unpack_workspace`): a tar.gz held in memory, bounded to go
  in one server message; kept by `openenv eval --keep-state` and restored by `openenv regrade`.

Both are read whole once and every entry checked against the same rules and `ArchiveLimits`
before anything is written (`_Checker`), then written by one writer (`_write`) into folders it
made itself: a name that climbs out (`../x`, `/etc/x`), a member under a symlink or a hard link
of the archive (`link -> /`, then `link/etc/x`), a hard link to anything but an earlier file of
the archive, a device, a duplicate, a file or a count of entries past the limits, a bomb: each
refused with `ArchiveRejected`, nothing written. The archive file itself is opened without
following a link and must be a regular file. Symlinks are kept with their targets as written
(never followed); setuid and setgid bits are dropped.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from .errors import OpenEnvError

__all__ = [
    "CHECKPOINT_LIMITS",
    "ArchiveLimits",
    "ArchiveRejected",
    "CheckedArchive",
    "WorkspaceTooLarge",
    "pack_folders",
    "pack_workspace",
    "read_folders",
    "unpack_workspace",
]

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


class ArchiveRejected(OpenEnvError, ValueError):
    """A workspace archive that breaks a rule (a name out of the folder, a link through which a
    member would be written, a device file, a limit); nothing of it was written."""


class WorkspaceTooLarge(OpenEnvError, ValueError):
    """The workspace is over a limit of `ArchiveLimits` when packed: it is not kept."""


@dataclass(frozen=True, kw_only=True)
class ArchiveLimits:
    """The bounds of one workspace archive (packing refuses past them, unpacking too)."""

    max_archive_bytes: int = 4 * _MIB
    """The archive as stored (for a tar.gz, compressed: 4 MiB keeps it, base64-encoded, inside
    one 8 MiB server message)."""
    max_unpacked_bytes: int = 64 * _MIB
    """The sum of the files' sizes, unpacked."""
    max_members: int = 20_000
    """Files, folders and links."""
    max_name_bytes: int = 4096

    def __post_init__(self) -> None:
        if min(self.max_archive_bytes, self.max_unpacked_bytes, self.max_members, self.max_name_bytes) < 1:
            raise ValueError("every archive limit must be at least 1")


CHECKPOINT_LIMITS = ArchiveLimits(
    max_archive_bytes=5 * _GIB, max_unpacked_bytes=4 * _GIB, max_members=200_000, max_name_bytes=4096
)
"""A checkpoint's folders: past any store's bound (`max_checkpoint_bytes`, 256 MiB by default,
counts the packed file), these bound what a tampered file could make a restore read or hold."""

_KEPT_MODE_BITS = 0o1777
"""Permission bits kept: setuid and setgid are dropped (the workspace is nosuid anyway)."""

Kind = Literal["dir", "file", "symlink", "hardlink", "fifo"]


@dataclass
class _Entry:
    path: str  # checked: relative, "/"-joined, no empty, "." or ".." parts
    kind: Kind
    mode: int
    times_ns: tuple[int, int]  # (atime, mtime)
    size: int = 0
    link: str = ""  # a symlink's target, or a hard link's earlier file (a checked name)
    offset: int = 0  # where a file's bytes start in the (uncompressed) stream


# --- packing: one walk that never follows a link ---------------------------------------------------


def _walk(top: str, rel: str) -> Iterator[tuple[str, str, os.stat_result | None]]:
    """(path, name in the archive, lstat) pre-order, names sorted, links never followed; after
    a folder's contents, (path, name, None). Sockets and devices are left out. A loop, not
    recursion: the agent may nest folders thousands deep."""
    info = os.lstat(top)
    yield top, rel, info
    if not stat.S_ISDIR(info.st_mode):
        return
    stack = [(top, rel, iter(_names(top)))]
    while stack:
        folder, folder_rel, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
            yield folder, folder_rel, None
            continue
        path = os.path.join(folder, name)
        child = f"{folder_rel}/{name}" if folder_rel else name
        sub = os.lstat(path)
        if stat.S_ISDIR(sub.st_mode):
            yield path, child, sub
            stack.append((path, child, iter(_names(path))))
        elif stat.S_ISREG(sub.st_mode) or stat.S_ISLNK(sub.st_mode) or stat.S_ISFIFO(sub.st_mode):
            yield path, child, sub


def _names(folder: str) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries)


class _Counter:
    """Packing's side of the limits, and hard links: a file seen twice is a link to the first."""

    def __init__(self, limits: ArchiveLimits) -> None:
        self.limits, self.members, self.total = limits, 0, 0
        self.seen: dict[tuple[int, int], str] = {}

    def entry(self, rel: str, info: os.stat_result) -> str | None:
        """Count an entry; for a file, the name of the earlier file it is a hard link to, if any."""
        self.members += 1
        if len(rel.encode("utf-8", "surrogateescape")) > self.limits.max_name_bytes:
            raise WorkspaceTooLarge(f"the workspace holds a name over {self.limits.max_name_bytes} bytes (max_name_bytes)")
        if self.members > self.limits.max_members:
            raise WorkspaceTooLarge(f"the workspace holds more than {self.limits.max_members} files and folders (max_members)")
        if not stat.S_ISREG(info.st_mode):
            return None
        key = (info.st_dev, info.st_ino)
        if info.st_nlink > 1 and key in self.seen:
            return self.seen[key]
        self.seen[key] = rel
        self.total += info.st_size
        if self.total > self.limits.max_unpacked_bytes:
            raise WorkspaceTooLarge(f"the workspace's files are over {_size(self.limits.max_unpacked_bytes)} (max_unpacked_bytes)")
        return None


def _open_no_follow(path: str) -> IO[bytes]:
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")


_MAGIC = b"openenv-snapshot-1\n"
_CHUNK = _MIB


def pack_folders(root: Path, names: Sequence[str], archive: Path, *, limits: ArchiveLimits | None = None) -> int:
    """Write `root`'s folders `names` (those that are folders, not links) into the file `archive`
    in the fast (uncompressed) encoding: contents, modes and times (ns); symlinks as links,
    never followed; hard links kept; FIFOs kept; sockets and devices left out. Run it when no
    process of the agent runs. Returns the file's bytes.

    Raises:
        WorkspaceTooLarge: past `limits` (default `CHECKPOINT_LIMITS`).
    """
    limits = limits or CHECKPOINT_LIMITS
    counter = _Counter(limits)
    with open(archive, "wb") as out:
        out.write(_MAGIC)

        def entry(header: dict[str, Any]) -> None:
            data = json.dumps(header, separators=(",", ":")).encode()
            out.write(len(data).to_bytes(4, "big") + data)

        for name in names:
            top = root / name
            if not top.is_dir() or top.is_symlink():
                continue
            for path, rel, info in _walk(str(top), name):
                if info is None:  # the folder's times, once its contents are in
                    done = os.lstat(path)
                    entry({"p": rel, "k": "t", "t": [done.st_atime_ns, done.st_mtime_ns]})
                    continue
                mode = info.st_mode
                header: dict[str, Any] = {"p": rel, "m": stat.S_IMODE(mode), "t": [info.st_atime_ns, info.st_mtime_ns]}
                earlier = counter.entry(rel, info)
                if stat.S_ISDIR(mode):
                    entry({**header, "k": "d"})
                elif stat.S_ISLNK(mode):
                    entry({**header, "k": "l", "l": os.readlink(path)})
                elif stat.S_ISFIFO(mode):
                    entry({**header, "k": "p"})
                elif earlier is not None:
                    entry({**header, "k": "h", "l": earlier})
                else:
                    with _open_no_follow(path) as src:
                        entry({**header, "k": "f", "s": info.st_size})
                        _copy(src, out, info.st_size, OSError(f"{rel!r} changed while it was read"))
        size = out.tell()
    if size > limits.max_archive_bytes:
        archive.unlink()
        raise WorkspaceTooLarge(f"the archive is over {_size(limits.max_archive_bytes)} (max_archive_bytes)")
    return size


def pack_workspace(folder: Path, limits: ArchiveLimits | None = None) -> bytes:
    """`folder`'s contents as a tar.gz (the kept-run encoding): files, folders, symlinks (never
    followed), hard links, FIFOs; sockets are left out. Run it once nothing of the agent runs.

    Raises:
        WorkspaceTooLarge: past a limit (the message names it and the size found).
    """
    limits = limits or ArchiveLimits()
    counter = _Counter(limits)
    buffer = _BoundedBuffer(limits.max_archive_bytes)
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=6) as tar:
        for path, rel, info in _walk(str(folder), ""):
            if info is None or not rel:
                continue
            earlier = counter.entry(rel, info)
            member = tarfile.TarInfo(rel)
            member.mode, member.mtime = stat.S_IMODE(info.st_mode), info.st_mtime
            member.uid, member.gid = info.st_uid, info.st_gid
            if stat.S_ISDIR(info.st_mode):
                member.type = tarfile.DIRTYPE
            elif stat.S_ISLNK(info.st_mode):
                member.type, member.linkname = tarfile.SYMTYPE, os.readlink(path)
            elif stat.S_ISFIFO(info.st_mode):
                member.type = tarfile.FIFOTYPE
            elif earlier is not None:
                member.type, member.linkname = tarfile.LNKTYPE, earlier
            else:
                member.size = info.st_size
                with _open_no_follow(path) as src:
                    tar.addfile(member, src)
                continue
            tar.addfile(member)
    return buffer.getvalue()


def _size(n: int) -> str:
    return f"{n / _MIB:g} MiB" if n >= _MIB else f"{n} bytes"


class _BoundedBuffer(io.BytesIO):
    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > self.max_bytes:
            raise WorkspaceTooLarge(f"the workspace archive is over {_size(self.max_bytes)} compressed (max_archive_bytes)")
        return super().write(data)


def _copy(src: IO[bytes], out: IO[bytes], size: int, short: Exception) -> None:
    left = size
    while left > 0:
        chunk = src.read(min(left, _CHUNK))
        if not chunk:
            raise short
        out.write(chunk)
        left -= len(chunk)


# --- checking: every entry, before anything is written ----------------------------------------------


@dataclass
class _Checker:
    """The rules of every archive: names inside, nothing under a link, hard links to earlier
    files, no devices, no duplicates, the limits. `tops`: the folders a folders archive may hold
    (they exist already; their entries give their times only). Names are plain strings, "/"
    joined: pathlib costs a fork more than the checks themselves."""

    limits: ArchiveLimits
    tops: frozenset[str] | None = None
    entries: list[_Entry] = field(default_factory=list)
    seen: dict[str, _Entry] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    implied: set[str] = field(default_factory=set)  # folders named only as parents (a tar may)
    total: int = 0

    def name(self, name: object) -> str:
        """`name` checked and normalized (no empty or "." parts)."""
        limits = self.limits
        if not isinstance(name, str) or not name or "\x00" in name:
            raise ArchiveRejected(f"a member's name is empty, not text or holds NUL: {str(name)[:80]!r}")
        if len(name.encode("utf-8", "surrogateescape")) > limits.max_name_bytes:
            raise ArchiveRejected(f"a member's name is too long (over {limits.max_name_bytes} bytes): {name[:80]!r}")
        raw_parts = name.split("/")
        if name.startswith("/") or ".." in raw_parts:
            raise ArchiveRejected(f"member {name!r} would land outside the workspace")
        parts = [p for p in raw_parts if p not in ("", ".")]
        if not parts:
            raise ArchiveRejected(f"member {name!r} names the workspace itself")
        if self.tops is not None and parts[0] not in self.tops:
            raise ArchiveRejected(f"member {name!r} would land outside the workspace (its folders: {sorted(self.tops)})")
        return "/".join(parts)

    def add(self, entry: _Entry) -> None:
        path = entry.path
        if len(self.entries) >= self.limits.max_members:
            raise ArchiveRejected(f"the archive holds more than {self.limits.max_members} members (max_members)")
        if path in self.seen or (path in self.implied and entry.kind != "dir"):
            raise ArchiveRejected(f"member {path!r} appears twice")
        parts = path.split("/")
        parent = ""
        for part in parts[:-1]:
            parent = f"{parent}/{part}" if parent else part
            if parent in self.links:
                raise ArchiveRejected(f"member {path!r} would be written through the link {parent!r}")
            earlier = self.seen.get(parent)
            if earlier is None:
                self.implied.add(parent)
            elif earlier.kind != "dir":
                raise ArchiveRejected(f"member {path!r} is under {parent!r}, which is not a folder")
        if self.tops is not None and len(parts) == 1 and entry.kind != "dir":
            raise ArchiveRejected(f"member {path!r} is one of the archive's folders, and not a folder")
        if entry.kind == "file":
            self.total += entry.size
            if self.total > self.limits.max_unpacked_bytes:
                raise ArchiveRejected(f"the archive unpacks to over {_size(self.limits.max_unpacked_bytes)} (max_unpacked_bytes)")
        elif entry.kind == "symlink":
            if not entry.link or "\x00" in entry.link or len(entry.link) > self.limits.max_name_bytes:
                raise ArchiveRejected(f"symlink {path!r} has an unusable target")
            self.links.add(path)
        elif entry.kind == "hardlink":
            target = self.name(entry.link)
            if target not in self.seen or self.seen[target].kind != "file":
                raise ArchiveRejected(f"hard link {path!r} points at {entry.link!r}, not an earlier file of the archive")
            entry.link = target
            self.links.add(path)
        self.seen[path] = entry
        self.entries.append(entry)

    def times(self, name: object, times_ns: tuple[int, int]) -> None:
        """A folders archive's second entry of a folder: its times, once its contents are in."""
        entry = self.seen.get(self.name(name))
        if entry is None or entry.kind != "dir":
            raise ArchiveRejected(f"the times of {str(name)[:80]!r} come before the folder")
        entry.times_ns = times_ns


# --- writing: into folders this made, nothing followed -----------------------------------------------


def _write(
    entries: list[_Entry], src: IO[bytes], dest: Path, *, tops: frozenset[str] | None, owner: tuple[int, int] | None
) -> None:
    """Write checked entries under `dest`. Every parent of an entry is a folder of the archive
    (checked) or made here, so a path never crosses a link; files are created, never opened."""
    base = os.fspath(dest)
    made: list[str] = []
    known: set[str] = set(tops or ())  # folders that exist: the tops, and those made here
    folders: list[tuple[str, _Entry]] = []
    for entry in entries:
        path = entry.path
        target = f"{base}/{path}"
        parent = path.rpartition("/")[0]
        if parent and parent not in known:
            _make_parents(base, parent, known, made)
        if entry.kind == "dir":
            if path not in known:
                os.mkdir(target, 0o700)  # its mode once its contents are in
                made.append(target)
                known.add(path)
            folders.append((target, entry))
            continue
        if entry.kind == "symlink":
            os.symlink(entry.link, target)
            made.append(target)
            os.utime(target, ns=entry.times_ns, follow_symlinks=False)
            continue
        if entry.kind == "hardlink":
            os.link(f"{base}/{entry.link}", target, follow_symlinks=False)
            continue  # the same file: its owner, mode and times are the earlier name's
        if entry.kind == "fifo":
            os.mkfifo(target, 0o600)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                src.seek(entry.offset)
                _copy(src, out, entry.size, ArchiveRejected(f"the archive ends inside {path!r}"))
        made.append(target)
        os.chmod(target, entry.mode & _KEPT_MODE_BITS)  # a file or FIFO just made here: not a link
        os.utime(target, ns=entry.times_ns, follow_symlinks=False)
    if owner is not None:  # as `Sandbox.give` hands files over; never through a link
        for target in made:
            os.chown(target, *owner, follow_symlinks=False)
    for target, entry in reversed(folders):  # deepest first, once their contents are in
        if tops is None or "/" in entry.path:  # a top folder keeps the mode the sandbox gave it
            os.chmod(target, entry.mode & _KEPT_MODE_BITS)  # a folder made here: not a link
        os.utime(target, ns=entry.times_ns, follow_symlinks=False)


def _make_parents(base: str, parent: str, known: set[str], made: list[str]) -> None:
    """Folders a tar archive names only as parents, or later (checked: none is a link or a file)."""
    folder = ""
    for part in parent.split("/"):
        folder = f"{folder}/{part}" if folder else part
        if folder not in known:
            os.mkdir(f"{base}/{folder}", 0o700)
            made.append(f"{base}/{folder}")
            known.add(folder)


# --- reading the folders encoding --------------------------------------------------------------------

_KINDS: dict[str, Kind] = {"d": "dir", "f": "file", "l": "symlink", "h": "hardlink", "p": "fifo"}


class CheckedArchive:
    """A folders archive read whole and checked (`read_folders`); `write` unpacks it."""

    def __init__(self, src: IO[bytes], checker: _Checker) -> None:
        self._src, self._checker = src, checker

    @property
    def members(self) -> int:
        return len(self._checker.entries)

    def write(self, root: Path, *, owner: tuple[int, int] | None = None) -> int:
        """Unpack into `root`, whose folders (the archive's `names`) exist and are empty; each
        entry made is given to `owner` (uid, gid) when set. Returns the count of entries."""
        _write(self._checker.entries, self._src, root, tops=self._checker.tops, owner=owner)
        return self.members

    def close(self) -> None:
        self._src.close()

    def __enter__(self) -> CheckedArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_folders(archive: Path, names: Sequence[str], *, limits: ArchiveLimits | None = None) -> CheckedArchive:
    """Read and check a `pack_folders` file (nothing is written): every entry under one of
    `names`, the rules and `limits` (default `CHECKPOINT_LIMITS`) of every archive.

    Raises:
        ArchiveRejected: the file is a link, not a regular file, not of this format, or breaks a rule.
    """
    limits = limits or CHECKPOINT_LIMITS
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:  # ELOOP: a symlink
        raise ArchiveRejected(f"{archive.name} cannot be opened as a file of its own: {e.strerror}") from e
    src = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArchiveRejected(f"{archive.name} is not a regular file")
        if info.st_size > limits.max_archive_bytes:
            raise ArchiveRejected(f"{archive.name} is {info.st_size} bytes, over {limits.max_archive_bytes} (max_archive_bytes)")
        if src.read(len(_MAGIC)) != _MAGIC:
            raise ArchiveRejected(f"{archive.name} is not a checkpoint's folders archive")
        checker = _Checker(limits, frozenset(names))
        max_header = 8 * limits.max_name_bytes + 1024  # two names, JSON-escaped, and the rest
        while size_bytes := src.read(4):
            if len(size_bytes) < 4 or (size := int.from_bytes(size_bytes, "big")) > max_header:
                raise ArchiveRejected("the archive holds a damaged or oversized header")
            header = _header(src.read(size))
            kind, times = header.get("k"), _times(header.get("t"))
            if kind == "t":
                checker.times(header.get("p"), times)
                continue
            if kind not in _KINDS:
                raise ArchiveRejected(f"member {str(header.get('p'))[:80]!r} is a device or special file (kind {str(kind)[:8]!r})")
            entry = _Entry(checker.name(header.get("p")), _KINDS[kind], _int(header.get("m")), times)
            if entry.kind == "file":
                entry.size, entry.offset = _int(header.get("s")), src.tell()
                if entry.offset + entry.size > info.st_size:
                    raise ArchiveRejected(f"the archive ends inside {entry.path!r}")
                src.seek(entry.size, os.SEEK_CUR)
            elif entry.kind in ("symlink", "hardlink"):
                link = header.get("l")
                if not isinstance(link, str):
                    raise ArchiveRejected(f"link {entry.path!r} has no target")
                entry.link = link
            checker.add(entry)
    except BaseException:
        src.close()
        raise
    return CheckedArchive(src, checker)


def _header(data: bytes) -> dict[str, Any]:
    try:
        header = json.loads(data)
    except ValueError as e:  # UnicodeDecodeError too
        raise ArchiveRejected(f"the archive holds a damaged header: {e}") from e
    if not isinstance(header, dict):
        raise ArchiveRejected("the archive holds a damaged header: not an object")
    return header


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ArchiveRejected(f"the archive holds a damaged header: {str(value)[:40]!r} is not a size or mode")
    return value


def _times(value: object) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise ArchiveRejected("the archive holds a damaged header: its times are not [atime_ns, mtime_ns]")
    return _int(value[0]), _int(value[1])


# --- reading the workspace encoding (tar.gz) ---------------------------------------------------------


_HEADER_ALLOWANCE = 3 * 512
"""Tar bytes per member besides its data, at most (its header, a PAX header and its record)."""


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
    raw = io.BytesIO(_inflate(data, limits.max_unpacked_bytes + limits.max_members * _HEADER_ALLOWANCE + _MIB))
    try:
        tar = tarfile.open(fileobj=raw, mode="r:")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ArchiveRejected(f"not a tar archive: {type(e).__name__}: {e}") from e
    checker = _Checker(limits)
    with tar:
        while True:
            try:
                info = tar.next()
            except (tarfile.TarError, EOFError, OSError, UnicodeError) as e:
                raise ArchiveRejected(f"the archive is damaged: {type(e).__name__}: {e}") from e
            if info is None:
                break
            if len(checker.entries) >= limits.max_members:  # before its name is looked at
                raise ArchiveRejected(f"the archive holds more than {limits.max_members} members (max_members)")
            mtime_ns = int(info.mtime * 1_000_000_000)
            entry = _Entry(checker.name(info.name), _tar_kind(info), info.mode, (mtime_ns, mtime_ns), info.size, info.linkname)
            entry.offset = info.offset_data
            checker.add(entry)
    _write(checker.entries, raw, dest, tops=None, owner=None)
    return len(checker.entries)


def _tar_kind(info: tarfile.TarInfo) -> Kind:
    if info.isreg() and not info.issparse():
        return "file"
    kind: Kind | None = (
        "dir" if info.isdir() else "symlink" if info.issym() else "hardlink" if info.islnk() else "fifo" if info.isfifo() else None
    )
    if kind is None:
        what = {tarfile.CHRTYPE: "character device", tarfile.BLKTYPE: "block device"}.get(info.type, f"type {info.type!r}")
        raise ArchiveRejected(f"member {info.name!r} is a device or special file ({what})")
    return kind


def _inflate(data: bytes, max_bytes: int) -> bytes:
    """The gzip stream's content, refused past `max_bytes`: a bomb stops there, never in memory."""
    inflater = zlib.decompressobj(wbits=31)  # gzip only
    out = bytearray()
    try:
        out += inflater.decompress(data, max_bytes + 1)
        while inflater.unconsumed_tail and len(out) <= max_bytes:
            out += inflater.decompress(inflater.unconsumed_tail, max_bytes + 1 - len(out))
    except zlib.error as e:
        raise ArchiveRejected(f"not a gzip stream: {e}") from e
    if len(out) > max_bytes:
        raise ArchiveRejected(f"the archive inflates to over {max_bytes} bytes: refused before unpacking")
    if not inflater.eof:
        raise ArchiveRejected("the gzip stream is cut short")
    return bytes(out)
