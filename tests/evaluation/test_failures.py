"""A failure is never a reward, in `openenv eval` / `collect`: fault injection over 500 episodes.

Real parts: `FaultyEnvironment` served on a real port, each session with a bubblewrap sandbox; the
judge a real HTTP server on another port. 5 % of resets fail, 10 % of sandboxes are killed while
the grader's check runs in them, 10 % of judge calls answer HTTP 500. Every such episode's record
carries its cause and no reward; the others are graded as the plan says, the policy's own
timeout (its command past the tool's limit) scoring 0; the summary and report count by cause.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_sdk import create_app
from openenv_sdk.episode_config import EpisodeConfig
from openenv_sdk.evaluation import EnvTarget, PlannedEpisode, RunConfig, ScriptedPolicy, run_episodes
from openenv_sdk.evaluation._metrics import summarize
from openenv_sdk.evaluation._report import markdown_report
from openenv_sdk.failures import FailureCause
from openenv_sdk.fault_injection import FaultyEnvironment, PlannedFault, fault_plan, judge_app
from openenv_sdk.testing import serve_app

EPISODES = 500
CAUSE_OF_FAULT = {"reset": FailureCause.RESET, "sandbox": FailureCause.SANDBOX, "judge": FailureCause.JUDGE}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with serve_app(judge_app()) as judge_url, serve_app(create_app(FaultyEnvironment)) as env_url:
        yield env_url, f"{judge_url}/v1"


def _policy(plan: dict[str, PlannedFault]) -> ScriptedPolicy:
    def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: Any) -> dict[str, Any] | str:
        episode = plan[context.key]
        if context.turn > 0:
            return "Done."
        if episode.behaviour == "timeout":  # its own command runs past the tool's limit: no answer
            return {"tool_calls": [{"name": "run", "arguments": {"command": "sleep 5"}}]}
        word = episode.target if episode.behaviour == "right" else "wrong"
        return {"tool_calls": [{"name": "answer", "arguments": {"text": word}}]}

    return ScriptedPolicy(act, name="fault-plan")


@pytest.mark.timeout(600)
def test_every_failure_carries_its_cause_and_no_reward(servers: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    env_url, judge_url = servers
    monkeypatch.setenv("OPENENV_FAULT_JUDGE_URL", judge_url)
    plan = fault_plan(EPISODES, seed=7)
    planned = [PlannedEpisode(task_id=f"g{p.group}", attempt=p.index % 4, reset_kwargs=p.reset_kwargs) for p in plan]
    by_key = {e.key: p for e, p in zip(planned, plan, strict=True)}
    target = EnvTarget(env_url, grader="openenv_sdk.fault_injection:FaultyGrader")  # as `openenv eval --grader` names it

    async def main() -> list[Any]:
        await target.start()
        tools = [t for t in (await _tools(target))]
        return await run_episodes(
            target, _policy(by_key), planned, tools=tools, episode=EpisodeConfig(max_turns=3),
            run=RunConfig(concurrency=16, episode_timeout_s=60.0), model="scripted",
        )  # fmt: skip

    started = time.monotonic()
    records = asyncio.run(main())
    took_s = time.monotonic() - started

    seen: collections.Counter[str] = collections.Counter()
    for record in records:
        episode = by_key[record.key]
        if episode.fault == "none":
            assert record.error is None and record.failure is None, (record.key, record.error)
            assert record.reward == episode.expected_reward, (record.key, episode.behaviour, record.reward)
            seen["graded"] += 1
        else:
            assert record.reward is None and record.failure is not None, (record.key, record.reward)
            assert record.failure.cause == CAUSE_OF_FAULT[episode.fault], (record.key, record.failure)
            assert record.failure.stage == ("reset" if episode.fault == "reset" else "grading")
            seen[record.failure.cause.value] += 1
    assert seen == {"graded": 375, "reset": 25, "sandbox": 50, "judge": 50}
    timeouts = [r for r in records if by_key[r.key].behaviour == "timeout" and by_key[r.key].fault == "none"]
    assert timeouts and all(r.reward == 0.0 and r.failure is None for r in timeouts)  # the policy's own: a 0
    assert all("ran past 0.2 s" in r.messages[3]["content"] for r in timeouts)

    summary = summarize(records, ks=[1], pass_threshold=1.0, command="eval", env="faulty", policy="p", model="m",
                        split=None, tasks=EPISODES // 4, rollouts_per_task=4)  # fmt: skip
    assert summary.failures_by_cause == {"sandbox": 50, "judge": 50, "reset": 25}
    assert (summary.graded, summary.errors) == (375, 125)
    expected = [p.expected_reward for p in plan if p.expected_reward is not None]
    assert summary.mean_reward == pytest.approx(sum(expected) / len(expected))
    report = markdown_report(summary, records)
    assert "| failed episodes by cause | sandbox 50, judge 50, reset 25 |" in report
    print(f"\n{EPISODES} episodes in {took_s:.1f} s: {dict(seen)}; mean reward of the graded {summary.mean_reward:.3f}")


async def _tools(target: EnvTarget) -> list[dict[str, Any]]:
    from openenv_sdk.evaluation import openai_tools

    client = target.client()
    try:
        return openai_tools((await client.schema()).tools)
    finally:
        await client.aclose()
