"""A local scripted policy for `--policy scripted:...`: wins Wordle on even attempts, loses on odd
ones, and gives made-up token ids and logprobs (as a local model would give real ones)."""

from __future__ import annotations

from typing import Any

from tests.evaluation.policy_server import answer, miss

calls: list[str] = []


def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any]:
    calls.append(context.key)
    assert [t["function"]["name"] for t in tools] == ["guess"]
    if context.turn > 0:
        return {"content": "Done.", "token_ids": [2], "logprobs": [-0.1]}
    word = answer(context.task_id) if context.attempt % 2 == 0 else miss(context.task_id)
    return {
        "content": None,
        "tool_calls": [{"name": "guess", "arguments": {"word": word}}],
        "prompt_token_ids": [1, 1, 1],
        "token_ids": [5, 6],
        "logprobs": [-1.0, -0.5],
    }



def echo_act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
    """Echo: say the task's id once through the `echo` tool, then stop."""
    if context.turn == 0:
        return {"tool_calls": [{"name": "echo", "arguments": {"message": f"hello {context.task_id}"}}]}
    return "Done."


def echo_grader(task: dict[str, Any], transcript: list[dict[str, Any]]) -> float:
    """1 when the agent echoed `hello seed-<seed>` for the seed it was reset with."""
    wanted = f"hello seed-{task['seed']}"
    return float(any(e["tool"] == "echo" and e["output"] == wanted for e in transcript))
