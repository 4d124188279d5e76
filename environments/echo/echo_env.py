"""Echo: the smallest complete environment.

The agent has one tool, `echo`, which returns its message. An orchestrator can also step with
a plain `{"message": ...}` action. The episode's own reward is the length of the last message
(as OpenEnv's echo does), so reward pass-through is visible end to end.
"""

from __future__ import annotations

from typing import Any

from openenv_sdk import Action, Environment, Observation, State, tool


class EchoAction(Action):
    """Say something; the environment says it back."""

    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoState(State):
    messages: list[str] = []


class EchoEnvironment(Environment[EchoAction, EchoObservation, EchoState]):
    """Echoes every message back; the smallest complete environment."""

    name = "echo"
    version = "0.1.0"
    BLOCKING = False  # every method is quick and never blocks: run on the event loop

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> EchoObservation:
        self.state = EchoState(episode_id=episode_id or f"echo-{seed if seed is not None else 0}")
        return EchoObservation(echoed_message="Echo environment ready!")

    def step(self, action: EchoAction) -> EchoObservation:
        state = self.state
        state.step_count += 1
        state.messages.append(action.message)
        return EchoObservation(
            echoed_message=action.message,
            message_length=len(action.message),
            reward=len(action.message) * 0.1,
        )

    @tool
    def echo(self, message: str) -> str:
        """Return the message unchanged.

        Args:
            message: the text to echo back.
        """
        self.state.messages.append(message)
        return message
