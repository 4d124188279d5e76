"""The orchestrator-only calls that keep and restore an episode's workspace (never over MCP).

An environment whose grader reads the workspace mixes `WorkspaceSnapshots` in:

    class TerminalEnvironment(WorkspaceSnapshots, Environment[...]):
        ...

and gains `snapshot_workspace` (the workspace as a bounded tar.gz, base64, taken once every
process of the agent has ended) and `restore_workspace` (after `reset` of the same task: the
fresh session's workspace emptied and the archive unpacked into it by `unpack_workspace`, then
handed to the session's user). The archive and its hostile-safe unpacking are
`openenv_sdk.workspace_archive`'s, which checkpoints use too. By default the workspace is `self._sandbox.workspace` and the
agent's processes are `self._sandbox`'s; override `snapshot_folder`, `snapshot_quiesce` and
`snapshot_give` for another layout.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from ..sandbox import remove_tree
from ..tools import orchestrator
from ..workspace_archive import ArchiveLimits, ArchiveRejected, pack_workspace, unpack_workspace

__all__ = ["WorkspaceSnapshots"]


class WorkspaceSnapshots:
    """Mixin: `snapshot_workspace` / `restore_workspace` over the session's workspace."""

    def snapshot_folder(self) -> Path:
        """The folder graded: the session's workspace.

        Raises:
            ValueError: no episode (reset first).
        """
        sandbox = getattr(self, "_sandbox", None)
        if sandbox is None:
            raise ValueError("no episode: call reset first")
        return Path(sandbox.workspace)

    def snapshot_quiesce(self) -> None:
        """End every process of the agent, so that the workspace stays as it is while read."""
        sandbox = getattr(self, "_sandbox", None)
        if sandbox is not None:
            sandbox.kill_all()

    def snapshot_give(self, path: Path) -> None:
        """Hand a restored file or folder to the session's user."""
        sandbox = getattr(self, "_sandbox", None)
        if sandbox is not None:
            sandbox.give(path)

    @orchestrator
    def snapshot_workspace(self, max_archive_bytes: int = ArchiveLimits.max_archive_bytes) -> dict[str, Any]:
        """The workspace as it is now, for regrading: `archive` (a tar.gz, base64) and its `bytes`.

        Every process of the agent is ended first (as grading does).

        Raises:
            WorkspaceTooLarge: the workspace is over the archive's limits.
        """
        folder = self.snapshot_folder()
        self.snapshot_quiesce()
        data = pack_workspace(folder, ArchiveLimits(max_archive_bytes=int(max_archive_bytes)))
        return {"archive": base64.b64encode(data).decode("ascii"), "bytes": len(data)}

    @orchestrator
    def restore_workspace(self, archive: str) -> dict[str, Any]:
        """Replace the fresh episode's workspace by a `snapshot_workspace` archive (call after `reset`).

        Raises:
            ArchiveRejected: the archive is not base64 of a tar.gz, or breaks a rule of
                `unpack_workspace` (the workspace is then left empty).
        """
        folder = self.snapshot_folder()
        try:
            data = base64.b64decode(archive, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ArchiveRejected(f"the archive is not base64: {e}") from e
        self.snapshot_quiesce()
        for entry in list(folder.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                remove_tree(entry)
            else:
                entry.unlink()
        members = unpack_workspace(data, folder)
        for name in os.listdir(folder):
            self.snapshot_give(folder / name)
        return {"members": members}
