"""`__all__` is the API; importing the package imports neither torch nor TRL."""

from __future__ import annotations

import subprocess
import sys

import openenv_trainers

EXPECTED = [
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


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert openenv_trainers.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(openenv_trainers, name) is not None


def test_importing_the_package_is_light() -> None:
    code = "import sys, openenv_trainers; print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
