"""One tool-calling episode against an environment session, with exact token accounting.

`run_episode` resets the session with the task, then alternates: the policy samples a turn from
the ledger's tokens; its tool calls go to the environment over MCP (as any agent's would); the
results are appended to the ledger; until the policy answers without a tool call, a turn is
truncated, the turn limit is reached, or the token budget is spent. The host-side rubric then
grades the episode. Both the `rollout_func` adapter and the async rollout worker run episodes
through here.

The token accounting (the chat template rendered and tokenized, a millisecond or two a turn) runs
on one thread of its own, not on the event loop: the episodes of a step share the loop, and with
the accounting on it an environment reply waited while the loop did every other episode's
accounting (a 2 ms tool call took ~40 ms inside a 32-episode GRPO step; docs/benchmarks.md).
One thread, not a pool: the work holds the GIL, so more threads would only take turns with the
loop, and a tokenizer is not safe to use from several threads at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from openenv_sdk.episode_config import EpisodeLimits
from openenv_sdk.errors import EpisodeFailed, ToolCallError
from openenv_sdk.failures import Failure, classify
from openenv_sdk.rubric import agrade

from .accounting import TokenLedger
from .chat import ToolCall, parse_assistant, tool_result_text
from .generation.base import GenerationBackend, SamplingParams, check_completion

__all__ = ["EpisodeConfig", "EpisodeResult", "Segment", "run_episode"]

T = TypeVar("T")

_ACCOUNTING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openenv-accounting")
"""The accounting thread, shared by every episode of the process (started at its first job)."""


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on the accounting thread."""
    return await asyncio.get_running_loop().run_in_executor(_ACCOUNTING, functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True, kw_only=True)
class EpisodeConfig(EpisodeLimits):
    """Limits and sampling of one training episode: the SDK's `EpisodeLimits` (`max_turns`, default
    `openenv_sdk.episode_config.MAX_TURNS`; an episode still calling tools after them is truncated)
    and the token limits and sampling of training."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    """How each turn is sampled (`max_tokens` bounds one turn). Stop tokens default to the tokenizer's eos."""
    max_completion_tokens: int = 1024
    """The most tokens after the prompt (sampled and environment); past it the episode is truncated."""
    chat_template: str | None = None
    """A template to use instead of the tokenizer's (see `accounting.training_chat_template`)."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_completion_tokens < 1:
            raise ValueError(f"max_completion_tokens must be at least 1, got {self.max_completion_tokens}")


@dataclass
class Segment:
    """One training row: a conversation as the exact tokens sampled (a tool-calling episode is one;
    a black-box agent's episode may hold several, `intercept.AgentEpisodeResult.segments`)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    """1 on the tokens the policy sampled (end-of-turn included), 0 on everything else."""
    completion_logprobs: list[float]
    """The sampling logprob at mask-1 positions, NaN elsewhere."""
    completion_tool_output_mask: list[int]
    """1 on the bodies of tool results (for SFT on tool outputs), 0 elsewhere."""
    completion_tool_names: list[str | None]
    """The tool whose result each token's body belongs to (None outside tool results)."""
    messages: list[dict[str, Any]]
    prompt_message_count: int
    model_calls: int

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


@dataclass
class EpisodeResult:
    """What one episode produced: its tokens, its messages, its reward, and what it cost."""

    task: dict[str, Any]
    seed: int | None
    prompt_ids: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    """1 on the tokens the policy sampled (end-of-turn tokens included), 0 on environment tokens."""
    completion_logprobs: list[float]
    """The sampling logprob of each sampled token; NaN on environment tokens."""
    messages: list[dict[str, Any]]
    """The prompt's messages, then the completion's (assistant turns and tool results)."""
    prompt_message_count: int
    reward: float = math.nan
    reward_components: dict[str, float] = field(default_factory=dict)
    truncated: bool = False
    """A turn hit `max_tokens`, the token budget ran out, or the policy still called tools after `max_turns`."""
    policy_timeout: bool = False
    """The policy still called tools after `max_turns`: its own timeout, graded as usual (not a failure)."""
    failure: Failure | None = None
    """Set on an episode that failed (`openenv_sdk.failures`): its reward is NaN and it is never trained
    on; only the `rollout_func` returns such episodes (as rows TRL leaves out), the worker drops them."""
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    env_latency_s: float = 0.0
    """Seconds spent in the environment (reset, tool calls, grading)."""
    generation_s: float = 0.0
    duration_s: float = 0.0
    completion_tool_output_mask: list[int] = field(default_factory=list)
    """1 on the body tokens of tool outputs (the tools' text, not the chat template's scaffolding
    around it), 0 elsewhere; parallel to `completion_ids`. For the supervised term on tool
    outputs (`openenv_trainers.sft`). Filter by tool with `completion_tool_names`."""
    completion_tool_names: list[str | None] = field(default_factory=list)
    """The tool whose output each completion token belongs to, None where it is not a tool-output
    body token; parallel to `completion_ids` ("" for a tool message whose tool is unknown)."""

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def completion_messages(self) -> list[dict[str, Any]]:
        return self.messages[self.prompt_message_count :]

    def rows(self) -> list[Segment]:
        """The training rows of this episode: one, the whole conversation."""
        n = len(self.completion_ids)
        return [
            Segment(
                prompt_ids=list(self.prompt_ids),
                completion_ids=list(self.completion_ids),
                completion_mask=list(self.completion_mask),
                completion_logprobs=list(self.completion_logprobs),
                completion_tool_output_mask=list(self.completion_tool_output_mask or [0] * n),
                completion_tool_names=list(self.completion_tool_names or [None] * n),
                messages=list(self.messages),
                prompt_message_count=self.prompt_message_count,
                model_calls=self.turns,
            )
        ]


async def run_episode(
    session: Any,
    backend: GenerationBackend,
    tokenizer: Any,
    *,
    prompt: Sequence[Mapping[str, Any]],
    task: Mapping[str, Any],
    tools: list[dict[str, Any]],
    rubric: Any,
    config: EpisodeConfig,
    seed: int | None = None,
) -> EpisodeResult:
    """Run one episode in `session` (an `AsyncGenericEnvClient`) and grade it.

    Args:
        session: the environment session; it is reset here with `task` and `seed`.
        backend: samples the policy's turns.
        tokenizer: the policy's tokenizer, with a tool-calling chat template.
        prompt: the conversation so far (system and user messages).
        task: `reset` arguments (the dataset row's task fields).
        tools: the tools' OpenAI function schemas, rendered into the prompt.
        rubric: the host-side grader (`openenv_sdk.rubric` rubric, `Grader`, or function).
        config: limits and sampling.
        seed: the reset seed; episodes of one group share it.

    Raises:
        openenv_sdk.errors.EpisodeFailed: the reset failed (cause `reset`) or grading could not
            decide (its cause): no reward, never a 0.
        openenv_sdk.errors.OpenEnvError: the environment failed (transport, a tool's server);
            a tool that fails is not an error, its message is the tool's result.
        GenerationError: the backend failed or returned unusable logprobs.
        AccountingError: the chat template cannot extend the conversation.
    """
    started = time.monotonic()
    env_s = 0.0
    reset_args = {**task, **({"seed": seed} if seed is not None else {})}
    t0 = time.monotonic()
    try:
        await session.reset(**reset_args)
    except Exception as e:  # no episode: a reset failure, never a reward
        raise EpisodeFailed(classify(e, stage="reset")) from e
    env_s += time.monotonic() - t0

    stop = tuple(config.sampling.stop_token_ids) or (tokenizer.eos_token_id,)
    ledger = await _off_loop(
        TokenLedger,
        tokenizer,
        list(prompt),
        tools=tools,
        chat_template=config.chat_template,
        chat_template_kwargs=config.chat_template_kwargs,
        end_of_turn_ids=stop,
    )
    truncated = policy_timeout = False
    turns = tool_calls = tool_errors = 0
    generation_s = 0.0
    while True:
        budget = config.max_completion_tokens - ledger.completion_length
        if budget <= 0:
            truncated = True
            break
        params = dataclasses.replace(config.sampling, max_tokens=min(config.sampling.max_tokens, budget), stop_token_ids=stop)
        t0 = time.monotonic()
        completion = check_completion(await backend.agenerate(ledger.ids, params), params)
        generation_s += time.monotonic() - t0
        message = await _off_loop(_account_turn, ledger, tokenizer, completion.token_ids, completion.logprobs, tools)
        turns += 1
        if completion.finish_reason == "length":
            truncated = True
            break
        calls = ToolCall.from_message(message)
        if not calls:
            break
        if turns >= config.max_turns:
            truncated = policy_timeout = True
            break
        results = []
        for call in calls:
            tool_calls += 1
            t0 = time.monotonic()
            text, failed = await _call_tool(session, call)
            env_s += time.monotonic() - t0
            tool_errors += failed
            results.append({"role": "tool", "name": call.name, "content": text})
        await _off_loop(ledger.add_messages, results)

    t0 = time.monotonic()
    score = await agrade(rubric, session)
    env_s += time.monotonic() - t0
    return EpisodeResult(
        task=dict(task),
        seed=seed,
        prompt_ids=list(ledger.prompt_ids),
        completion_ids=ledger.completion_ids,
        completion_mask=ledger.completion_mask,
        completion_logprobs=ledger.completion_logprobs,
        messages=ledger.messages,
        prompt_message_count=len(prompt),
        reward=float(score.value),
        reward_components=dict(score.components),
        truncated=truncated,
        policy_timeout=policy_timeout,
        turns=turns,
        tool_calls=tool_calls,
        tool_errors=tool_errors,
        env_latency_s=env_s,
        generation_s=generation_s,
        duration_s=time.monotonic() - started,
        completion_tool_output_mask=ledger.completion_tool_output_mask(),
        completion_tool_names=ledger.completion_tool_output_names,
    )


def _account_turn(
    ledger: TokenLedger, tokenizer: Any, token_ids: list[int], logprobs: list[float], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """Parse a sampled turn and add it to the ledger; the assistant message."""
    message = parse_assistant(tokenizer, token_ids, prefix=ledger.ids, tools=tools)
    ledger.add_sampled(token_ids, logprobs, message)
    return message


async def _call_tool(session: Any, call: ToolCall) -> tuple[str, bool]:
    """Call one tool as the agent; a refused or failing call is the policy's to see."""
    if not call.name:
        return "error: the tool call names no tool", True
    if not isinstance(call.arguments, Mapping):
        return f"error: the arguments of {call.name!r} must be a JSON object, got {call.arguments!r}", True
    try:
        result = await session.call_tool(call.name, **call.arguments)
    except ToolCallError as e:  # unknown tool, bad arguments: the agent's mistake, shown to it
        return f"error: {e}", True
    return tool_result_text(result)
