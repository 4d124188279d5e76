"""Kept for imports of `openenv_sdk.regrade._archive`: the workspace archive and its hostile-safe
unpacking are `openenv_sdk.workspace_archive`'s (one owner, for checkpoints and regrade alike)."""

from ..workspace_archive import ArchiveLimits, ArchiveRejected, WorkspaceTooLarge, pack_workspace, unpack_workspace

__all__ = ["ArchiveLimits", "ArchiveRejected", "WorkspaceTooLarge", "pack_workspace", "unpack_workspace"]
