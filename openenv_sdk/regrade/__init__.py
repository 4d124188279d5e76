"""Regrade kept episodes without calling the model again (`openenv regrade RUN_DIR`).

`openenv eval --keep-state` / `openenv collect --keep-state` keep, for each episode, its final
state and a bounded archive of its workspace (`StateKeeper` into a `StateStore`, under
`RUN_DIR/state/`). Regrading (`aregrade`) restores each workspace into a fresh session of the
environment (`WorkspaceSnapshots`, the orchestrator-only calls an environment gains with it) and
runs the grader exactly as at the episode's end: over the kept state, its calls (`run_checks`,
...) reaching the restored session. The archive is the agent's data: `unpack_workspace` refuses
what could climb out of the folder.
"""

from typing import TYPE_CHECKING

from ..workspace_archive import ArchiveLimits, ArchiveRejected, WorkspaceTooLarge, pack_workspace, unpack_workspace
from ._keep import StateKeeper
from ._snapshot import WorkspaceSnapshots
from ._store import STATE_DIR, KeptEpisode, KeptRun, NotKept, StateStore

__all__ = [
    "STATE_DIR",
    "ArchiveLimits",
    "ArchiveRejected",
    "EpisodeRegrade",
    "KeptEpisode",
    "KeptRun",
    "KeptSession",
    "NotKept",
    "RegradeResult",
    "StateKeeper",
    "StateStore",
    "TaskDiff",
    "WorkspaceSnapshots",
    "WorkspaceTooLarge",
    "aregrade",
    "pack_workspace",
    "unpack_workspace",
]

if TYPE_CHECKING:
    from ._regrade import EpisodeRegrade, KeptSession, RegradeResult, TaskDiff, aregrade


def __getattr__(name: str) -> object:
    # the regrading side (the evaluation package, httpx) is imported only when asked for: an
    # environment server imports this package for `WorkspaceSnapshots` alone
    if name in _LAZY:
        from . import _regrade

        return getattr(_regrade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LAZY = ("EpisodeRegrade", "KeptSession", "RegradeResult", "TaskDiff", "aregrade")
