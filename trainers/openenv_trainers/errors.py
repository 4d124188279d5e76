"""The trainers' errors, one type per boundary.

    TrainerError
    ├── GenerationError            a generation backend or completions server failed or answered badly
    │   ├── LogprobError           logprobs missing, not finite, misaligned, or not processed (after temperature)
    │   └── ServerCompatibilityError   the completions server lacks what training needs (token ids, processed logprobs)
    ├── AccountingError            the chat template cannot extend a conversation token by token
    ├── EpisodeError               one episode failed (its environment, its tools, or its time limit)
    │   ├── AgentFailed            an intercepted agent failed before its first model call (carries `agent_run`)
    │   └── EpisodeTimeout
    └── WorkerError                the rollout worker stopped producing
        ├── WorkerStuck            nothing produced for too long while episodes are in flight
        └── WorkerStarved          every episode fails (environments down, circuit breakers open)

A failing tool is not an error here: its message goes back to the policy as the tool's result,
and the episode goes on (it is counted in the `tools/errors` metric).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AccountingError",
    "AgentFailed",
    "EpisodeError",
    "EpisodeTimeout",
    "GenerationError",
    "LogprobError",
    "ServerCompatibilityError",
    "TrainerError",
    "WorkerError",
    "WorkerStarved",
    "WorkerStuck",
]


class TrainerError(Exception):
    """Base of every error raised by `openenv_trainers`."""


class GenerationError(TrainerError):
    """A generation backend or an OpenAI-compatible completions server failed or answered badly."""


class LogprobError(GenerationError):
    """A completion's logprobs cannot be trained on: missing, not finite, misaligned with the
    sampled tokens, or raw (before temperature) where processed ones are required.

    Logprobs are never filled in: a completion without them fails here instead of training on
    made-up values.
    """


class ServerCompatibilityError(GenerationError):
    """The completions server lacks a feature training needs (token ids in the answer, processed
    logprobs). The message names the server flag that provides it."""


class AccountingError(TrainerError):
    """A conversation cannot be extended token by token: the chat template does not preserve the
    rendered history as a prefix when messages are appended, or re-tokenizing would change the
    tokens the policy sampled."""


class EpisodeError(TrainerError):
    """One episode failed: its environment could not be reset, graded or reached."""


class AgentFailed(EpisodeError):
    """An intercepted agent failed (non-zero exit, timeout) before its first model call: nothing
    to train on, and not the policy's doing. `agent_run` is what the environment reported."""

    def __init__(self, message: str, *, agent_run: Any) -> None:
        super().__init__(message)
        self.agent_run = agent_run


class EpisodeTimeout(EpisodeError):
    """One episode ran past its time limit (`WorkerConfig.episode_timeout_s`)."""


class WorkerError(TrainerError):
    """The rollout worker cannot go on; `check_health` raises it with the cause."""


class WorkerStuck(WorkerError):
    """No sample was produced for longer than the health check allows while episodes were running."""


class WorkerStarved(WorkerError):
    """Episodes keep failing, so the buffer is starved (every environment down, breakers open)."""
