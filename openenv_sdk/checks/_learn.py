"""`openenv validate --deep --learn`: a few GRPO steps of the trainers' tiny tool-calling model on
CPU, through TRL's `environment_factory` (`openenv_trainers.EnvironmentFactory`): does the reward
move? A reward that never moves (every completion scores the same) gives GRPO nothing to learn.

It needs the trainers package (`openenv_trainers`, with torch and TRL); without it the check says
so and is skipped.
"""

from __future__ import annotations

import importlib
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ..loader import load_grader
from ._result import CheckResult

__all__ = ["check_learn"]

NAME = "deep.learn"
_MODULES = ("torch", "datasets", "transformers", "trl", "openenv_trainers.chat", "openenv_trainers.sources",
            "openenv_trainers.tasks", "openenv_trainers.tiny_model", "openenv_trainers.trl_env")
_PROMPT = "Solve the task below with the tools."
_NOT_INSTALLED_FIX = ("Install the trainers package (pip install -e trainers, or `pip install openenv-trainers`) and "
                      "run openenv from that environment, e.g. .venv-trainers/bin/openenv validate PATH --deep --learn")  # fmt: skip


def _cache_dir() -> Path:
    return Path(os.environ.get("OPENENV_TRAINERS_CACHE") or Path.home() / ".cache" / "openenv-trainers")


def check_learn(folder: Path | None, *, image: str | None = None, steps: int = 3, tasks: int = 8,
                model_dir: Path | None = None) -> tuple[CheckResult, dict[str, Any] | None]:  # fmt: skip
    """Train the tiny model for `steps` GRPO steps on the environment's first `tasks` tasks; the check
    passes when the mean reward or its spread moves. Returns the result and the figures.

    `model_dir` is a tiny model already built (`openenv_trainers.tiny_model.build_tiny_model`); by
    default it is built once into the trainers' cache (`$OPENENV_TRAINERS_CACHE`)."""
    if folder is None:
        return CheckResult(name=NAME, passed=False, skipped=True,
                           message="skipped: --learn needs the environment folder (its grader)"), None
    try:  # imported by name: the SDK itself depends on none of them
        torch, datasets, transformers, trl, chat, sources, task_rows, tiny, trl_env = (
            importlib.import_module(name) for name in _MODULES
        )
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        return CheckResult(name=NAME, passed=False, severity="warning", fix=_NOT_INSTALLED_FIX,
                           message=f"not run: the trainers extra is not installed here ({missing} missing)"), None  # fmt: skip

    started = time.monotonic()
    records: list[dict[str, float]] = []

    def on_log(self: Any, _args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
        if logs and "reward" in logs:
            records.append({"step": float(state.global_step), "reward": float(logs["reward"]),
                            "reward_std": float(logs.get("reward_std", math.nan)),
                            "tool_calls": float(logs.get("tools/call_frequency", math.nan))})  # fmt: skip

    curve_callback = type("RewardCurve", (transformers.TrainerCallback,), {"on_log": on_log})

    model_dir = model_dir or tiny.build_tiny_model(_cache_dir() / "tiny-tool-model")
    tokenizer = chat.use_tool_chat_template(transformers.AutoTokenizer.from_pretrained(model_dir))
    tokenizer.padding_side = "left"
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    source = sources.EnvSource(image=image) if image is not None else sources.EnvSource(env_dir=folder)
    try:
        with source.client() as client:
            splits = client.splits()
            served = client.tasks(splits[0].name, start=0, stop=tasks) if splits else []
        kwargs = [dict(t.reset_kwargs) for t in served] or [{"seed": i} for i in range(tasks)]
        rows = [task_rows.task_row([{"role": "user", "content": _PROMPT}], **k) for k in kwargs]
        factory = trl_env.EnvironmentFactory(source, rubric=load_grader(folder))
        with tempfile.TemporaryDirectory(prefix="openenv-learn-") as out:
            config = trl.GRPOConfig(
                output_dir=out, use_cpu=True, per_device_train_batch_size=4, num_generations=4,
                max_completion_length=48, max_tool_calling_iterations=2, max_steps=steps, learning_rate=1e-4,
                temperature=1.0, beta=0.0, logging_steps=1, report_to=[], save_strategy="no", seed=0,
            )  # fmt: skip
            trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                                      train_dataset=datasets.Dataset.from_list(rows), environment_factory=factory,
                                      callbacks=[curve_callback(), factory.closer()])  # fmt: skip
            trainer.train()
    finally:
        source.close()
    figures: dict[str, Any] = {"steps": len(records), "seconds": round(time.monotonic() - started, 1),
                               "rewards": [round(r["reward"], 4) for r in records],
                               "reward_std": [round(r["reward_std"], 4) for r in records],
                               "tool_calls": [round(r["tool_calls"], 3) for r in records]}  # fmt: skip
    moved = len({round(r["reward"], 6) for r in records}) > 1 or any(r["reward_std"] > 0 for r in records)
    curve = ", ".join(f"{r['reward']:.3f}" for r in records)
    if moved:
        return CheckResult(name=NAME, passed=True,
                           message=f"the reward moved over {len(records)} GRPO steps of the tiny model ({curve})"), figures
    return CheckResult(
        name=NAME, passed=False, severity="warning",
        message=f"the reward never moved in {len(records)} GRPO steps (every completion scored the same: {curve})",
        fix="GRPO learns only from differences in reward: warm the model up on the oracle's episodes "
            "(`openenv collect --policy scripted:...`, then SFT), or give partial credit for steps toward the goal",
    ), figures
