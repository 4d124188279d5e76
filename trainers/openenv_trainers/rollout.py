"""TRL `GRPOTrainer(rollout_func=...)` adapter: multi-turn tool-calling episodes as GRPO rollouts.

    rollouts = EnvRolloutFunc(EnvSource(env_dir="environments/echo"), rubric=my_rubric)
    trainer = GRPOTrainer(model, reward_funcs=[env_reward], rollout_func=rollouts, ...)

For each prompt TRL hands over, one episode runs against its own environment session: reset
with the row's task (carried in the prompt, see `tasks.task_row`), then turns sampled from the
current policy with tool calls executed over MCP. It returns what TRL's `rollout_func` contract
asks for, per rollout:

- `prompt_ids`, `completion_ids`: the exact tokens the policy saw (see `accounting`);
- `logprobs`: the sampling logprob of each completion token, NaN on environment tokens (TRL
  neutralises NaN where it reads them);
- `env_mask`: 1 on the tokens the policy sampled, 0 on tool results and chat scaffolding;
- `env_reward`: the host-side grader's reward, a column that reaches reward functions
  (`env_reward` below passes it through), plus `env_truncated`, `env_turns`, `env_tool_calls`;
- `env_failure`: None, or the cause of an episode that failed after its retries (`reset`,
  `sandbox`, `judge`, `grader`, `timeout`, `infrastructure`; docs/failures.md). A failed episode is
  never a reward: its `env_reward` is None (so `env_reward` gives TRL None, and TRL leaves the row
  out of its group's mean and std and gives it advantage 0), its completion is one end-of-turn
  token with `env_mask` 0 (nothing to train on). Other reward functions must return None where
  `env_failure` is set (TRL excludes a row only when every function does);
- `tool_output_mask`: 1 on the body tokens of tool outputs, and `tool_output_names`: the tool of
  each such token (None elsewhere), both parallel to `completion_ids`, for the supervised term on
  tool outputs (`sft.SFTOnToolOutputsGRPOTrainer` takes them out of the reward columns).

TRL repeats each prompt `num_generations` times in a row; consecutive equal prompts are one group,
and every episode of a group is reset with the same task and the same seed.

Generation: with `GRPOConfig(use_vllm=True, vllm_mode="server")` the episodes sample from that
vLLM server (`CompletionsClient`; TRL syncs the weights before each call); otherwise from the
trainer's own model in process (`TransformersBackend`), i.e. the current policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from openenv_sdk.episode_config import EPISODE_RETRIES, EPISODE_TIMEOUT_S, MAX_TURNS
from openenv_sdk.failures import Failure, FailureCause, classify

from ._aio import LoopThread
from .chat import tool_schemas
from .episode import EpisodeConfig, EpisodeResult, run_episode
from .errors import EpisodeTimeout
from .generation.base import GenerationBackend, SamplingParams
from .sources import EnvSource
from .tasks import split_task

__all__ = ["EnvRolloutFunc", "env_reward"]


def env_reward(completions: list[Any], env_reward: list[float | None], **kwargs: Any) -> list[float | None]:
    """A TRL reward function that passes the environment's (host-side graded) reward through; None
    for a failed episode (TRL then leaves it out of its group's advantages)."""
    return [None if r is None or math.isnan(r) else float(r) for r in env_reward]


class EnvRolloutFunc:
    """A TRL `rollout_func` that runs each rollout as an episode in an environment.

    Example:
        >>> rollouts = EnvRolloutFunc(EnvSource(env_dir="environments/echo"), rubric=exact_echo)  # doctest: +SKIP
        >>> GRPOTrainer(model, reward_funcs=[env_reward], rollout_func=rollouts, args=args, train_dataset=rows)
    """

    def __init__(
        self,
        source: EnvSource,
        *,
        rubric: Any | None = None,
        backend: GenerationBackend | None = None,
        max_turns: int = MAX_TURNS,
        max_turn_tokens: int | None = None,
        seed: int = 0,
        episode_timeout_s: float = EPISODE_TIMEOUT_S,
        episode_retries: int = EPISODE_RETRIES,
    ) -> None:
        """Describe the rollouts; the source's server starts on the first call.

        Args:
            source: where the environment runs.
            rubric: the host-side grader; default the one the source's `openenv.yaml` names.
            backend: the generation backend; default chosen from the trainer at each call (the
                vLLM server it syncs, or its own model).
            max_turns: the most assistant turns per episode.
            max_turn_tokens: the most tokens per turn; default the trainer's `max_completion_length`.
            seed: mixed into each group's reset seed (when the task gives none).
            episode_timeout_s: the longest one episode may take, in seconds.
            episode_retries: how many times a failed episode (environment error, timeout) is run
                again on a fresh session; after them it is a failed row (`env_failure`), never a reward.
        """
        self.source = source
        self.rubric = rubric if rubric is not None else source.grader()
        self.backend = backend
        self.max_turns = max_turns
        self.max_turn_tokens = max_turn_tokens
        self.seed = seed
        self.episode_timeout_s = episode_timeout_s
        self.episode_retries = episode_retries
        self.last_episodes: list[EpisodeResult] = []
        """The episodes of the last call (for inspection and tests)."""
        self._loop: LoopThread | None = None
        self._sessions: list[Any] = []
        self._tools: list[dict[str, Any]] | None = None
        self._calls = 0
        self.failures = 0
        """Episodes that failed after their retries, over every call (each a row with `env_failure`)."""

    # --- TRL's entry point --------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Run one episode per prompt; returns TRL's rollout dict (see the module docstring)."""
        if self._loop is None:
            self._loop = LoopThread(name="openenv-rollout-func")
        if self._tools is None:
            self._tools = tool_schemas(self.source.tools())
        tokenizer = trainer.processing_class
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
        config = self._episode_config(trainer, tokenizer)
        jobs = list(self._jobs(prompts, trainer))
        with self._backend(trainer, tokenizer) as backend:
            episodes = self._loop.run(self._run_all(jobs, backend, tokenizer, config))
        self.last_episodes = episodes
        self._calls += 1
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.completion_logprobs for e in episodes],
            "env_mask": [e.completion_mask for e in episodes],
            "env_reward": [None if e.failure is not None else e.reward for e in episodes],
            "env_failure": [e.failure.cause.value if e.failure is not None else None for e in episodes],
            "env_truncated": [e.truncated for e in episodes],
            "env_turns": [e.turns for e in episodes],
            "env_tool_calls": [e.tool_calls for e in episodes],
            "tool_output_mask": [e.completion_tool_output_mask for e in episodes],
            "tool_output_names": [e.completion_tool_names for e in episodes],
        }

    def close(self) -> None:
        """Close the sessions, the loop and the source's server. Safe to call twice."""
        if self._loop is not None:
            sessions, self._sessions = self._sessions, []
            with contextlib.suppress(Exception):
                self._loop.run(_close_all(sessions, self.backend), timeout_s=30)
            self._loop.close()
            self._loop = None
        self.source.close()

    def closer(self) -> Any:
        """A `transformers.TrainerCallback` that calls `close()` when training ends."""
        from transformers import TrainerCallback

        rollouts = self

        class _Closer(TrainerCallback):
            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                rollouts.close()

        return _Closer()

    # --- internals ----------------------------------------------------------------------------

    def _episode_config(self, trainer: Any, tokenizer: Any) -> EpisodeConfig:
        args = trainer.args
        budget = int(args.max_completion_length)
        top_k = getattr(trainer, "top_k", None) or 0
        sampling = SamplingParams(
            max_tokens=min(self.max_turn_tokens or budget, budget),
            temperature=float(trainer.temperature),
            top_p=float(trainer.top_p if trainer.top_p is not None else 1.0),
            top_k=max(int(top_k), 0),
            stop_token_ids=tuple(getattr(trainer, "eos_token_ids", None) or [tokenizer.eos_token_id]),
        )
        return EpisodeConfig(
            sampling=sampling,
            max_turns=self.max_turns,
            max_completion_tokens=budget,
            chat_template=getattr(trainer, "chat_template", None),
            chat_template_kwargs=dict(getattr(trainer, "chat_template_kwargs", None) or {}),
        )

    def _jobs(self, prompts: list[Any], trainer: Any) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any], int]]:
        """(messages, task, seed) per prompt; consecutive equal prompts share task and seed."""
        step = int(getattr(getattr(trainer, "state", None), "global_step", self._calls))
        previous_key = None
        group = -1
        for prompt in prompts:
            if isinstance(prompt, str):
                raise TypeError("EnvRolloutFunc needs conversational prompts (lists of messages), got a string")
            messages, task = split_task(prompt)
            task = task or {}
            key = json.dumps(prompt, sort_keys=True, default=str)
            if key != previous_key:
                group += 1
                previous_key = key
            seed = task.pop("seed", None)
            if seed is None:
                digest = hashlib.sha256(f"{self.seed}:{step}:{group}:{key}".encode()).digest()
                seed = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
            yield messages, task, int(seed)

    @contextlib.contextmanager
    def _backend(self, trainer: Any, tokenizer: Any) -> Iterator[GenerationBackend]:
        if self.backend is not None:
            yield self.backend
            return
        if getattr(trainer, "use_vllm", False):
            if getattr(trainer, "vllm_mode", None) != "server":
                raise ValueError("EnvRolloutFunc samples from a vLLM server: use vllm_mode='server' (or pass backend=)")
            from .generation.client import CompletionsClient

            args = trainer.args
            url = args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
            client = CompletionsClient(url)
            client.check_server()  # token ids and processed logprobs, once
            self.backend = client
            yield client
            return
        from trl.models.utils import unwrap_model_for_generation

        from .generation.transformers_backend import TransformersBackend

        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            yield TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)

    async def _run_all(
        self, jobs: list[tuple[list[dict[str, Any]], dict[str, Any], int]], backend: GenerationBackend, tokenizer: Any, config: EpisodeConfig
    ) -> list[EpisodeResult]:
        while len(self._sessions) < len(jobs):
            self._sessions.append(self.source.async_client())
        return list(
            await asyncio.gather(
                *(self._run_one(i, job, backend, tokenizer, config) for i, job in enumerate(jobs))
            )
        )

    async def _run_one(
        self,
        index: int,
        job: tuple[list[dict[str, Any]], dict[str, Any], int],
        backend: GenerationBackend,
        tokenizer: Any,
        config: EpisodeConfig,
    ) -> EpisodeResult:
        messages, task, seed = job
        for attempt in range(self.episode_retries + 1):
            session = self._sessions[index]
            try:
                return await asyncio.wait_for(
                    run_episode(
                        session,
                        backend,
                        tokenizer,
                        prompt=messages,
                        task=task,
                        tools=self._tools or [],
                        rubric=self.rubric,
                        config=config,
                        seed=seed,
                    ),
                    self.episode_timeout_s,
                )
            except Exception as e:
                timed_out = isinstance(e, TimeoutError)
                if not (timed_out or _environment_failure(e)):
                    raise  # generation and accounting errors are not the environment's: no retry
                if attempt == self.episode_retries:
                    if timed_out:
                        message = f"episode {index} (task {task}) ran past {self.episode_timeout_s:g} s"
                        failure = Failure(cause=FailureCause.TIMEOUT, stage="episode", message=message, error_type="TimeoutError")
                    else:
                        failure = classify(e, stage="episode")
                    self.failures += 1
                    return await _failed_episode(messages, task, seed, tokenizer, self._tools or [], config, failure)
                with contextlib.suppress(Exception):
                    await session.aclose()
                self._sessions[index] = self.source.async_client()
        raise AssertionError("unreachable")


async def _failed_episode(
    messages: list[dict[str, Any]],
    task: dict[str, Any],
    seed: int,
    tokenizer: Any,
    tools: list[dict[str, Any]],
    config: EpisodeConfig,
    failure: Failure,
) -> EpisodeResult:
    """The row of a failed episode: its prompt, one end-of-turn token that nothing trains on, no reward."""
    template = {"chat_template": config.chat_template} if config.chat_template else {}
    prompt_ids = await asyncio.to_thread(
        tokenizer.apply_chat_template, messages, tools=tools or None, add_generation_prompt=True, tokenize=True,
        **template, **config.chat_template_kwargs,
    )  # fmt: skip
    if isinstance(prompt_ids, Mapping):  # newer tokenizers answer a BatchEncoding
        prompt_ids = prompt_ids["input_ids"]
    stop = config.sampling.stop_token_ids[0] if config.sampling.stop_token_ids else tokenizer.eos_token_id
    return EpisodeResult(
        task=dict(task), seed=seed, prompt_ids=list(prompt_ids), completion_ids=[stop], completion_mask=[0],
        completion_logprobs=[math.nan], messages=list(messages), prompt_message_count=len(messages),
        completion_tool_output_mask=[0], completion_tool_names=[None], failure=failure,
    )  # fmt: skip


def _environment_failure(error: BaseException) -> bool:
    from openenv_sdk.errors import OpenEnvError

    return isinstance(error, (OpenEnvError, EpisodeTimeout, OSError))


async def _close_all(sessions: Sequence[Any], backend: Any) -> None:
    for session in sessions:
        with contextlib.suppress(Exception):
            await session.aclose()
    aclose = getattr(backend, "aclose", None)
    if aclose is not None:  # the backend's connections made on this loop
        with contextlib.suppress(Exception):
            await aclose()
