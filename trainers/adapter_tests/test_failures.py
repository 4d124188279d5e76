"""A failure is never a reward, in the verl, ART and SkyRL adapters: fault injection over 500
episodes each (verifiers: tests/test_verifiers.py's real `vf-eval` path, fewer episodes).

Real parts: `openenv_sdk.fault_injection.FaultyEnvironment` served on a real port (each session a
bubblewrap sandbox), its judge a real HTTP server on another port; each episode's task says its
fault (`fault_plan`: 5 % reset failures, 10 % sandboxes killed while the grader's check runs,
10 % judge HTTP 500) and what the scripted policy does (the right word, a wrong one, or a command
past the tool's limit: the policy's own timeout, which scores 0). Each adapter is driven through
its trainer's own entry point; each failed episode must carry its cause, and each group's
advantages, by the trainer's own advantage code where it has one, must equal those of the
group's surviving episodes alone.
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import os
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from openenv_trainers.advantages import surviving_advantages

from openenv_sdk import ServerConfig, create_app
from openenv_sdk.errors import EpisodeFailed
from openenv_sdk.fault_injection import FaultyEnvironment, PlannedFault, fault_plan, faulty_grader, judge_app

from .conftest import serve

EPISODES = 500
GROUP = 4
CAUSE = {"reset": "reset", "sandbox": "sandbox", "judge": "judge"}
PLAN = fault_plan(EPISODES, group_size=GROUP, seed=11)
ASK = re.compile(r"Answer the word '(\w+)' \((right|wrong|timeout)\)")


def prompt_of(p: PlannedFault) -> str:
    return f"Answer the word '{p.target}' ({p.behaviour}) with the answer tool."


def call_for(text: str) -> dict[str, Any] | None:
    """The scripted policy's tool call for the conversation's task text (None once a tool answered)."""
    match = ASK.search(text)
    assert match is not None, text[-300:]
    target, behaviour = match.groups()
    if behaviour == "timeout":
        return {"name": "run", "arguments": {"command": "sleep 5"}}
    return {"name": "answer", "arguments": {"text": target if behaviour == "right" else "wrong"}}


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with serve(judge_app()) as judge, serve(create_app(FaultyEnvironment, config=ServerConfig(max_sessions=256))) as env:
        yield env, f"{judge}/v1"


def expected_group_rewards(group: int) -> list[float]:
    return [p.expected_reward for p in PLAN[group * GROUP : (group + 1) * GROUP] if p.expected_reward is not None]


# --- SkyRL -----------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_skyrl_failed_episodes_raise_their_cause_and_carry_no_reward(urls: tuple[str, str]) -> None:
    from openenv_trainers.adapters.skyrl import OpenEnvSkyRLEnv

    env_url, judge_url = urls
    grader = faulty_grader(judge_url)

    def play(p: PlannedFault) -> tuple[float | None, str | None]:
        env = OpenEnvSkyRLEnv({"base_url": env_url, "grader": grader}, {"reset": p.reset_kwargs, "max_turns": 3})
        try:
            env.init([{"role": "user", "content": prompt_of(p)}])
            call = call_for(prompt_of(p))
            env.step(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
            out = env.step("Done.")
            assert out["done"] and env.failure is None
            return float(out["reward"]), None
        except EpisodeFailed as e:
            assert env.failure == e.failure and env.session is None  # closed
            metrics = env.get_metrics()
            assert metrics[f"openenv/failure/{e.failure.cause.value}"] == 1
            return None, e.failure.cause.value
        finally:
            env.close()

    started = time.monotonic()
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(play, PLAN))
    took_s = time.monotonic() - started
    for p, (reward, cause) in zip(PLAN, results, strict=True):
        assert cause == CAUSE.get(p.fault) and reward == p.expected_reward, (p, reward, cause)
    rewards = [r for r, _ in results]
    for g in range(EPISODES // GROUP):
        ours = surviving_advantages(rewards[g * GROUP : (g + 1) * GROUP])
        alone = surviving_advantages(expected_group_rewards(g))
        assert (ours is None) == (alone is None)
        if ours is not None:
            assert [a for a in ours if a is not None] == pytest.approx(alone)
    print(f"\nskyrl: {EPISODES} episodes in {took_s:.1f} s, {collections.Counter(c for _, c in results if c)}")


# --- ART -------------------------------------------------------------------------------------


def art_advantages(rewards: list[float]) -> list[float]:
    """ART 0.5's GRPO advantages of one group (`art.preprocessing.tokenize.tokenize_trajectory_groups`)."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + 1e-6) for r in rewards]


def art_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    if messages[-1].get("role") != "user":
        return {"role": "assistant", "content": "Done."}
    call = call_for(str(messages[-1]["content"]))
    assert call is not None
    function = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(messages)}", "type": "function", "function": function}]}


@pytest.mark.timeout(600)
def test_art_groups_hold_the_survivors_and_their_advantages_are_arts_over_them(urls: tuple[str, str], tmp_path: Path) -> None:
    import art
    from openenv_trainers.adapters.art import OpenEnvRollout
    from openenv_trainers.sources import EnvSource

    from .scripted_chat import ChatServer
    from .test_art import play

    env_url, judge_url = urls
    rollout = OpenEnvRollout(EnvSource(env_url), grader=faulty_grader(judge_url), max_turns=3)
    chat = ChatServer(art_reply)

    async def gather(model: art.Model) -> list[art.TrajectoryGroup]:
        gathered: list[art.TrajectoryGroup] = []
        for start in range(0, EPISODES // GROUP, 16):  # ART gathers all at once: 64 episodes at a time
            groups = (
                art.TrajectoryGroup(
                    rollout(model, {"reset": p.reset_kwargs, "prompt": prompt_of(p)}) for p in PLAN[g * GROUP : (g + 1) * GROUP]
                )
                for g in range(start, min(start + 16, EPISODES // GROUP))
            )
            gathered += await art.gather_trajectory_groups(groups, pbar_desc=None, max_exceptions=EPISODES)
        return gathered

    started = time.monotonic()
    with serve(chat.app) as url:
        groups = play(f"{url}/v1", tmp_path, gather)
    took_s = time.monotonic() - started
    assert len(groups) == EPISODES // GROUP
    causes: collections.Counter[str] = collections.Counter()
    for g, group in enumerate(groups):
        planned = PLAN[g * GROUP : (g + 1) * GROUP]
        # Each failure is the group's exception, its cause first in the message; never a trajectory.
        got = sorted(e.message.split(" failure at ")[0] for e in group.exceptions)
        assert got == sorted(CAUSE[p.fault] for p in planned if p.fault != "none"), (g, [e.message for e in group.exceptions])
        assert all("EpisodeFailed" in e.type for e in group.exceptions), [e.type for e in group.exceptions]
        causes.update(got)
        rewards = [t.reward for t in group.trajectories]
        assert sorted(rewards) == sorted(expected_group_rewards(g))
        # ART's advantages (its local backend's `tokenize_trajectory_groups`, art/preprocessing/
        # tokenize.py: population std, + 1e-6) over the group it trains on, which holds the survivors
        # alone. Its lines are re-run here: the function itself tokenizes every trajectory, which
        # needs the policy's chat template and token-level choices this scripted model has not.
        alone = expected_group_rewards(g)
        if not alone:
            assert not rewards
            continue
        by_reward = dict(zip(alone, art_advantages(alone), strict=True))
        assert art_advantages(rewards) == pytest.approx([by_reward[r] for r in rewards])
    assert causes == {"reset": 25, "sandbox": 50, "judge": 50}
    print(f"\nart: {EPISODES} episodes in {took_s:.1f} s, {dict(causes)}")


# --- verl ------------------------------------------------------------------------------------


class ScriptedServer:
    """verl's LLM server client, answered by the scripted policy as token ids (hermes tool calls)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.tokenizer.decode(prompt_ids)
        if "<tool_response>" in text:
            reply = "Done."
        else:
            reply = f"<tool_call>\n{json.dumps(call_for(text))}\n</tool_call>"
        ids = self.tokenizer.encode(reply, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


@pytest.mark.timeout(600)
def test_verl_failed_rows_train_nothing_and_openenv_grpo_is_verls_grpo_over_the_survivors(
    tiny_model_dir: Path, urls: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml
    from openenv_trainers.adapters import verl as adapter
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

    from .test_verl import verl_config

    env_url, judge_url = urls
    monkeypatch.setenv("OPENENV_FAULT_JUDGE_URL", judge_url)
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(yaml.safe_dump([adapter.agent_loop_config("openenv", base_url=env_url, grader="openenv_sdk.fault_injection:FaultyGrader")]))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    worker = AgentLoopWorker(verl_config(tiny_model_dir, loops), ScriptedServer(tokenizer))
    started = time.monotonic()
    scores: list[float] = []
    failures: list[str | None] = []
    masks: list[torch.Tensor] = []
    for start in range(0, EPISODES, 100):
        part = PLAN[start : start + 100]
        batch = DataProto.from_dict(
            non_tensors={
                "raw_prompt": np.array([[{"role": "user", "content": prompt_of(p)}] for p in part], dtype=object),
                "agent_name": np.array(["openenv"] * len(part), dtype=object),
                "extra_info": np.array([{"reset": p.reset_kwargs} for p in part], dtype=object),
            },
            meta_info={"global_steps": 1, "validate": False},
        )
        out = asyncio.run(worker.generate_sequences(batch))
        scores += out.batch["rm_scores"].sum(dim=-1).tolist()
        masks += list(out.batch["response_mask"])
        failures += list(out.non_tensor_batch["openenv_failure"])  # verl spreads extra_fields into columns
    took_s = time.monotonic() - started
    for p, score, failure, mask in zip(PLAN, scores, failures, masks, strict=True):
        assert failure == CAUSE.get(p.fault), (p, failure)
        if failure is None:
            assert score == p.expected_reward and mask.any()
        else:
            assert not mask.any()  # nothing of a failed trajectory is trained on
    # verl's estimator registry has ours; it is verl's GRPO over each group's survivors alone.
    estimator = get_adv_estimator_fn(adapter.ADV_ESTIMATOR)
    width = max(len(m) for m in masks)
    mask = torch.stack([torch.nn.functional.pad(m, (0, width - len(m))) for m in masks])
    rewards = torch.zeros_like(mask, dtype=torch.float32)
    rewards[:, 0] = torch.tensor(scores)
    index = np.array([p.group for p in PLAN], dtype=object)
    advantages, _ = estimator(token_level_rewards=rewards, response_mask=mask, index=index)
    for g in range(EPISODES // GROUP):
        rows = [i for i in range(g * GROUP, (g + 1) * GROUP) if failures[i] is None]
        others = [i for i in range(g * GROUP, (g + 1) * GROUP) if failures[i] is not None]
        assert all(float(advantages[i].abs().sum()) == 0.0 for i in others)
        if len(rows) < 2:
            assert all(float(advantages[i].abs().sum()) == 0.0 for i in rows)
            continue
        alone, _ = compute_grpo_outcome_advantage(rewards[rows], mask[rows], index[rows])
        assert torch.allclose(advantages[rows], alone)
    print(f"\nverl: {EPISODES} episodes in {took_s:.1f} s, {collections.Counter(f for f in failures if f)}")


# --- verifiers -------------------------------------------------------------------------------

VF_EPISODES = int(os.environ.get("OPENENV_VF_FAULT_EPISODES", "16"))
"""Through `run_eval` (each episode runs verifiers' harness program, a `uv` subprocess): 16 in the
suite; `OPENENV_VF_FAULT_EPISODES=500` plays the whole plan, 8 episodes at a time (unbounded,
`run_eval` starts every harness process at once and its harness timed out on 2 cores): 500
episodes in 631 s here."""


@pytest.mark.timeout(600 if VF_EPISODES <= 16 else 3600)
def test_verifiers_failed_episodes_are_errored_traces_with_their_cause_and_no_reward(
    urls: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifiers.v1.cli.eval.runner import run_eval

    from .scripted_chat import ChatServer
    from .test_verifiers import _config, _env

    env_url, judge_url = urls
    monkeypatch.setenv("OPENENV_FAULT_JUDGE_URL", judge_url)
    monkeypatch.setenv("PATH", _env()["PATH"])
    # 16 episodes of the plan, every fault among them: each group's first and each fault's first.
    picked = sorted({*PLAN[:8], *(next(p for p in PLAN if p.fault == f) for f in ("reset", "sandbox", "judge"))}, key=lambda p: p.index)
    picked += [p for p in PLAN if p.fault == "none" and p not in picked][: VF_EPISODES - len(picked)]
    if VF_EPISODES >= len(PLAN):
        picked = list(PLAN)
    tasks = [{"prompt": prompt_of(p), "reset": p.reset_kwargs} for p in picked]
    chat = ChatServer(art_reply)
    started = time.monotonic()
    with serve(chat.app) as url:
        config = _config(f"{url}/v1", tmp_path, base_url=env_url, grader="openenv_sdk.fault_injection:FaultyGrader", tasks=tasks)
        if len(picked) > 16:  # run_eval starts every harness process at once unless bounded
            config = config.model_copy(update={"max_concurrent": 8})
        episodes = asyncio.run(run_eval(config))
    took_s = time.monotonic() - started
    assert len(episodes) == len(picked)
    by_task = {(prompt_of(p), p.fault): p for p in picked}  # the same key: the same expected outcome
    seen: collections.Counter[str] = collections.Counter()
    for episode in episodes:
        data = episode.task.data
        prompt, reset = (data.prompt, data.reset) if not isinstance(data, dict) else (data["prompt"], data["reset"])
        p = by_task[(prompt, reset["fault"])]
        if p.fault == "none":
            (trace,) = episode.traces
            why = (p, episode.errors, trace.errors, trace.stop_condition, trace.is_timeout)
            assert episode.ok and trace.reward == p.expected_reward, why
        else:
            assert not episode.ok
            (error,) = episode.errors
            assert f"{CAUSE[p.fault]} failure at " in error.message, error.message
            seen[CAUSE[p.fault]] += 1
    assert set(seen) == {"reset", "sandbox", "judge"}
    print(f"\nverifiers: {len(picked)} episodes in {took_s:.1f} s, {dict(seen)}")
