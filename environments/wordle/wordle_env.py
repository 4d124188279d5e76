"""Wordle: guess a five-letter word in six tries, with letter-by-letter feedback.

Tasks are the words in `answers.txt` (task_id = line index); a seed picks one when no task_id
is given. Guesses must be words in `words.txt`. The agent plays through the `guess` tool (or a
plain `{"guess": "crane"}` action); the reward is computed host-side by `grader.WordleGrader`.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

from openenv_sdk import Action, Environment, Observation, State, orchestrator, tool
from openenv_sdk.tasks import TaskRecord

HERE = Path(__file__).resolve().parent
WORD_LENGTH = 5
MAX_GUESSES = 6


@cache
def answers() -> tuple[str, ...]:
    return tuple((HERE / "answers.txt").read_text().split())


@cache
def allowed() -> frozenset[str]:
    return frozenset((HERE / "words.txt").read_text().split()) | frozenset(answers())


def score_guess(guess: str, answer: str) -> str:
    """Feedback per letter: G (right place), Y (in the word, elsewhere), . (not in the word).

    Repeated letters are scored as in Wordle: greens first, then yellows while unmatched
    copies of the letter remain in the answer.
    """
    marks = ["."] * WORD_LENGTH
    remaining = Counter(a for g, a in zip(guess, answer, strict=True) if g != a)
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            marks[i] = "G"
        elif remaining[g] > 0:
            marks[i] = "Y"
            remaining[g] -= 1
    return "".join(marks)


class WordleAction(Action):
    """One guess: a five-letter English word."""

    guess: str


class WordleObservation(Observation):
    message: str = ""
    board: list[str] = []
    guesses_left: int = MAX_GUESSES


class WordleState(State):
    task_id: int | None = None
    guesses: list[str] = []
    feedback: list[str] = []
    solved: bool = False
    max_guesses: int = MAX_GUESSES


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    """Guess the hidden five-letter word in six tries; feedback marks letters G (right place), Y (elsewhere), . (absent)."""

    name = "wordle"
    version = "0.1.0"
    BLOCKING = False  # pure computation on small data

    def __init__(self) -> None:
        self._answer = ""

    @classmethod
    def tasks(cls) -> list[TaskRecord]:
        """One task per answer (`task_id` = line of `answers.txt`): the first 1,000 are `train`, the
        last 200 `test`. A record holds the id only, never the word."""
        return [
            TaskRecord(id=str(i), split="train" if i < 1000 else "test", reset_kwargs={"task_id": i})
            for i in range(len(answers()))
        ]

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: int | None = None, **task: Any
    ) -> WordleObservation:
        words = answers()
        if task_id is None:
            task_id = random.Random(seed).randrange(len(words))
        if not 0 <= task_id < len(words):
            raise ValueError(f"task_id must be in [0, {len(words)}), got {task_id}")
        self._answer = words[task_id]
        self.state = WordleState(episode_id=episode_id or f"wordle-{task_id}", task_id=task_id)
        self.episode_done = False
        return WordleObservation(
            message=f"Guess the {WORD_LENGTH}-letter word in {MAX_GUESSES} tries. Feedback per letter: "
            "G = right letter, right place; Y = in the word, elsewhere; . = not in the word.",
        )

    def step(self, action: WordleAction) -> WordleObservation:
        return self._play(action.guess)

    @tool
    def guess(self, word: str) -> str:
        """Guess the hidden word. Returns the feedback for every guess so far.

        Args:
            word: a five-letter English word.
        """
        obs = self._play(word)
        return "\n".join([obs.message, *obs.board])

    @orchestrator
    def reveal(self) -> str:
        """The hidden word (for host-side graders and debugging; never reachable by the agent)."""
        return self._answer

    def _play(self, word: str) -> WordleObservation:
        state = self.state
        board = [f"{g.upper()} {f}" for g, f in zip(state.guesses, state.feedback, strict=True)]
        left = state.max_guesses - len(state.guesses)
        if not self._answer:
            return WordleObservation(message="Call reset first.", board=board, guesses_left=left)
        if self.episode_done:
            return WordleObservation(message="The game is over.", board=board, guesses_left=left, done=True)
        word = word.strip().lower()
        if len(word) != WORD_LENGTH or not word.isalpha():
            return WordleObservation(message=f"{word!r} is not a {WORD_LENGTH}-letter word; try again.", board=board, guesses_left=left)
        if word not in allowed():
            return WordleObservation(message=f"{word!r} is not in the word list; try again.", board=board, guesses_left=left)
        feedback = score_guess(word, self._answer)
        state.guesses = [*state.guesses, word]
        state.feedback = [*state.feedback, feedback]
        state.step_count += 1
        state.solved = feedback == "G" * WORD_LENGTH
        left -= 1
        board.append(f"{word.upper()} {feedback}")
        if state.solved:
            self.episode_done = True
            message = f"Solved in {len(state.guesses)}!"
        elif left == 0:
            self.episode_done = True
            message = "Out of guesses."
        else:
            message = f"{left} guesses left."
        return WordleObservation(message=message, board=board, guesses_left=left, done=self.episode_done)
