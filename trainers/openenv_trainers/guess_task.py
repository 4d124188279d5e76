"""The multi-turn task of the async GRPO run: find a hidden number with the `guess` tool.

The environment is `examples/guess` (served locally with `openenv serve`): a number between 1 and
10, at most 5 guesses, each wrong guess answered "higher" or "lower". Its grader (host-side)
gives up to 0.8 for finding the number (fewer guesses are better) and 0.2 for guessing only new
numbers in range. A policy that ignores the feedback finds the number about half the time in
5 guesses; one that bisects always does, in at most 4.

SmolLM2-135M-Instruct never emits a parseable tool call from the prompt alone (see the echo
demo), so the run first teaches the format with a short SFT warm-up on `warmup_conversations`:
games played by **random** guessing among the numbers not yet tried, ignoring the feedback.
Whatever the policy learns beyond that (reading "higher"/"lower") it learns from the reward.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .tasks import task_row

__all__ = ["ENV_DIR", "guess_messages", "guess_rows", "warmup_conversations"]

ENV_DIR = Path(__file__).resolve().parents[2] / "examples" / "guess"
"""The environment folder (in a checkout of the repository)."""

SYSTEM_PROMPT = "You are a helpful assistant."


def guess_messages(high: int = 10, max_guesses: int = 5) -> list[dict[str, Any]]:
    """The prompt of one game."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"I am thinking of a number between 1 and {high}. Find it with the guess tool: after each "
            f"wrong guess I tell you whether the number is higher or lower. You have {max_guesses} guesses.",
        },
    ]


def guess_rows(n: int, *, seed: int = 0, high: int = 10, max_guesses: int = 5) -> list[dict[str, Any]]:
    """`n` dataset rows: the prompt and the task fields `target`, `high`, `max_guesses` (reset arguments)."""
    rng = random.Random(seed)
    return [
        task_row(guess_messages(high, max_guesses), target=rng.randint(1, high), high=high, max_guesses=max_guesses)
        for _ in range(n)
    ]


def warmup_conversations(n: int, *, seed: int = 1, high: int = 10, max_guesses: int = 5) -> list[list[dict[str, Any]]]:
    """`n` worked games for the SFT warm-up: tool calls with **random** guesses among the numbers
    not yet tried (the feedback is ignored), the environment's answers, and a closing message."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        target = rng.randint(1, high)
        messages = guess_messages(high, max_guesses)
        untried = list(range(1, high + 1))
        rng.shuffle(untried)
        for k in range(max_guesses):
            number = untried.pop()
            call = {"type": "function", "function": {"name": "guess", "arguments": {"number": number}}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            if number == target:
                result = f"{number} is correct! Found in {k + 1} guesses."
            elif k == max_guesses - 1:
                result = f"{number} is wrong. Out of guesses."
            else:
                direction = "higher" if number < target else "lower"
                result = f"{number} is wrong: the number is {direction} than {number}."
            messages.append({"role": "tool", "name": "guess", "content": result})
            if number == target or k == max_guesses - 1:
                break
        messages.append({"role": "assistant", "content": "Found it." if number == target else "I did not find it."})
        out.append(messages)
    return out
