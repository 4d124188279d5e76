"""Where a run keeps its episodes' final states: `RUN_DIR/state/`.

    state/run.json               how the run was made: the environment and grader it named
    state/<digest>.json          one episode's `KeptEpisode` (state, trajectory, transcript)
    state/<digest>.tar.gz        its workspace archive (only environments with a workspace)

`<digest>` is the sha256 of the episode's key (`task_id#attempt`), so any task id makes a safe
file name. A resumed run overwrites an episode's files when it plays it again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..errors import OpenEnvError

__all__ = ["STATE_DIR", "KeptEpisode", "KeptRun", "NotKept", "StateStore"]

STATE_DIR = "state"
RUN_FILE = "run.json"


class NotKept(OpenEnvError, ValueError):
    """regrade: the run folder holds no kept state (run `openenv eval --keep-state`), or it is damaged."""


class KeptRun(BaseModel):
    """How the run was made, as regrading needs it."""

    env: str = Field(description="The environment as the run named it: a folder, an image or a URL.")
    grader: str | None = Field(default=None, description="The run's --grader (None: the folder's own).")
    max_archive_bytes: int


class KeptEpisode(BaseModel):
    """What the grader saw at the episode's end."""

    key: str
    task_id: str
    reset_kwargs: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict, description="The final `state`, as the grader read it.")
    trajectory: dict[str, Any] = Field(default_factory=dict, description="The client's `Trajectory`.")
    transcript: Any = Field(default=None, description="The server's `transcript` (the agent's tool calls).")
    archive: str | None = Field(default=None, description="The workspace archive's file name, when there is one.")
    archive_sha256: str | None = None
    error: str | None = Field(default=None, description="Why the workspace was not kept (e.g. over the limit).")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class StateStore:
    """A run's `state/` folder."""

    def __init__(self, run_dir: str | Path) -> None:
        self.folder = Path(run_dir) / STATE_DIR

    def write_run(self, run: KeptRun) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        _write(self.folder / RUN_FILE, run.model_dump_json(indent=2).encode())

    def read_run(self) -> KeptRun:
        """Raises:
        NotKept: no kept state here, or `run.json` is damaged.
        """
        path = self.folder / RUN_FILE
        if not path.is_file():
            raise NotKept(
                f"{self.folder.parent} holds no kept state ({path} is missing): run `openenv eval ... --keep-state`"
            )
        try:
            return KeptRun.model_validate_json(path.read_bytes())
        except ValueError as e:
            raise NotKept(f"{path} is damaged: {e}") from e

    def save(self, episode: KeptEpisode, archive: bytes | None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = _digest(episode.key)
        if archive is not None:
            episode.archive = f"{name}.tar.gz"
            episode.archive_sha256 = hashlib.sha256(archive).hexdigest()
            _write(self.folder / episode.archive, archive)
        _write(self.folder / f"{name}.json", episode.model_dump_json().encode())

    def load(self, key: str) -> KeptEpisode | None:
        """The kept episode of `key`, or None when none was kept.

        Raises:
            NotKept: its file is damaged.
        """
        path = self.folder / f"{_digest(key)}.json"
        if not path.is_file():
            return None
        try:
            episode = KeptEpisode.model_validate_json(path.read_bytes())
        except ValueError as e:
            raise NotKept(f"{path} is damaged: {e}") from e
        if episode.key != key:
            raise NotKept(f"{path} holds episode {episode.key!r}, not {key!r}")
        return episode

    def archive(self, episode: KeptEpisode, *, max_bytes: int) -> bytes | None:
        """The episode's workspace archive, checked against its digest.

        Raises:
            NotKept: missing, over `max_bytes`, or not the archive that was kept.
        """
        if episode.archive is None:
            return None
        path = self.folder / f"{_digest(episode.key)}.tar.gz"
        try:
            size = path.stat().st_size
            if size > max_bytes:
                raise NotKept(f"{path} is {size} bytes, over {max_bytes}")
            data = path.read_bytes()
        except OSError as e:
            raise NotKept(f"the workspace archive of {episode.key!r} cannot be read: {e}") from e
        if hashlib.sha256(data).hexdigest() != episode.archive_sha256:
            raise NotKept(f"{path} is not the archive kept for {episode.key!r} (its sha256 differs)")
        return data


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: a crash leaves the earlier file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
