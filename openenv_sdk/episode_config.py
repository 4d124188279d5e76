"""How an episode is configured: the one owner of its limits and defaults, for `openenv eval`,
`openenv collect` and the trainers (whose `openenv_trainers.EpisodeConfig` adds sampling and
token limits to the same `EpisodeLimits`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "EPISODE_RETRIES",
    "EPISODE_TIMEOUT_S",
    "MAX_TURNS",
    "EpisodeConfig",
    "EpisodeLimits",
]

MAX_TURNS = 10
"""The most assistant turns of an episode, unless configured."""
EPISODE_RETRIES = 2
"""How many times a training episode that failed in the environment (an error, a timeout) is run
again on a fresh session: the async worker's and the `rollout_func`'s default."""
EPISODE_TIMEOUT_S = 600.0
"""The longest one training episode may run, in seconds."""

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in an environment through its tools. Call the tools to complete the task. "
    "When you are done, answer without calling a tool."
)


@dataclass(frozen=True, kw_only=True)
class EpisodeLimits:
    """What bounds every episode, evaluated or trained."""

    max_turns: int = MAX_TURNS
    """The most assistant turns; an episode still calling tools after them stops (`max_turns`)."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")


@dataclass(frozen=True, kw_only=True)
class EpisodeConfig(EpisodeLimits):
    """How an `openenv eval` / `openenv collect` episode is played and judged."""

    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT
    """The system message; None sends none."""
    pass_threshold: float = 1.0
    """An episode passes (for pass@k) when its reward is at least this."""
