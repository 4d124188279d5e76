"""Keep an episode's final state at its end (`openenv eval/collect --keep-state`).

The runner calls `StateKeeper.capture` after the episode is graded, in the episode's own session:
the state and trajectory the grader saw, the server's transcript, and (for an environment with
`WorkspaceSnapshots`) the workspace archive, taken once the agent's processes have ended, as the
grader's own copy was. Keeping never changes an episode's grade: what cannot be kept is noted
(`KeptEpisode.error`) and the episode is then not regradable.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydantic import BaseModel

from ..errors import OpenEnvError, ServerError
from ..workspace_archive import ArchiveLimits
from ._store import KeptEpisode, KeptRun, StateStore

__all__ = ["StateKeeper"]


class StateKeeper:
    """Keeps each episode's final state in `store` (see `StateStore`).

    Args:
        store: the run's `state/` folder.
        env: the environment as the run names it (a folder, image or URL): regrading serves it again.
        grader: the run's `--grader`, if any.
        max_archive_bytes: the largest workspace archive kept (compressed); a larger one is
            noted as not kept.
    """

    def __init__(
        self, store: StateStore, *, env: str, grader: str | None = None,
        max_archive_bytes: int = ArchiveLimits.max_archive_bytes,
    ) -> None:  # fmt: skip
        if max_archive_bytes < 1:
            raise ValueError(f"max_archive_bytes must be at least 1, got {max_archive_bytes}")
        self.store = store
        self.max_archive_bytes = max_archive_bytes
        self._workspace: bool | None = None  # whether the server has snapshot_workspace (learnt once)
        store.write_run(KeptRun(env=env, grader=grader, max_archive_bytes=max_archive_bytes))

    async def capture(self, *, key: str, task_id: str, reset_kwargs: dict[str, Any], client: Any) -> KeptEpisode:
        """Keep the episode in `client`'s session; never raises (a failure is the kept episode's `error`)."""
        kept = KeptEpisode(key=key, task_id=task_id, reset_kwargs=dict(reset_kwargs))
        archive: bytes | None = None
        try:
            state = await client.state()
            kept.state = state.model_dump(mode="json") if isinstance(state, BaseModel) else dict(state)
            trajectory = getattr(client, "trajectory", None)
            if trajectory is not None:
                kept.trajectory = trajectory.model_dump(mode="json")
            kept.transcript = await _optional_call(client, "transcript")
            archive = await self._archive(client)
        except Exception as e:  # keeping is best effort: the grade stands
            kept.error = f"{type(e).__name__}: {e}"
        self.store.save(kept, archive)
        return kept

    async def _archive(self, client: Any) -> bytes | None:
        if self._workspace is False:
            return None
        try:
            answer = await client.call("snapshot_workspace", max_archive_bytes=self.max_archive_bytes)
        except ServerError as e:
            if e.code == "UNKNOWN_CALL":
                self._workspace = False  # no workspace to keep (wordle): the state is all
                return None
            raise
        self._workspace = True
        try:
            return base64.b64decode(answer["archive"], validate=True)
        except (KeyError, TypeError, binascii.Error) as e:
            raise OpenEnvError(f"snapshot_workspace answered without an archive: {e}") from e


async def _optional_call(client: Any, name: str) -> Any:
    try:
        return await client.call(name)
    except ServerError as e:
        if e.code == "UNKNOWN_CALL":
            return None
        raise
