"""Failures that are never rewards: why an episode's reward could not be decided.

A grader that could not decide says so, with a cause, instead of returning a number: a judge
that answered HTTP 500, a sandbox the host killed while the check ran, a reset that failed, a
grader that crashed. `agrade` raises `openenv_sdk.errors.EpisodeFailed` carrying a `Failure`
(a pydantic model: it goes on the wire and into records as is), and every consumer leaves the
episode out of training (the group's advantages are computed on the episodes that survive) and
counts it by cause.

A timeout of the policy's own making is not a failure: its tool command ran past the limit, or
its episode ran out of turns. That is behaviour, graded as any other (a check that finds
nothing scores 0). Records name it `policy_timeout` so that it is counted beside the failures,
but it stays a reward.

    try:
        score = await agrade(grader, session)
    except EpisodeFailed as e:
        record(failure=e.failure)          # e.failure.cause == FailureCause.JUDGE, ...

`classify(error, stage=...)` is the one table from an exception to its cause (docs/failures.md).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["EXCLUDED_CAUSES", "Failure", "FailureCause", "Stage", "classify"]

Stage = Literal["reset", "episode", "grading"]
"""Where the episode failed: resetting it, playing it (tool calls, the time limit), or grading it."""


class FailureCause(StrEnum):
    """Why an episode has no reward (or, for `POLICY_TIMEOUT`, why its reward is what it is)."""

    RESET = "reset"
    """The environment could not be reset (its reset raised, or no session could be made)."""
    SANDBOX = "sandbox"
    """The sandbox was killed or unusable while the episode or its check ran (the host's doing)."""
    JUDGE = "judge"
    """The LLM judge could not be reached or answered an error (HTTP 5xx, 4xx, a timeout) after its retries."""
    GRADER = "grader"
    """The grader's own code raised (a bug, a missing file, a value it could not read)."""
    TIMEOUT = "timeout"
    """A limit of ours ran out: the orchestrator's episode limit, the client's or server's request timeout."""
    INFRASTRUCTURE = "infrastructure"
    """The environment's server or the connection to it failed (a crash, a closed connection, a container gone)."""
    POLICY_TIMEOUT = "policy_timeout"
    """The policy's own timeout (a tool command past its limit, no turns left): NOT a failure, graded as usual."""


EXCLUDED_CAUSES = frozenset(c for c in FailureCause if c is not FailureCause.POLICY_TIMEOUT)
"""Causes whose episodes have no reward and are left out of training."""


class Failure(BaseModel):
    """An episode whose reward could not be decided, and why."""

    cause: FailureCause = Field(description="Why (see `FailureCause`).")
    stage: Stage = Field(description="Where: reset, episode or grading.")
    message: str = Field(description="What went wrong, for a human (the error's text).")
    error_type: str | None = Field(default=None, description="The exception's class name, when one was raised.")

    @property
    def excluded(self) -> bool:
        """True: no reward, left out of training (every cause but `policy_timeout`)."""
        return self.cause in EXCLUDED_CAUSES


_SANDBOX_TYPES = ("SandboxError", "SandboxKilled", "IsolationUnavailable")
# The server's text for an orchestrator call that raised: "<method> raised <Type>: <message>". Only
# the method and the class name come before the first colon, and neither is the agent's to write.
_RAISED = re.compile(r"^\w+ raised (\w+): ")


def classify(error: BaseException, *, stage: Stage) -> Failure:
    """The failure an exception means at `stage`; an `EpisodeFailed` keeps its own.

    Reset errors are `reset` whatever raised them (except our timeouts); at grading, an
    exception the SDK does not know is the grader's own (`grader`).
    """
    from .errors import (
        EpisodeFailed,
        ExecutionError,
        InvalidActionError,
        ProviderError,
        RequestError,
        RequestTimeout,
        SandboxError,
        ServerError,
        ServerTimeout,
        TransportError,
    )

    if isinstance(error, EpisodeFailed):
        return error.failure
    message = str(error) or type(error).__name__
    cause: FailureCause
    if isinstance(error, TimeoutError | RequestTimeout | ServerTimeout):
        cause = FailureCause.TIMEOUT
    elif isinstance(error, SandboxError):
        cause = FailureCause.SANDBOX
    elif (
        isinstance(error, ExecutionError)
        and (m := _RAISED.match(error.args[0] if error.args else ""))
        and m.group(1) in _SANDBOX_TYPES
    ):
        cause = FailureCause.SANDBOX  # an orchestrator call whose sandbox was killed, reported by the server
    elif stage == "reset":
        cause = FailureCause.RESET
    elif stage == "grading" and isinstance(error, InvalidActionError | RequestError):
        cause = FailureCause.GRADER  # the grader asked for a call or arguments the environment has not
    elif isinstance(error, TransportError | ServerError | ProviderError | OSError):
        cause = FailureCause.INFRASTRUCTURE
    else:
        cause = FailureCause.GRADER if stage == "grading" else FailureCause.INFRASTRUCTURE
    return Failure(cause=cause, stage=stage, message=message[:2000], error_type=type(error).__name__)
