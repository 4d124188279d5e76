"""A scripted policy whose success depends on the task, for the mixture benchmark (bench_mixture.py).

Each task has a fixed skill: the chance that an episode solves it. As a real policy's, most
tasks are always solved or never solved, and some lie between: 35 % of the tasks have skill 0,
30 % skill 1, and 35 % a skill drawn uniformly in [0.15, 0.85] (`skill`, from a hash of the
task, so every run and both players below agree). An episode either solves its task on the
first guess (it knows the answer, as Wordle's oracle does) or makes one wrong guess and stops:

- Wordle (`environments/wordle`, task = line of answers.txt): a win is reward 1.7, a miss (a
  word with no letter of the answer) 0.0.
- Guess (`examples/guess`, task = the reset seed): a win is 1.0, a wrong guess then stopping 0.2.

So a group of a task with skill 0 or 1 always has zero reward variance; one in between has it
with probability s^n + (1-s)^n. The same skills drive two players:

- `act`: `openenv eval --policy scripted:benchmarks/mixture_policy.py:act` (the profile);
- `script`: `intercept.ScriptedBackend`'s script for the rollout worker (training), from the
  decoded prompt, whose user message names the task (`[wordle task 17]`, `[guess seed 17]`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORDLE_DIR = REPO / "environments" / "wordle"
GUESS_DIR = REPO / "examples" / "guess"
GUESS_HIGH = 10

_rng = random.Random(0)


def reseed(seed: int) -> None:
    """Make the episodes' outcomes reproducible from here on."""
    _rng.seed(seed)


def skill(env: str, task: int) -> float:
    """The chance that an episode of this task wins (fixed per task)."""
    digest = hashlib.sha256(f"{env}:{task}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    v = int.from_bytes(digest[8:16], "big") / 2**64
    if u < 0.35:
        return 0.0
    if u < 0.65:
        return 1.0
    return 0.15 + 0.7 * v


@cache
def _words(name: str) -> tuple[str, ...]:
    return tuple((WORDLE_DIR / name).read_text().split())


def wordle_word(task: int, *, win: bool) -> str:
    answer = _words("answers.txt")[task]
    return answer if win else next(w for w in _words("words.txt") if not set(w) & set(answer))


def guess_number(seed: int, *, win: bool) -> int:
    target = random.Random(seed).randint(1, GUESS_HIGH)  # as examples/guess picks it from the seed
    return target if win else target % GUESS_HIGH + 1


def wordle_prompt(task: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Guess the hidden five-letter word with the guess tool. [wordle task {task}]"}]


def guess_prompt(seed: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Find the number between 1 and {GUESS_HIGH} with the guess tool. [guess seed {seed}]"}]


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """`openenv eval`'s scripted policy (one guess, then stop)."""
    if context.turn > 0:
        return "Done."
    params = tools[0]["function"]["parameters"]["properties"]
    if "word" in params:
        task = int(context.task_id)
        arguments: dict[str, Any] = {"word": wordle_word(task, win=_rng.random() < skill("wordle", task))}
    else:
        seed = int(str(context.task_id).removeprefix("seed-"))
        arguments = {"number": guess_number(seed, win=_rng.random() < skill("guess", seed))}
    return {"content": None, "tool_calls": [{"name": "guess", "arguments": arguments}]}


def oracle(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """The worked episodes `mixture_model.py` warms the tiny model up on: Wordle's word from the
    task id (as Wordle's own oracle), Guess by bisection on the feedback (finds any number in 4)."""
    if "word" not in tools[0]["function"]["parameters"]["properties"]:
        return _bisect(messages)
    if context.turn > 0:
        return "Done."
    return {
        "content": None,
        "tool_calls": [{"name": "guess", "arguments": {"word": wordle_word(int(context.task_id), win=True)}}],
    }


def _bisect(messages: list[dict[str, Any]]) -> dict[str, Any] | str:
    low, high, last = 1, GUESS_HIGH, None
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            arguments = message["tool_calls"][0]["function"]["arguments"]
            last = int((json.loads(arguments) if isinstance(arguments, str) else arguments)["number"])
        elif message["role"] == "tool" and last is not None:
            if "higher" in message["content"]:
                low = last + 1
            elif "lower" in message["content"]:
                high = last - 1
            else:
                return "Found it."
    return {"content": None, "tool_calls": [{"name": "guess", "arguments": {"number": (low + high) // 2}}]}


_TASK = re.compile(r"\[(wordle task|guess seed) (\d+)\]")


def script(prompt: str) -> str:
    """The rollout worker's scripted turn, from the decoded prompt (`intercept.ScriptedBackend`)."""
    from openenv_trainers.intercept import assistant_turn

    if "<tool_response>" in prompt:
        return "Done."
    found = _TASK.search(prompt)
    if found is None:
        raise ValueError("the prompt names no task")
    kind, task = found.group(1), int(found.group(2))
    if kind == "wordle task":
        return assistant_turn(calls=[("guess", {"word": wordle_word(task, win=_rng.random() < skill("wordle", task))})])
    return assistant_turn(calls=[("guess", {"number": guess_number(task, win=_rng.random() < skill("guess", task))})])
