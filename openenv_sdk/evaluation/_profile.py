"""Per-task pass rates of a run (`openenv eval --profile`): the file a training curriculum reads.

    output/profile.json   a `PassRateProfile`: for each task, its reset arguments, graded
                          attempts, passes and pass rate

A trainer's task sampler (`openenv_trainers.mixture`) matches its dataset rows to these tasks by
their reset arguments, skips tasks the policy always or never passes, and prefers the middle.
A failed episode (no reward) is not an attempt: it counts in `errors`, never as a miss.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import OpenEnvError
from ._records import EpisodeRecord

__all__ = ["PROFILE_FILE", "PassRateProfile", "ProfileError", "TaskPassRate", "task_profile"]

PROFILE_FILE = "profile.json"


class ProfileError(OpenEnvError, ValueError):
    """A profile file that cannot be read: missing, not JSON, or not a pass-rate profile."""


class TaskPassRate(BaseModel):
    """One task's attempts in the run."""

    task_id: str
    split: str | None = None
    reset_kwargs: dict[str, Any] = Field(default_factory=dict, description="What identifies the task to a trainer.")
    graded: int = Field(ge=0, description="Attempts that ended with a reward.")
    passed: int = Field(ge=0, description="Graded attempts whose reward reached the pass threshold.")
    errors: int = Field(default=0, ge=0, description="Attempts that failed (no reward): not counted in the rate.")
    pass_rate: float | None = Field(description="passed / graded; None when nothing was graded.")
    mean_reward: float | None = None


class PassRateProfile(BaseModel):
    """Per-task pass rates of one policy on one environment."""

    format: Literal["openenv.pass_rates/1"] = "openenv.pass_rates/1"
    env: str
    model: str
    pass_threshold: float = Field(description="An attempt passed when its reward was at least this.")
    tasks: list[TaskPassRate]

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> PassRateProfile:
        """Read a profile file.

        Raises:
            ProfileError: the file is missing, not JSON, or not a profile (the message says which).
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as e:
            raise ProfileError(
                f"{file}: cannot read the profile ({e.strerror or e}); make one with openenv eval --profile"
            ) from e
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the file"
            raise ProfileError(f"{file}: not a pass-rate profile ({where}: {first['msg']})") from e


def task_profile(records: Iterable[EpisodeRecord], *, env: str, model: str, pass_threshold: float) -> PassRateProfile:
    """The per-task pass rates of a run's records (one per planned episode), tasks in first-seen order."""
    by_task: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    tasks = []
    for task_id, attempts in by_task.items():
        graded = [r for r in attempts if r.error is None and r.reward is not None]
        passed = sum(1 for r in graded if r.reward is not None and r.reward >= pass_threshold)
        rewards = [r.reward for r in graded if r.reward is not None]
        tasks.append(
            TaskPassRate(
                task_id=task_id,
                split=attempts[0].split,
                reset_kwargs=dict(attempts[0].reset_kwargs),
                graded=len(graded),
                passed=passed,
                errors=len(attempts) - len(graded),
                pass_rate=passed / len(graded) if graded else None,
                mean_reward=sum(rewards) / len(rewards) if rewards else None,
            )
        )
    return PassRateProfile(env=env, model=model, pass_threshold=pass_threshold, tasks=tasks)
