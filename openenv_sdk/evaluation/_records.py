"""What one episode leaves behind (`EpisodeRecord`), and the JSONL file that holds a run's episodes.

The file is append-only: a record is written as soon as its episode ends, so an interrupted run
keeps what it finished, and a later run over the same file skips those episodes (`done_keys`).
A record whose episode failed is kept too, with its `error`; it is not done, so a resumed run
plays it again and the newer record wins.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import OpenEnvError
from ..failures import Failure

__all__ = ["REWARD_BOUND", "EpisodeLog", "EpisodeRecord", "PlannedEpisode", "RecordRejected", "TurnTokens", "parse_record"]


class PlannedEpisode(BaseModel):
    """One episode to play: a task (from the Task API, or a seed) and which attempt at it."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    split: str | None = None
    attempt: int = Field(ge=0, description="0-based: the attempt's position among the task's rollouts.")
    reset_kwargs: dict[str, Any] = Field(default_factory=dict)
    task: dict[str, Any] = Field(default_factory=dict, description="The task's public fields, as served.")

    @property
    def key(self) -> str:
        """What identifies the episode in a results file (resuming skips a key already done)."""
        return f"{self.task_id}#{self.attempt}"


class TurnTokens(BaseModel):
    """The tokens of one assistant turn, when the policy gives them (a local policy, or a server
    that returns token ids and logprobs, as vLLM does with `return_token_ids` and `logprobs`)."""

    turn: int = Field(ge=0, description="0-based index of the assistant turn in the episode.")
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = Field(default=None, description="The sampled tokens' logprobs, one per token.")


class EpisodeRecord(BaseModel):
    """One episode: the conversation, the grade, and what it cost. `error` is set when it failed."""

    key: str
    task_id: str
    split: str | None = None
    attempt: int = 0
    reset_kwargs: dict[str, Any] = Field(default_factory=dict)
    env: str = ""
    policy: str = ""
    model: str = ""
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="OpenAI chat messages: system, user (the task), then assistant turns and tool results.",
    )
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The tools offered, as OpenAI function schemas.")
    tokens: list[TurnTokens] = Field(default_factory=list, description="Per assistant turn, when the policy gives them.")
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    passed: bool | None = Field(default=None, description="reward >= the run's pass threshold (None when not graded).")
    error: str | None = Field(default=None, description="Why the episode failed; its reward is then None.")
    failure: Failure | None = Field(
        default=None, description="The failure's cause and stage (docs/failures.md), when it failed: never a reward."
    )
    policy_timeout: bool = Field(
        default=False, description="The policy ran out of turns: its own timeout, graded as usual (not a failure)."
    )
    stop_reason: str = Field(default="", description="no_tool_calls, max_turns, length or error.")
    hacking: list[str] = Field(
        default_factory=list, description="The reward-hacking monitor's signals that fired (docs/monitor.md)."
    )
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = Field(default=0, description="Tool calls that failed (a tool error, unknown tool, bad arguments).")
    tool_error_causes: dict[str, int] = Field(
        default_factory=dict, description="The failed tool calls by cause (`cause_of` their message)."
    )
    prompt_tokens: int = Field(default=0, description="As the policy's `usage` reported, summed over turns.")
    completion_tokens: int = 0
    policy_s: float = Field(default=0.0, description="Seconds spent waiting for the policy.")
    env_s: float = Field(default=0.0, description="Seconds spent in the environment (reset, tools, grading).")
    duration_s: float = 0.0
    finished_at: str = ""

    @classmethod
    def start(cls, planned: PlannedEpisode, *, env: str, policy: str, model: str) -> EpisodeRecord:
        return cls(
            key=planned.key,
            task_id=planned.task_id,
            split=planned.split,
            attempt=planned.attempt,
            reset_kwargs=dict(planned.reset_kwargs),
            env=env,
            policy=policy,
            model=model,
        )


REWARD_BOUND = 1e9
"""A loaded record's reward (and each component) lies within +-this: no grader gives more, so a
larger one is a damaged or hand-made line."""


class RecordRejected(OpenEnvError, ValueError):
    """A line of `episodes.jsonl` that is JSON but not a record an earlier run could have written."""


def _no_constant(name: str) -> Any:
    raise RecordRejected(f"{name} is not a number JSON allows")


def parse_record(line: bytes) -> EpisodeRecord:
    """One line of `episodes.jsonl` as a record, checked as written by a run: UTF-8, JSON
    without NaN or Infinity, the record's fields, its key `task_id#attempt`, a finite reward
    within `REWARD_BOUND` (None when the episode failed), counts and times not negative.

    Raises:
        ValueError: the line is none of that (`UnicodeDecodeError`, `json.JSONDecodeError`,
            `RecursionError` is turned into `RecordRejected`, pydantic's `ValidationError`).
    """
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError as e:  # nested past the parser's depth
        raise RecordRejected("nested too deep") from e
    record = EpisodeRecord.model_validate(value)
    if record.key != f"{record.task_id}#{record.attempt}":
        raise RecordRejected(f"key {record.key!r} is not task_id#attempt")
    rewards = [record.reward] if record.reward is not None else []
    if any(not (-REWARD_BOUND <= r <= REWARD_BOUND) for r in [*rewards, *record.reward_components.values()]):
        raise RecordRejected(f"reward out of range: {record.reward}")
    if record.error is not None and record.reward is not None:
        raise RecordRejected("a failed episode has no reward")
    if record.failure is not None and record.error is None:
        raise RecordRejected("a failure without its error")
    counts = (record.attempt, record.turns, record.tool_calls, record.tool_errors, record.prompt_tokens,
              record.completion_tokens, record.policy_s, record.env_s, record.duration_s)  # fmt: skip
    if any(n < 0 for n in record.tool_error_causes.values()):
        raise RecordRejected("a negative count of tool errors")
    if any(n < 0 for n in counts) or not all(math.isfinite(n) for n in counts):
        raise RecordRejected("a negative or non-finite count or time")
    return record


class EpisodeLog:
    """A run's `episodes.jsonl`: read what earlier runs left, append each episode as it ends."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.unreadable_lines = 0
        """Lines `load()` skipped: a line cut short by a crash (even inside a UTF-8 character),
        or one that is not a well-formed record (`parse_record`). Their episodes are not done:
        a resumed run plays them again."""

    def load(self) -> dict[str, EpisodeRecord]:
        """The records by key; when a key appears twice, the later line wins."""
        records: dict[str, EpisodeRecord] = {}
        self.unreadable_lines = 0
        if not self.path.is_file():
            return records
        with self.path.open("rb") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    record = parse_record(line)
                except (ValueError, ValidationError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                    self.unreadable_lines += 1
                    continue
                records[record.key] = record
        return records

    def done_keys(self) -> set[str]:
        """Keys of the episodes that ended without an error (a resumed run skips them)."""
        return {key for key, record in self.load().items() if record.error is None}

    def append(self, record: EpisodeRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            # A line cut short by a crash must not swallow the next record.
            lead = b"\n" if f.tell() and not self._ends_with_newline() else b""
            f.write(lead + record.model_dump_json().encode() + b"\n")

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, 2)
            return f.read(1) == b"\n"

    def extend(self, records: Iterable[EpisodeRecord]) -> None:
        for record in records:
            self.append(record)
