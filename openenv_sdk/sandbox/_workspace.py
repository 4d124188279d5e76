"""A session's folder as a tmpfs of bounded size and inode count: the disk bound of a session.

tmpfs is chosen over a quota or a loop filesystem because it works wherever the sandbox does: as
root on a host, and in a container granted SYS_ADMIN (the capability bubblewrap already needs
there), with no loop device, no filesystem with quotas enabled and no image file. Its pages are
memory, charged to the writer's cgroup: the session's memory bound covers them as well. Writing
past either bound fails with ENOSPC, in the writer only.

The mount is made in the server's mount namespace (bubblewrap binds the folder into each
command's) and detached at `close()`; a crashed server's is detached by the next holder of its uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import tempfile
from pathlib import Path

__all__ = ["mount_tmpfs", "remount_writable", "tmpfs_support", "unmount"]

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MNT_DETACH = 0x2


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_tmpfs(path: Path, *, size_bytes: int | None, inodes: int | None, mode: int) -> None:
    """Mount a fresh tmpfs on `path` (root-owned, `mode`), nosuid and nodev.

    Raises:
        OSError: the mount was refused (not root, no CAP_SYS_ADMIN, a confining LSM).
    """
    options = [f"mode={mode:o}", "uid=0", "gid=0"]
    if size_bytes is not None:
        options.append(f"size={size_bytes}")
    if inodes is not None:
        options.append(f"nr_inodes={inodes}")
    data = ",".join(options).encode()
    if _libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")


def remount_writable(path: Path) -> None:
    """Make the (bind) mount on `path` read-write, keeping nosuid, nodev and noexec.

    Raises:
        OSError: refused (no CAP_SYS_ADMIN).
    """
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC
    if _libc().mount(None, os.fsencode(path), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"remount {path} read-write: {os.strerror(err)}")


def unmount(path: Path) -> bool:
    """Detach the mount on `path` (its files go once nothing holds them); whether one was there."""
    if not os.path.ismount(path):
        return False
    return _libc().umount2(os.fsencode(path), MNT_DETACH) == 0


@functools.cache
def tmpfs_support() -> str | None:
    """None when a bounded tmpfs can be mounted here; else why not (probed once per process)."""
    if os.geteuid() != 0:
        return "the server is not root (a bounded tmpfs needs CAP_SYS_ADMIN)"
    folder = Path(tempfile.mkdtemp(prefix="openenv-tmpfs-probe-"))
    try:
        mount_tmpfs(folder, size_bytes=1024**2, inodes=64, mode=0o700)
        unmount(folder)
        return None
    except OSError as e:
        return f"a tmpfs cannot be mounted ({e.strerror}); a container needs SYS_ADMIN"
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(folder)
