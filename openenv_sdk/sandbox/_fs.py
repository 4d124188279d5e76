"""Folders that sandboxed users write to: handing them over and taking them back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["chown_tree", "remove_tree"]


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """Give `top` and everything in it to `uid:gid`, deepest first (once a folder is theirs, a
    root without CAP_DAC_OVERRIDE can no longer enter it). Symlinks are not followed."""
    for folder, dirs, files in os.walk(top, topdown=False):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
    os.chown(top, uid, gid, follow_symlinks=False)


def remove_tree(top: Path) -> None:
    """Remove a tree that unprivileged users wrote to, whatever modes they left. As root without
    CAP_DAC_OVERRIDE (a container), each folder is taken over (CAP_CHOWN) before it is entered.
    Run it when no process of theirs is left; best effort, never raises."""
    as_root = os.geteuid() == 0
    stack = [(Path(top), False)]
    while stack:
        path, emptied = stack.pop()
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:
            continue
        try:
            if not stat.S_ISDIR(info.st_mode):
                os.unlink(path)
            elif emptied:
                os.rmdir(path)
            else:
                if as_root and info.st_uid != 0:
                    os.chown(path, 0, 0, follow_symlinks=False)
                if stat.S_IMODE(info.st_mode) & 0o700 != 0o700:
                    os.chmod(path, 0o700)
                stack.append((path, True))
                stack.extend((Path(entry.path), False) for entry in os.scandir(path))
        except OSError:
            continue  # best effort: a leftover must not break the session
