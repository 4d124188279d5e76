"""One episode of a black-box agent: it runs in the environment's sandbox, the trainer answers its model calls.

`run_agent_episode` resets the session, opens a rollout on the interception server, and asks
the environment (orchestrator call `run_agent`) to run the agent with the rollout's base URL and
secret. While the agent runs, each model call it makes is taken from the rollout's queue,
rendered with the policy's chat template, sampled with token ids and logprobs, and answered.
When the agent exits (or is killed at its timeout), the rollout is closed, the host-side grader
scores the episode, and the calls become training rows.

Exact accounting: consecutive calls of one conversation (each request's messages = the previous
request's messages + the answer + new messages) extend one `TokenLedger`, so the row holds the
very tokens that were sampled (mask 1, with their logprobs) and the environment's tokens between
them (mask 0). A call that does not extend the previous one (the agent rewrote its history,
summarized it, or started a sub-conversation) starts a new segment; each segment is one row.

`mode="black_box"` runs the agent against a real provider instead (evaluation, smoke runs): the
provider's key is read from the host's environment (`provider_key_env`), sent to the sandbox in
the launch (never as a tool argument, never logged), and the episode has a reward but no rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import SecretStr

from openenv_sdk.agents import BUILTIN_AGENT, AgentLaunch, AgentRun, AgentSpec
from openenv_sdk.providers.base import Provider
from openenv_sdk.rubric import agrade

from ..accounting import TokenLedger
from ..chat import parse_assistant
from ..episode import EpisodeResult, Segment
from ..errors import AccountingError, AgentFailed, EpisodeError, GenerationError
from ..generation.base import GenerationBackend, SamplingParams, check_completion
from .messages import normalize_messages, normalize_tools
from .server import InterceptedRequest, InterceptionServer

__all__ = ["AgentEpisodeConfig", "AgentEpisodeResult", "AgentEpisodeRunner", "ConversationRecorder", "run_agent_episode"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AgentEpisodeConfig:
    """How a black-box agent's episode runs."""

    agent: AgentSpec = BUILTIN_AGENT
    """The agent program (`openenv_sdk.agents.BUILTIN_AGENT`, or a third-party spec)."""
    mode: Literal["intercept", "black_box"] = "intercept"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """How each model call is sampled; a request's own `max_tokens` can only lower `max_tokens`."""
    max_model_calls: int = 32
    """Model calls answered per episode; later ones are refused (400) and the episode is truncated."""
    agent_timeout_s: float | None = None
    """The agent's wall-clock limit; default the spec's `timeout_s`."""
    call_margin_s: float = 60.0
    """How much longer than the agent's limit (and install) the orchestrator waits for `run_agent`."""
    host_address: str | None = None
    """The address the agent reaches the interception server at; default the provider's
    `host_address` (the container network's gateway, or loopback for a local process)."""
    model_name: str = "policy"
    """The model name the agent is told to ask for (a provider's model in `black_box` mode)."""
    provider_base_url: str | None = None
    """`black_box` mode: the provider's OpenAI-compatible base URL."""
    provider_key_env: str = "OPENAI_API_KEY"
    """`black_box` mode: the host environment variable that holds the provider's key."""
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_model_calls < 1:
            raise ValueError("max_model_calls must be at least 1")
        if self.mode == "black_box" and not self.provider_base_url:
            raise ValueError("black_box mode needs provider_base_url (the real provider the agent calls)")


@dataclass
class AgentEpisodeResult(EpisodeResult):
    """An `EpisodeResult` whose rows are `segments` (the first one also fills the inherited fields)."""

    segments: list[Segment] = field(default_factory=list)
    agent_run: AgentRun | None = None
    """What the agent did: exit status, timeout, the end of its output (`None`: it never reported)."""
    model_calls: int = 0
    refused_calls: int = 0

    def rows(self) -> list[Segment]:
        """One row per segment (a rewritten history starts a new one)."""
        return list(self.segments)


@dataclass
class _Conversation:
    """One ledger the agent's calls extend, and how many of them it holds."""

    ledger: TokenLedger
    prompt_message_count: int
    calls: int = 0


class ConversationRecorder:
    """Turns intercepted calls into ledgers (segments), answering each with the policy.

    Dialect-blind: it reads each call's internal form (`InterceptedRequest.messages`/`tools`)
    and answers with an assistant message, which the server encodes in the agent's dialect.
    """

    def __init__(self, backend: GenerationBackend, tokenizer: Any, config: AgentEpisodeConfig) -> None:
        self.backend = backend
        self.tokenizer = tokenizer
        self.config = config
        self.conversations: list[_Conversation] = []
        self.truncated = False
        self.generation_s = 0.0
        self.calls = 0
        self.refused = 0
        self.stop = tuple(config.sampling.stop_token_ids) or (tokenizer.eos_token_id,)

    async def answer(self, request: InterceptedRequest) -> None:
        if self.calls >= self.config.max_model_calls:
            self.refused += 1
            self.truncated = True
            request.fail(400, f"this episode's model calls are spent ({self.config.max_model_calls})")  # 400: clients do not retry it
            return
        try:
            messages = normalize_messages(request.messages)
            tools = normalize_tools(request.tools)
        except ValueError as e:
            self.refused += 1
            request.fail(400, f"cannot train on this request: {e}")
            return
        ledger = self._ledger_for(messages, tools)
        params = self.config.sampling
        if request.max_tokens is not None and request.max_tokens < params.max_tokens:
            params = dataclasses.replace(params, max_tokens=request.max_tokens)
        params = dataclasses.replace(params, stop_token_ids=self.stop)
        started = time.monotonic()
        try:
            completion = check_completion(await self.backend.agenerate(ledger.ids, params), params)
        except GenerationError as e:
            request.fail(500, f"generation failed: {e}")
            raise
        self.generation_s += time.monotonic() - started
        message = parse_assistant(self.tokenizer, completion.token_ids, prefix=ledger.ids, tools=tools)
        message = normalize_messages([message])[0]
        ledger.add_sampled(completion.token_ids, completion.logprobs, message)
        self.calls += 1
        self.conversations[-1].calls += 1
        if completion.finish_reason == "length":
            self.truncated = True
        request.respond(
            message,
            finish_reason="length" if completion.finish_reason == "length" else None,
            prompt_tokens=len(ledger.ids) - len(completion.token_ids),
            completion_tokens=len(completion.token_ids),
        )

    def _ledger_for(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> TokenLedger:
        if self.conversations:
            ledger = self.conversations[-1].ledger
            known = len(ledger.messages)
            if (
                ledger.tools == tools
                and len(messages) > known
                and _same(messages[:known], ledger.messages)
                and messages[known]["role"] != "assistant"
            ):
                try:
                    ledger.add_messages(messages[known:])
                    return ledger
                except AccountingError as e:  # e.g. the last turn was cut at max_tokens: a new row
                    logger.info("starting a new segment: %s", e)
        ledger = TokenLedger(
            self.tokenizer,
            messages,
            tools=tools,
            chat_template=self.config.chat_template,
            chat_template_kwargs=self.config.chat_template_kwargs,
            end_of_turn_ids=self.stop,
        )
        self.conversations.append(_Conversation(ledger, len(messages)))
        return ledger

    def segments(self) -> list[Segment]:
        return [
            Segment(
                prompt_ids=list(c.ledger.prompt_ids),
                completion_ids=c.ledger.completion_ids,
                completion_mask=c.ledger.completion_mask,
                completion_logprobs=c.ledger.completion_logprobs,
                completion_tool_output_mask=c.ledger.completion_tool_output_mask(),
                completion_tool_names=list(c.ledger.completion_tool_output_names),
                messages=list(c.ledger.messages),
                prompt_message_count=c.prompt_message_count,
                model_calls=c.calls,
            )
            for c in self.conversations
            if c.calls
        ]


def _canonical(message: Mapping[str, Any]) -> str:
    return json.dumps(
        {"role": message["role"], "content": message.get("content") or "", "tool_calls": message.get("tool_calls") or []},
        sort_keys=True,
    )


def _same(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> bool:
    return len(a) == len(b) and all(_canonical(x) == _canonical(y) for x, y in zip(a, b, strict=True))


def _host_address(session: Any, config: AgentEpisodeConfig) -> str:
    if config.host_address:
        return config.host_address
    provider = getattr(session, "provider", None)  # a client made with a provider has one
    address = provider.host_address if isinstance(provider, Provider) else None
    return str(address) if address else "127.0.0.1"


async def run_agent_episode(
    session: Any,
    backend: GenerationBackend | None,
    tokenizer: Any,
    *,
    server: InterceptionServer | None,
    task: Mapping[str, Any],
    rubric: Any,
    config: AgentEpisodeConfig,
    seed: int | None = None,
    instruction: str | None = None,
) -> AgentEpisodeResult:
    """Run one black-box agent episode in `session` (an `AsyncGenericEnvClient`) and grade it.

    Args:
        session: the environment session (its environment must host agents: `AgentHost`).
        backend: answers the agent's model calls (`intercept` mode); unused in `black_box` mode.
        tokenizer: the policy's tokenizer, with a tool-calling chat template.
        server: the running interception server (`intercept` mode).
        task: `reset` arguments.
        rubric: the host-side grader.
        config: the agent, the mode, sampling and limits.
        seed: the reset seed.
        instruction: the task as the agent reads it; default the environment's.

    Raises:
        openenv_sdk.errors.OpenEnvError: the environment failed (reset, `run_agent`, grading).
        GenerationError: the backend failed or returned unusable logprobs.
        EpisodeError: the agent's run did not report back within its limit and the margin.
        AgentFailed: the agent failed (non-zero exit, timeout) before its first model call.
    """
    started = time.monotonic()
    env_s = 0.0
    t0 = time.monotonic()
    await session.reset(**task, **({"seed": seed} if seed is not None else {}))
    env_s += time.monotonic() - t0
    recorder = ConversationRecorder(backend, tokenizer, config) if config.mode == "intercept" and backend is not None else None
    rollout = None
    if config.mode == "intercept":
        if server is None or backend is None:
            raise ValueError("intercept mode needs the interception server and a generation backend")
        rollout = server.open_rollout()
        base_url, key = rollout.base_url(_host_address(session, config)), rollout.secret
    else:
        assert config.provider_base_url is not None
        key = os.environ.get(config.provider_key_env, "")
        if not key:
            raise EpisodeError(f"black_box mode reads the provider's key from ${config.provider_key_env}, which is not set")
        base_url = config.provider_base_url
    launch = AgentLaunch(
        spec=config.agent,
        base_url=base_url,
        api_key=SecretStr(key),
        model=config.model_name,
        mode=config.mode,
        instruction=instruction,
        timeout_s=config.agent_timeout_s,
    )
    limit_s = launch.effective_timeout_s + (config.agent.install_timeout_s if config.agent.install else 0.0) + config.call_margin_s

    async def run_agent() -> Any:
        with session.request_timeout(limit_s):
            return await session.call("run_agent", launch=launch.to_wire())

    agent_started = time.monotonic()
    agent = asyncio.create_task(run_agent())
    try:
        if rollout is not None and recorder is not None:
            while True:
                take = asyncio.ensure_future(rollout.next_request())
                done, _ = await asyncio.wait({take, agent}, return_when=asyncio.FIRST_COMPLETED)
                if take in done:
                    request = take.result()
                    if request is None:
                        break
                    await recorder.answer(request)
                    continue
                take.cancel()
                break
        reply = await agent
    except BaseException:
        agent.cancel()
        raise
    finally:
        if rollout is not None:
            rollout.close()
    # The agent's run, less the time its calls waited for the policy (the agent's own work counts).
    env_s += time.monotonic() - agent_started - (recorder.generation_s if recorder else 0.0)
    agent_run = AgentRun.model_validate(reply) if isinstance(reply, Mapping) else None
    if recorder is not None and recorder.calls == 0 and agent_run is not None and not agent_run.ok:
        # An agent that failed before its first model call (not installed, no node, a crash at
        # start) gives no row to train on; graded, it would be a reward of 0 for the policy's
        # "behaviour" and the trainer would wait for rows that never come. It is a failure.
        tail = (agent_run.stderr_tail or agent_run.stdout_tail)[-600:]
        raise AgentFailed(
            f"the agent {agent_run.agent!r} exited with status {agent_run.exit_code}"
            f"{' (timed out)' if agent_run.timed_out else ''} before its first model call: {tail}",
            agent_run=agent_run,
        )
    t0 = time.monotonic()
    score = await agrade(rubric, session)
    env_s += time.monotonic() - t0
    segments = recorder.segments() if recorder else []
    first = segments[0] if segments else None
    return AgentEpisodeResult(
        task=dict(task),
        seed=seed,
        prompt_ids=list(first.prompt_ids) if first else [],
        completion_ids=list(first.completion_ids) if first else [],
        completion_mask=list(first.completion_mask) if first else [],
        completion_logprobs=list(first.completion_logprobs) if first else [],
        messages=list(first.messages) if first else [],
        prompt_message_count=first.prompt_message_count if first else 0,
        completion_tool_output_mask=list(first.completion_tool_output_mask) if first else [],
        completion_tool_names=list(first.completion_tool_names) if first else [],
        reward=float(score.value),
        reward_components=dict(score.components),
        truncated=bool(recorder and recorder.truncated) or bool(agent_run and agent_run.timed_out),
        turns=recorder.calls if recorder else 0,
        env_latency_s=env_s,
        generation_s=recorder.generation_s if recorder else 0.0,
        duration_s=time.monotonic() - started,
        segments=segments,
        agent_run=agent_run,
        model_calls=recorder.calls if recorder else 0,
        refused_calls=recorder.refused if recorder else 0,
    )


class AgentEpisodeRunner:
    """Runs black-box agent episodes for `EnvRolloutWorker` (its `episode_runner=`), so a CLI agent
    trains with the same worker as a tool-calling model.

        runner = AgentEpisodeRunner(InterceptionServer(host="0.0.0.0").start(), AgentEpisodeConfig(...))
        worker = EnvRolloutWorker(..., episode_runner=runner)
    """

    def __init__(
        self,
        server: InterceptionServer | None,
        config: AgentEpisodeConfig | None = None,
        *,
        instruction_from_prompt: bool = False,
    ) -> None:
        """Args:
        server: the running interception server (listening where the agents reach it).
        config: the agent, the mode, sampling and limits.
        instruction_from_prompt: give the agent the dataset row's last user message as its
            task; by default the environment words the task itself.
        """
        self.server = server
        self.config = config or AgentEpisodeConfig()
        self.instruction_from_prompt = instruction_from_prompt

    async def __call__(
        self,
        session: Any,
        backend: GenerationBackend,
        tokenizer: Any,
        *,
        prompt: Sequence[Mapping[str, Any]],
        task: Mapping[str, Any],
        tools: list[dict[str, Any]],
        rubric: Any,
        config: Any,
        seed: int | None = None,
        host_address: str | None = None,
    ) -> AgentEpisodeResult:
        # The agent brings its own prompt and tools (`tools` is the tool-calling policy's).
        users = [m for m in prompt if m.get("role") == "user" and isinstance(m.get("content"), str)]
        instruction = users[-1]["content"] if users and self.instruction_from_prompt else None
        episode_config = self.config
        if host_address and not episode_config.host_address:
            episode_config = dataclasses.replace(episode_config, host_address=host_address)
        return await run_agent_episode(
            session,
            backend,
            tokenizer,
            server=self.server,
            task=task,
            rubric=rubric,
            config=episode_config,
            seed=seed,
            instruction=instruction,
        )

