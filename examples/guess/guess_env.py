"""Guess the hidden number: the multi-turn task of the async GRPO run on the GPU (docs/training.md).

The `openenv init` scaffold's game, made small enough for a 135M-parameter model: the number lies
between 1 and `high` (10 by default), the agent has `max_guesses` (5) calls of the `guess` tool,
and every wrong guess is answered "higher" or "lower" with the guess repeated, so a policy that
reads the feedback finds the number in at most 4 guesses while one that ignores it needs luck.
The reward is computed host-side by `grader.py` from the final state.
"""

from __future__ import annotations

import random
import secrets
from typing import Any

from openenv_sdk import Action, Environment, Observation, State, tool


class GuessAction(Action):
    """One guess of the hidden number."""

    guess: int


class GuessObservation(Observation):
    message: str = ""
    guesses_left: int = 0


class GuessState(State):
    target: int | None = None
    high: int = 10
    max_guesses: int = 5
    guesses: list[int] = []
    invalid: int = 0
    solved: bool = False


class GuessEnvironment(Environment[GuessAction, GuessObservation, GuessState]):
    """Guess the hidden number between 1 and `high`; every guess is answered higher, lower or correct."""

    name = "guess"
    version = "0.1.0"
    BLOCKING = False  # every method is quick and never blocks: run on the event loop

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        target: int | None = None,
        high: int = 10,
        max_guesses: int = 5,
        **task: Any,
    ) -> GuessObservation:
        if high < 2 or max_guesses < 1:
            raise ValueError("high must be at least 2 and max_guesses at least 1")
        if target is None:
            target = random.Random(seed).randint(1, high)
        if not 1 <= target <= high:
            raise ValueError(f"target must be in [1, {high}], got {target}")
        # The episode id is public (the agent may see it): it must never carry the answer.
        self.state = GuessState(
            episode_id=episode_id or f"guess-{secrets.token_hex(4)}", target=target, high=high, max_guesses=max_guesses
        )
        self.episode_done = False
        return GuessObservation(message=f"Guess a number between 1 and {high}.", guesses_left=max_guesses)

    def step(self, action: GuessAction) -> GuessObservation:
        self.state.step_count += 1
        return self._play(action.guess)

    @tool
    def guess(self, number: int) -> str:
        """Guess the hidden number. Answers "higher", "lower" or "correct".

        Args:
            number: your guess.
        """
        return self._play(number).message

    def _play(self, number: int) -> GuessObservation:
        state = self.state
        left = state.max_guesses - len(state.guesses)
        if state.target is None:
            return GuessObservation(message="Call reset first.", guesses_left=left)
        if self.episode_done:
            return GuessObservation(message="The game is over.", guesses_left=left, done=True)
        if not 1 <= number <= state.high:
            state.invalid += 1
            return GuessObservation(message=f"{number} is not between 1 and {state.high}.", guesses_left=left)
        state.guesses = [*state.guesses, number]
        left -= 1
        if number == state.target:
            state.solved = True
            self.episode_done = True
            message = f"{number} is correct! Found in {len(state.guesses)} guesses."
        elif left == 0:
            self.episode_done = True
            message = f"{number} is wrong. Out of guesses."
        else:
            direction = "higher" if number < state.target else "lower"
            message = f"{number} is wrong: the number is {direction} than {number}."
        reward = float(state.solved) if self.episode_done else None
        return GuessObservation(message=message, guesses_left=left, done=self.episode_done, reward=reward)
