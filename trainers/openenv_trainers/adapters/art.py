"""ART (`openpipe-art` 0.5): episodes of any openenv-sdk environment as `art.Trajectory` objects.

    rollout = OpenEnvRollout(EnvSource(env_dir="environments/wordle"))
    groups = await art.gather_trajectory_groups(
        art.TrajectoryGroup(rollout(model, task) for _ in range(8)) for task in tasks
    )
    await model.train(groups)

`rollout(model, task)` is an ART rollout function: it opens a session, resets it with
`task["reset"]`, and plays the episode with `model.openai_client()` (chat completions with the
server's tools, `tool_choice="auto"`, `logprobs=True` so ART can train on the sampled tokens); each
tool call goes to the environment over MCP in that session. The trajectory holds the messages and
the model's `Choice`s (what ART trains on), the tools, and the host-side grader's score as its
`reward` (components in `metrics` as `openenv/<name>`). The session is closed whatever happens;
an environment failure raises `openenv_sdk.errors.OpenEnvError` (ART's gather counts it as the
rollout's exception), a failing tool does not (its message is the tool's result).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import art
from openai import omit
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam
from openai.types.chat.chat_completion import Choice

from openenv_sdk.episode_config import MAX_TURNS, EpisodeLimits
from openenv_sdk.errors import EpisodeFailed, ToolCallError
from openenv_sdk.failures import classify
from openenv_sdk.prompt import observation_text
from openenv_sdk.rubric import Rubric, agrade

from ..chat import tool_result_text, tool_schemas
from ..sources import EnvSource
from ._common import resolve_grader

__all__ = ["OpenEnvRollout"]


class OpenEnvRollout:
    """An ART rollout function over one environment (its server shared by every rollout)."""

    def __init__(
        self,
        source: EnvSource,
        *,
        grader: Rubric | Any | str | None = None,
        system_prompt: str | None = None,
        max_turns: int = MAX_TURNS,
        completion_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """Describe the rollouts; the source's server starts on the first.

        Args:
            source: where the environment runs (`EnvSource(base_url | env_dir= | image= | fleet=)`).
            grader: the host-side grader (a rubric, or `package.module:Name`); default the one
                the source's `openenv.yaml` names.
            system_prompt: a system message for tasks whose prompt has none.
            max_turns: the most model turns; an episode still calling tools then stops there.
            completion_kwargs: extra arguments of each `chat.completions.create` (temperature,
                max_completion_tokens, ...); `logprobs=True` unless given.

        Raises:
            ValueError: no grader was given and the source's folder names none.
        """
        EpisodeLimits(max_turns=max_turns)  # the SDK's check of the limit
        self.source = source
        self.grader = resolve_grader(source, grader)
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.completion_kwargs = {"logprobs": True, **dict(completion_kwargs or {})}

    async def __call__(self, model: art.Model, task: Mapping[str, Any]) -> art.Trajectory:
        """One episode of `task` (`reset`: reset arguments; `prompt`: a string or messages,
        default the reset observation's text) played by `model`; returns its trajectory.

        Raises:
            openenv_sdk.errors.EpisodeFailed: the reset failed or grading could not decide (its
                `failure.cause`; docs/failures.md): never a reward. ART's gather keeps the error in
                the group's `exceptions` and the group's trajectories are the survivors, on which
                ART computes the advantages (a failure is never a 0 in the group's mean).
            openenv_sdk.errors.OpenEnvError: the environment could not be reached.
        """
        source = self.source
        if source.fleet is None:  # a folder's or image's server starts off the event loop (a fleet is running)
            await asyncio.to_thread(source.start)
        async with source.async_client() as session:
            try:
                result = await session.reset(**dict(task.get("reset") or {}))
            except Exception as e:  # no episode: a reset failure, never a reward
                raise EpisodeFailed(classify(e, stage="reset")) from e
            # OpenAI's shapes, built as plain dicts: these are the TypedDicts the openai client declares
            tools = cast("list[ChatCompletionFunctionToolParam]", tool_schemas((await session.schema()).tools))
            messages = cast("list[ChatCompletionMessageParam]", self._prompt(task.get("prompt"), result.observation))
            trajectory = art.Trajectory(messages_and_choices=list(messages), tools=tools, metadata=_metadata(task))
            client = model.openai_client()
            calls = errors = 0
            for _ in range(self.max_turns):
                completion = await client.chat.completions.create(
                    model=model.get_inference_name(),
                    messages=trajectory.messages(),
                    tools=tools or omit,
                    **self.completion_kwargs,
                )
                choice: Choice = completion.choices[0]
                trajectory.messages_and_choices.append(choice)
                tool_calls = choice.message.tool_calls or []
                if not tool_calls:
                    break
                for call in tool_calls:
                    if isinstance(call, ChatCompletionMessageFunctionToolCall):
                        text, failed = await _call_tool(session, call.function.name, call.function.arguments)
                    else:  # only function tools are offered
                        text, failed = f"tool call of type {call.type!r} not supported: call one of the tools", True
                    calls += 1
                    errors += failed
                    trajectory.messages_and_choices.append({"role": "tool", "tool_call_id": call.id, "content": text})
            else:
                trajectory.metrics["truncated"] = True
            score = await agrade(self.grader, session)
        trajectory.reward = float(score.value)
        trajectory.metrics.update({"tool_calls": calls, "tool_errors": errors})
        trajectory.metrics.update({f"openenv/{k}": float(v) for k, v in score.components.items()})
        return trajectory.finish()

    def _prompt(self, prompt: str | Sequence[Mapping[str, Any]] | None, observation: Mapping[str, Any]) -> list[dict[str, Any]]:
        if prompt is None:
            messages = [{"role": "user", "content": observation_text(observation)}]
        elif isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
        else:
            messages = [dict(m) for m in prompt]
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages


def _metadata(task: Mapping[str, Any]) -> dict[str, Any]:
    """The task, as ART trajectory metadata (scalars only): the reset arguments, JSON-encoded."""
    return {"openenv_reset": json.dumps(dict(task.get("reset") or {}), sort_keys=True)}


async def _call_tool(session: Any, name: str, arguments: str) -> tuple[str, bool]:
    """Call one tool as the agent; a call that does not parse or is refused is the policy's to see."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return f"error: the arguments of {name!r} are not JSON: {arguments!r}", True
    if not isinstance(parsed, Mapping):
        return f"error: the arguments of {name!r} must be a JSON object, got {arguments!r}", True
    try:
        result = await session.call_tool(name, **parsed)
    except ToolCallError as e:
        return f"error: {e}", True
    return tool_result_text(result)
