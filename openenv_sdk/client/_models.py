"""What the clients return: `StepResult` (typed), and the episode record `Trajectory`."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

__all__ = ["StepResult", "Trajectory", "TrajectoryStep"]

ObsT = TypeVar("ObsT")


class StepResult(BaseModel, Generic[ObsT]):
    """The answer to `reset` or `step`.

    `observation` is the environment's observation model for typed clients (`EnvClient`), a
    plain dict for generic ones (`GenericEnvClient`).
    """

    observation: ObsT = Field(description="The observation: the environment's model, or a dict.")
    reward: bool | int | float | None = Field(
        default=None, description="The environment's own per-step reward, passed through unchanged."
    )
    done: bool = Field(default=False, description="Whether the episode has ended.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data about this observation.")


class TrajectoryStep(BaseModel):
    """One `step` of an episode, as JSON: the action sent and what came back."""

    action: dict[str, Any] = Field(description="The action as sent on the wire.")
    observation: dict[str, Any] = Field(description="The observation as received (without reward and done).")
    reward: bool | int | float | None = Field(default=None, description="The step's reward, as the server sent it.")
    done: bool = Field(default=False, description="Whether the episode ended with this step.")


class Trajectory(BaseModel):
    """The orchestrator's record of the current episode, for host-side graders.

    A client starts a new one at every successful `reset`; every successful `step` appends.
    The agent's own MCP tool calls are recorded by the server: `client.call("transcript")`.
    """

    task: dict[str, Any] = Field(default_factory=dict, description="The keyword arguments of the last `reset`.")
    initial_observation: dict[str, Any] | None = Field(
        default=None, description="The observation `reset` returned (without reward and done)."
    )
    steps: list[TrajectoryStep] = Field(default_factory=list, description="Every step since the last reset.")

    @property
    def actions(self) -> list[dict[str, Any]]:
        """The actions sent, in order."""
        return [step.action for step in self.steps]

    @property
    def observations(self) -> list[dict[str, Any]]:
        """The observations received: the reset's first (when there was a reset), then each step's."""
        first = [] if self.initial_observation is None else [self.initial_observation]
        return first + [step.observation for step in self.steps]

    @property
    def rewards(self) -> list[float | None]:
        """Each step's reward (`None` where the environment gave none)."""
        return [None if step.reward is None else float(step.reward) for step in self.steps]

    @property
    def total_reward(self) -> float:
        """The sum of the steps' rewards, `None` counted as 0."""
        return sum(r for r in self.rewards if r is not None)

    @property
    def done(self) -> bool:
        """Whether the last step ended the episode."""
        return bool(self.steps) and self.steps[-1].done
