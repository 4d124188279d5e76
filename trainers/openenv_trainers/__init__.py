"""openenv-trainers: train language-model agents on openenv-sdk environments with TRL.

    EnvSource             one environment server (URL, folder or image) shared by many sessions
    EnvironmentFactory    TRL `GRPOTrainer(environment_factory=...)`: the environment's MCP tools as methods
    EnvRolloutFunc        TRL `GRPOTrainer(rollout_func=...)`: multi-turn episodes with exact token accounting
    EnvRolloutWorker      TRL async GRPO `rollout_worker`: groups of episodes as `RolloutSample`s
    TokenLedger           one conversation as the exact tokens the policy saw (mask, logprobs, tool outputs)
    ToolOutputSFT         the supervised term on tool outputs; `SFTOnToolOutputsGRPOTrainer` adds it to GRPO
    TransformersBackend   sampling in process; `CompletionsClient` for vLLM's `/v1/completions`

Imports are lazy: `import openenv_trainers` does not import torch or TRL.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accounting import TokenLedger, training_chat_template
    from .advantages import GroupFilter, group_advantages, surviving_advantages
    from .episode import EpisodeConfig, EpisodeResult, run_episode
    from .errors import (
        AccountingError,
        AgentFailed,
        EpisodeError,
        EpisodeTimeout,
        GenerationError,
        LogprobError,
        ServerCompatibilityError,
        TrainerError,
        WorkerError,
        WorkerStarved,
        WorkerStuck,
    )
    from .generation import (
        Completion,
        GenerationBackend,
        SamplingParams,
        TransformersBackend,
    )
    from .generation.client import CompletionsClient
    from .rollout import EnvRolloutFunc, env_reward
    from .sft import SFTOnToolOutputsGRPOTrainer, ToolOutputSFT, tool_output_sft_loss
    from .sources import EnvSource, load_grader
    from .tasks import split_task, task_prompt, task_row
    from .trl_env import EnvironmentFactory
    from .worker import EnvRolloutWorker, WorkerConfig

_EXPORTS = {
    "AccountingError": ".errors",
    "Completion": ".generation",
    "CompletionsClient": ".generation.client",
    "EnvRolloutFunc": ".rollout",
    "EnvRolloutWorker": ".worker",
    "EnvSource": ".sources",
    "EnvironmentFactory": ".trl_env",
    "EpisodeConfig": ".episode",
    "AgentFailed": ".errors",
    "EpisodeError": ".errors",
    "EpisodeResult": ".episode",
    "EpisodeTimeout": ".errors",
    "GenerationBackend": ".generation",
    "GenerationError": ".errors",
    "GroupFilter": ".advantages",
    "LogprobError": ".errors",
    "SFTOnToolOutputsGRPOTrainer": ".sft",
    "SamplingParams": ".generation",
    "ServerCompatibilityError": ".errors",
    "TokenLedger": ".accounting",
    "ToolOutputSFT": ".sft",
    "TrainerError": ".errors",
    "TransformersBackend": ".generation",
    "WorkerConfig": ".worker",
    "WorkerError": ".errors",
    "WorkerStarved": ".errors",
    "WorkerStuck": ".errors",
    "env_reward": ".rollout",
    "group_advantages": ".advantages",
    "load_grader": ".sources",
    "run_episode": ".episode",
    "split_task": ".tasks",
    "surviving_advantages": ".advantages",
    "task_prompt": ".tasks",
    "task_row": ".tasks",
    "tool_output_sft_loss": ".sft",
    "training_chat_template": ".accounting",
}

__all__ = [
    "AccountingError",
    "AgentFailed",
    "Completion",
    "CompletionsClient",
    "EnvRolloutFunc",
    "EnvRolloutWorker",
    "EnvSource",
    "EnvironmentFactory",
    "EpisodeConfig",
    "EpisodeError",
    "EpisodeResult",
    "EpisodeTimeout",
    "GenerationBackend",
    "GenerationError",
    "GroupFilter",
    "LogprobError",
    "SFTOnToolOutputsGRPOTrainer",
    "SamplingParams",
    "ServerCompatibilityError",
    "TokenLedger",
    "ToolOutputSFT",
    "TrainerError",
    "TransformersBackend",
    "WorkerConfig",
    "WorkerError",
    "WorkerStarved",
    "WorkerStuck",
    "env_reward",
    "group_advantages",
    "load_grader",
    "run_episode",
    "split_task",
    "surviving_advantages",
    "task_prompt",
    "task_row",
    "tool_output_sft_loss",
    "training_chat_template",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_trainers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
