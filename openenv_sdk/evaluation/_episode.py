"""One episode at the chat level: the policy's tool calls go to the environment over MCP, and the
host-side grader grades it.

    reset(**task.reset_kwargs) -> the first observation, rendered as the user message
    loop: policy turn -> each tool call through the session's MCP binding -> tool messages
    until the policy answers without a tool call, or `max_turns` turns
    grade (host-side) -> reward, components, passed

`openenv eval` and `openenv collect` run every episode through `play_episode`. (The trainers'
`openenv_trainers.episode` is its token-level twin: it samples from token ids itself.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..episode_config import EpisodeConfig
from ..errors import EpisodeFailed, ToolCallError
from ..failures import classify
from ..prompt import observation_text
from ..rubric import agrade
from ._causes import cause_of
from ._policy import Policy, TurnContext
from ._records import EpisodeRecord, PlannedEpisode, TurnTokens

__all__ = ["openai_tools", "play_episode", "tool_result_text"]

def openai_tools(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI function schemas from the server's tools (`ToolSchema`s from `/schema`, MCP `Tool`s, or dicts)."""
    out = []
    for tool in tools:
        if isinstance(tool, Mapping):
            name, description = tool["name"], tool.get("description") or ""
            parameters = tool.get("input_schema") or tool.get("inputSchema")
        else:
            name, description = tool.name, tool.description or ""
            parameters = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
        parameters = parameters or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
    return out


def tool_result_text(result: Any) -> tuple[str, bool]:
    """The text of an MCP `CallToolResult` as the policy sees it, and whether the tool failed."""
    failed = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else json.dumps(block.model_dump(mode="json")))
    if not parts:
        structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
        if structured is not None:
            parts.append(json.dumps(structured))
    return "\n".join(parts), failed


async def play_episode(
    record: EpisodeRecord,
    client: Any,
    policy: Policy,
    planned: PlannedEpisode,
    *,
    tools: list[dict[str, Any]],
    rubric: Any,
    config: EpisodeConfig,
) -> EpisodeRecord:
    """Play `planned` in `client`'s session (an `AsyncGenericEnvClient`) and grade it, filling `record`.

    `record` is filled as the episode goes, so when this raises, it holds the conversation so far.

    Raises:
        EpisodeFailed: the reset failed (cause `reset`) or grading could not decide (its cause).
        openenv_sdk.errors.OpenEnvError: the environment or the policy failed (a tool that
            fails, an unknown tool, or arguments that are not JSON are not errors: the policy
            sees the message as the tool's result).
    """
    started = time.monotonic()
    record.tools = tools
    t0 = time.monotonic()
    try:
        first = await client.reset(**planned.reset_kwargs)
    except Exception as e:  # no episode to grade: a reset failure, never a reward
        raise EpisodeFailed(classify(e, stage="reset")) from e
    record.env_s += time.monotonic() - t0
    if config.system_prompt is not None:
        record.messages.append({"role": "system", "content": config.system_prompt})
    record.messages.append({"role": "user", "content": observation_text(first.observation)})

    while True:
        context = TurnContext(
            key=planned.key, task_id=planned.task_id, attempt=planned.attempt, turn=record.turns, task=planned.task
        )
        t0 = time.monotonic()
        turn = await policy.act([dict(m) for m in record.messages], tools, context)
        record.policy_s += time.monotonic() - t0
        record.messages.append(turn.message)
        record.prompt_tokens += turn.prompt_tokens
        record.completion_tokens += turn.completion_tokens
        if turn.token_ids is not None or turn.logprobs is not None:
            record.tokens.append(
                TurnTokens(turn=record.turns, prompt_token_ids=turn.prompt_token_ids, token_ids=turn.token_ids,
                           logprobs=turn.logprobs)
            )  # fmt: skip
        record.turns += 1
        calls = turn.message.get("tool_calls") or []
        if not calls:
            record.stop_reason = "length" if turn.finish_reason == "length" else "no_tool_calls"
            break
        for call in calls:
            t0 = time.monotonic()
            text = await _call_tool(record, client, call)
            record.env_s += time.monotonic() - t0
            record.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        if record.turns >= config.max_turns:
            record.stop_reason = "max_turns"
            record.policy_timeout = True  # the policy's own timeout: graded as usual
            break

    t0 = time.monotonic()
    score = await agrade(rubric, client)
    record.env_s += time.monotonic() - t0
    record.reward = float(score.value)
    record.reward_components = {k: float(v) for k, v in score.components.items()}
    record.passed = record.reward >= config.pass_threshold
    record.duration_s = time.monotonic() - started
    return record


async def _call_tool(record: EpisodeRecord, client: Any, call: Mapping[str, Any]) -> str:
    """Run one tool call; a policy's mistake comes back as the tool's result, counted in `tool_errors`."""
    record.tool_calls += 1
    name = call["function"]["name"]
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except ValueError as e:
        return _tool_error(record, f"error: the arguments of {name!r} are not valid JSON ({e}); send a JSON object")
    if not isinstance(arguments, dict):
        return _tool_error(
            record, f"error: the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
        )
    try:
        result = await client.call_tool(name, **arguments)
    except ToolCallError as e:  # an unknown tool: the policy's mistake, told to it
        return _tool_error(record, f"error: {e}")
    text, failed = tool_result_text(result)
    return _tool_error(record, text) if failed else text


def _tool_error(record: EpisodeRecord, text: str) -> str:
    """Count a failed tool call by its cause; its text, which the policy sees."""
    record.tool_errors += 1
    cause = cause_of(text)
    record.tool_error_causes[cause] = record.tool_error_causes.get(cause, 0) + 1
    return text
