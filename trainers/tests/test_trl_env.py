"""The `environment_factory` adapter: tools as methods, reset with the row, host-side reward, GRPOTrainer."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.sources import EnvSource
from openenv_trainers.trl_env import EnvironmentFactory, python_tool_signature

from openenv_sdk import ToolFailure

from .conftest import WORDLE_DIR, cpu_grpo_args, echo_rubric


def test_a_wordle_folder_becomes_a_trl_environment_with_its_tools_and_grader() -> None:
    from transformers.utils import get_json_schema

    with EnvironmentFactory(EnvSource(env_dir=WORDLE_DIR)) as factory:
        env = factory()
        public = [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction) if not n.startswith("_")]
        assert public == ["get_reward", "guess", "reset"]
        assert get_json_schema(env.guess)["function"] == {
            "name": "guess",
            "description": "Guess the hidden word. Returns the feedback for every guess so far.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string", "description": "a five-letter English word."}},
                "required": ["word"],
            },
        }
        # TRL passes the whole row; its own columns never reach the environment.
        assert env.reset(task_id=0, prompt=[{"role": "user", "content": "play"}]) is None
        assert env.guess(word="crane").endswith("CRANE ..G..")
        assert env.guess(word="abaft").startswith("Solved in 2!")
        # WordleGrader: 1.0 solved + 0.5 * 5/6 speed + 0.2 greens.
        assert env.get_reward() == pytest.approx(1.0 + 0.5 * 5 / 6 + 0.2)
        assert env.last_score is not None and env.last_score.components["solved"] == 1.0
        with pytest.raises(ToolFailure, match="word: Input should be a valid string"):
            env.guess(word=123)
        provider = factory.source.provider
        assert provider is not None and provider.is_alive()
    assert not provider.is_alive()
    assert env._client is None


def test_task_fields_select_the_reset_arguments() -> None:
    factory = EnvironmentFactory.__new__(EnvironmentFactory)
    factory.task_fields = ["task_id"]
    assert factory.task_from_row({"task_id": 1, "prompt": [], "extra": 2}) == {"task_id": 1}
    with pytest.raises(KeyError, match=r"no task field\(s\) \['task_id'\]"):
        factory.task_from_row({"prompt": []})


def test_signatures_follow_the_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a file\n   path"},
            "lines": {"type": "array", "items": {"type": "integer"}},
            "mode": {"enum": ["r", "w"], "default": "r"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["path", "lines"],
    }
    signature, annotations, doc = python_tool_signature("read", "Read a file.", schema)
    assert list(signature.parameters) == ["self", "path", "lines", "mode", "limit"]
    assert signature.parameters["mode"].default == "r"
    assert annotations["lines"] == list[int]
    assert "    path: a file path" in doc
    with pytest.raises(ValueError, match="argument 'not-ok' is not a Python identifier"):
        python_tool_signature("t", "", {"properties": {"not-ok": {"type": "string"}}})


def test_grpo_trainer_trains_through_the_environment_factory(model: Any, tokenizer: Any, echo_url: str) -> None:
    from datasets import Dataset
    from trl import GRPOTrainer

    factory = EnvironmentFactory(EnvSource(echo_url), rubric=echo_rubric(), class_name="EchoEnv")
    before = [p.detach().clone() for p in model.parameters()]
    args = cpu_grpo_args(
        "factory",
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=96,
        max_tool_calling_iterations=2,
        max_steps=2,
        learning_rate=1e-3,
        temperature=0.8,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=Dataset.from_list(echo_rows(16)),
        environment_factory=factory,
        callbacks=[factory.closer()],
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/EchoEnv/mean" in h]
    assert len(logs) == 2
    assert sum(h["tools/call_frequency"] for h in logs) > 0  # the policy called the environment's tool
    assert any(h["rewards/EchoEnv/mean"] > 0 for h in logs)  # and the host-side grader rewarded it
    scored = [env.last_score for env in trainer._environment_pool[None] if env.last_score is not None]
    assert scored and all(set(s.components) >= {"called", "similar", "exact"} for s in scored)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert factory.instances == []  # closed at the end of training
