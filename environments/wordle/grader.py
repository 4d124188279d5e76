"""Wordle's host-side grader: solved, with a bonus for speed and partial credit for greens."""

from __future__ import annotations

from typing import Any

from openenv_sdk.rubric import Grader, reward


class WordleGrader(Grader):
    """1.0 for solving; up to 0.5 more for solving fast; up to 0.2 for the most greens in a guess."""

    @reward(weight=1.0)
    def solved(self, state: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        return bool(state["solved"]), {"guesses": state["guesses"], "feedback": state["feedback"]}

    @reward(weight=0.5)
    def speed(self, state: dict[str, Any]) -> float:
        if not state["solved"]:
            return 0.0
        return (state["max_guesses"] - len(state["guesses"]) + 1) / state["max_guesses"]

    @reward(weight=0.2)
    def greens(self, state: dict[str, Any]) -> float:
        return max((f.count("G") / 5 for f in state["feedback"]), default=0.0)
