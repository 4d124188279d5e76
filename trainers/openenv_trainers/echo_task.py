"""The training task of the demo and the tests: call the echo environment's tool with an exact text.

Why this task: Wordle is far beyond a 135M-parameter model (it would earn ~0 reward, so GRPO
would see zero-variance groups and learn nothing), while "call `echo` with exactly this text"
is within its reach yet not solved at the start: the model must emit a well-formed
`<tool_call>` block, name the tool, and copy the text exactly. Its reward is graded host-side by
`ExactEchoGrader` from the server's transcript of the agent's MCP calls, so it rises as the
policy learns the format and then the exact copy. Nothing is added to the environment: the task
text travels in the reset arguments and the prompt, and the grader is defined here.
"""

from __future__ import annotations

import difflib
import random
from typing import Any

from openenv_sdk.rubric import Grader, reward

from .tasks import task_row

__all__ = ["SYSTEM_PROMPT", "ExactEchoGrader", "echo_messages", "echo_rows", "warmup_conversations"]

SYSTEM_PROMPT = "You are a helpful assistant."

_WORDS = ["apple", "river", "stone", "cloud", "green", "light", "music", "paper", "table", "window", "orange", "silver", "garden", "winter", "summer", "yellow", "planet", "rocket", "forest", "candle", "mirror", "bridge", "castle", "dragon", "pencil", "turtle", "violin", "zebra", "coffee", "butter", "cotton", "marble"]


def echo_messages(text: str) -> list[dict[str, Any]]:
    """The prompt of one echo task."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Call the echo tool with the exact text: {text}"},
    ]


def warmup_conversations(n: int, *, seed: int = 1) -> list[list[dict[str, Any]]]:
    """`n` worked echo episodes for a supervised warm-up, on made-up letter strings (never the
    training tasks' words): the request, the `echo` call, its result, and a short answer."""
    import string

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 7))) for _ in range(rng.randint(1, 2)))
        call = {"type": "function", "function": {"name": "echo", "arguments": {"message": text}}}
        out.append(
            [
                *echo_messages(text),
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": "echo", "content": text},
                {"role": "assistant", "content": "Done."},
            ]
        )
    return out


def echo_rows(n: int, *, seed: int = 0, words: int = 2) -> list[dict[str, Any]]:
    """`n` dataset rows (`task_row`): a prompt, and the task field `text` (passed to `reset`)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        text = " ".join(rng.choice(_WORDS) for _ in range(words))
        rows.append(task_row(echo_messages(text), text=text))
    return rows


class ExactEchoGrader(Grader):
    """Up to 1.0: 0.2 for calling `echo`, 0.3 for how close its text is, 0.5 for the exact text.

    Only the first `echo` call counts. Graded from the server's transcript of the agent's tool
    calls and the task's `text`.
    """

    @staticmethod
    def _first_echo(transcript: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((c for c in transcript if c.get("tool") == "echo" and not c.get("error")), None)

    @reward(weight=0.2)
    def called(self, transcript: list[dict[str, Any]]) -> float:
        return 1.0 if self._first_echo(transcript) is not None else 0.0

    @reward(weight=0.3)
    def similar(self, transcript: list[dict[str, Any]], task: dict[str, Any]) -> float:
        call = self._first_echo(transcript)
        if call is None:
            return 0.0
        said = str((call.get("arguments") or {}).get("message", ""))
        return difflib.SequenceMatcher(None, said, str(task["text"])).ratio()

    @reward(weight=0.5)
    def exact(self, transcript: list[dict[str, Any]], task: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        call = self._first_echo(transcript)
        said = None if call is None else (call.get("arguments") or {}).get("message")
        return float(said == task["text"]), {"said": said, "wanted": task["text"]}
