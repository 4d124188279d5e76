"""Wordle's rules, in-process: feedback scoring, task selection, episode end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wordle_env import MAX_GUESSES, WordleAction, WordleEnvironment, allowed, answers, score_guess


@pytest.mark.parametrize(
    ("guess", "answer", "expected"),
    [
        ("crane", "crane", "GGGGG"),
        ("speed", "abide", "..Y.Y"),  # the second e has no unmatched copy left
        ("eerie", "speed", "YY..."),
        ("lolly", "hello", ".YGG."),  # greens claim their letters before yellows
        ("abbey", "babes", "YYGG."),
    ],
)
def test_feedback_scores_repeated_letters_like_wordle(guess: str, answer: str, expected: str) -> None:
    assert score_guess(guess, answer) == expected


def test_task_set_is_shipped_and_playable() -> None:
    words = answers()
    assert len(words) == 1200
    assert all(len(w) == 5 and w.isalpha() for w in words)
    assert set(words) <= allowed()


def test_seed_picks_the_same_task_and_task_id_wins() -> None:
    a, b = WordleEnvironment(), WordleEnvironment()
    a.reset(seed=7)
    b.reset(seed=7)
    assert a.state.task_id == b.state.task_id
    b.reset(seed=7, task_id=3)
    assert b.state.task_id == 3
    assert b.reveal() == answers()[3]


def test_invalid_guesses_cost_nothing_and_episode_ends_after_six() -> None:
    env = WordleEnvironment()
    env.reset(task_id=0)
    answer = env.reveal()
    obs = env.step(WordleAction(guess="zz"))
    assert "not a 5-letter word" in obs.message and obs.guesses_left == MAX_GUESSES
    obs = env.step(WordleAction(guess="qqqqq"))
    assert "not in the word list" in obs.message and obs.guesses_left == MAX_GUESSES
    wrong = next(w for w in sorted(allowed()) if w != answer)
    for _ in range(MAX_GUESSES):
        obs = env.step(WordleAction(guess=wrong))
    assert obs.done and obs.message == "Out of guesses." and not env.state.solved
    assert env.step(WordleAction(guess=answer)).message == "The game is over."


def test_solving_ends_the_episode() -> None:
    env = WordleEnvironment()
    env.reset(task_id=42)
    obs = env.step(WordleAction(guess=env.reveal()))
    assert obs.done and env.state.solved and obs.message == "Solved in 1!"
