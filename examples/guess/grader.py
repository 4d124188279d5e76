"""The guessing game's grader: runs host-side, with the trainer, never inside the server."""

from __future__ import annotations

from typing import Any

from openenv_sdk.rubric import Grader, reward


class GuessGrader(Grader):
    """Up to 1.0: 0.8 for finding the number, less 0.1 per guess after the first (fewer guesses are
    better), and 0.2 for guessing only numbers in range that were not guessed before."""

    @reward(weight=0.8)
    def solved(self, state: dict[str, Any]) -> float:
        if not state["solved"]:
            return 0.0
        return max(0.0, 1.0 - 0.125 * (len(state["guesses"]) - 1))

    @reward(weight=0.2)
    def clean(self, state: dict[str, Any]) -> float:
        guesses = state["guesses"]
        if not guesses:
            return 0.0
        repeats = len(guesses) - len(set(guesses))
        return max(0.0, 1.0 - 0.5 * (repeats + state["invalid"]))
