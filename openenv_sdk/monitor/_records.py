"""The monitor over a run's `episodes.jsonl` (`openenv eval`, `collect`): flags per episode."""

from __future__ import annotations

from pathlib import Path

from ._monitor import EpisodeFlags, Monitor

__all__ = ["scan_records"]


def scan_records(path: str | Path, *, monitor: Monitor | None = None) -> dict[str, EpisodeFlags]:
    """Each recorded episode's flags, by its key (`task_id#attempt`); failed episodes (no reward)
    are checked too: their transcript signals still count. Lines a run could not have written
    are skipped, as `EpisodeLog.load` skips them."""
    from ..evaluation._records import EpisodeLog  # the records' one reader

    monitor = monitor or Monitor()
    records = EpisodeLog(path).load()
    task_of = {key: {"task_id": r.task_id, **r.reset_kwargs} for key, r in records.items()}
    return {key: monitor.check_messages(r.messages, reward=r.reward, env=r.env, task=task_of[key]) for key, r in records.items()}
