"""Terminus-2 (harbor) end to end, as `test_agents_e2e.py` checks the other agents: installed
pinned from PyPI (with the image's Python >= 3.12), run in the terminal environment's sandbox
(its loop and its tmux both), every model call intercepted (OpenAI chat completions) and answered
by a scripted policy that produces tokens and speaks Terminus's JSON.

Per task (the same three): the reference solution typed into Terminus's tmux scores 1.0, doing
nothing 0.0; every call's completion tokens in the row are exactly the policy's, with its
logprobs, under mask 1, the terminal output Terminus sent back under mask 0; a wrong key stops it
at once, a closed rollout after its one refused call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from openenv_trainers.errors import AgentFailed
from openenv_trainers.generation.base import SamplingParams
from openenv_trainers.intercept import ScriptedBackend
from openenv_trainers.intercept.episode import AgentEpisodeConfig, AgentEpisodeResult, run_agent_episode
from openenv_trainers.sources import load_grader

from openenv_sdk.agents import known
from openenv_sdk.client import AsyncGenericEnvClient

from .test_agents_e2e import CACHE, TRANSIENT_LOOKING_ID, check_rows, demo, tokenizer  # noqa: F401 (tokenizer: a fixture)

TERMINUS = demo.Agent(known.TERMINUS_2, "chat", lambda command: ("keystrokes", {"keystrokes": command}))
CONFIRM = "Are you sure you want to mark the task as complete?"
_install_s: list[float] = []


def installed() -> Any:
    """Terminus-2, installed once per test session (or found in the cache)."""
    if not _install_s:
        _install_s.append(demo.install_agent(TERMINUS.spec, cache_dir=CACHE))
    return TERMINUS


def terminus_turn(analysis: str, keystrokes: list[str], *, complete: bool = False) -> str:
    """An answer in Terminus's JSON format (`terminus-json-plain`)."""
    commands = [{"keystrokes": k, "duration": 0.5} for k in keystrokes]
    return json.dumps({"analysis": analysis, "plan": analysis, "commands": commands, "task_complete": complete})


DONE = terminus_turn("Done: the task is finished.", [], complete=True)


def reference_script(task_id: str) -> Callable[[str], str]:
    """Turn k types solution block k (then Enter); then the task is marked complete, twice
    (Terminus asks to confirm)."""
    blocks = demo.solution_blocks(task_id)

    def script(prompt: str) -> str:
        turn = prompt.count("<|im_start|>assistant") - 1
        if turn < len(blocks):
            return terminus_turn(f"Step {turn + 1}.", [blocks[turn] + "\n"])
        return DONE

    return script


def run_terminus(
    task_id: str, script: Callable[[str], str], tokenizer: Any, *, preinstalled: bool = True
) -> tuple[AgentEpisodeResult, ScriptedBackend, list[Any]]:
    """One graded episode of Terminus-2 on a terminal task; the result, the policy, the calls the trainer got.
    `preinstalled`: the sandbox finds it in the cache (read-only); otherwise the spec's install runs in the sandbox."""
    policy = ScriptedBackend(tokenizer, script)
    config = AgentEpisodeConfig(
        agent=demo._cached(installed().spec, CACHE) if preinstalled else TERMINUS.spec, sampling=SamplingParams(max_tokens=1024), agent_timeout_s=180.0, max_model_calls=16
    )
    server = demo._KeepingServer(request_timeout_s=120.0)

    async def go() -> AgentEpisodeResult:
        async with AsyncGenericEnvClient(env_dir=demo.TERMINAL_DIR, timeout_s=120) as env:
            return await run_agent_episode(
                env, policy, tokenizer, server=server, task={"task_id": task_id}, rubric=load_grader(demo.TERMINAL_DIR), config=config
            )

    with server:
        result = asyncio.run(go())
    return result, policy, [r for rollout in server.opened for r in rollout.requests]


@pytest.mark.timeout(900)
def test_reference_solutions_score_one_and_the_rows_are_the_policys(tokenizer: Any) -> None:
    for task_id in demo.TASKS:
        started = time.monotonic()
        result, policy, requests = run_terminus(task_id, reference_script(task_id), tokenizer)
        where = f"terminus-2 on {task_id}"
        assert result.agent_run is not None and result.agent_run.exit_code == 0, (where, result.agent_run)
        assert result.reward == 1.0, (where, result.reward_components, result.agent_run.stderr_tail[-2000:])
        blocks = demo.solution_blocks(task_id)
        assert result.model_calls == len(blocks) + 2, where  # one call per block, "complete", "yes, complete"
        assert [r.dialect for r in requests] == ["chat"] * result.model_calls and all(not r.tools for r in requests), where
        assert len(result.segments) == 1, f"{where}: Terminus's calls extend one conversation, one row"
        check_rows(demo.Run(result, policy), tokenizer)
        (segment,) = result.segments
        text = tokenizer.decode(segment.prompt_ids + segment.completion_ids, skip_special_tokens=False)
        assert json.dumps(blocks[0] + "\n")[1:30] in text and CONFIRM in text, where  # the keystrokes, as the JSON holds them
        unmasked = tokenizer.decode([t for t, m in zip(segment.completion_ids, segment.completion_mask, strict=True) if not m])
        assert "New Terminal Output" in unmasked and CONFIRM in unmasked and '"keystrokes"' not in unmasked, where
        print(f"{where}: {result.model_calls} calls, agent {result.agent_run.duration_s:.1f} s, episode {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(900)
def test_doing_nothing_scores_zero(tokenizer: Any) -> None:
    for task_id in demo.TASKS:
        result, policy, requests = run_terminus(task_id, lambda prompt: DONE, tokenizer)
        assert result.agent_run is not None and result.agent_run.exit_code == 0, result.agent_run
        assert result.reward == 0.0, task_id
        assert result.model_calls == 2 and len(requests) == 2  # "complete", then its confirmation
        check_rows(demo.Run(result, policy), tokenizer)


@pytest.mark.timeout(900)
def test_a_wrong_key_stops_the_agent_at_once() -> None:
    run, seen = demo.run_refused(installed(), wrong_key=True, cache_dir=CACHE, rollout_id=TRANSIENT_LOOKING_ID)
    assert run.exit_code != 0 and not run.timed_out, run
    assert seen == [], "a refused call never reaches the trainer"
    assert run.stderr_tail.count("Error in LLM interaction") == 1, run  # one attempt: harbor's retries are off
    assert "the secret is not this rollout's" in run.stderr_tail and "AuthenticationError" in run.stderr_tail, run
    assert run.duration_s < 60, run  # its start-up (litellm's import: 5-25 s on a loaded 2-core machine), no back-off


@pytest.mark.timeout(900)
def test_a_closed_rollout_stops_the_agent_after_one_refused_call() -> None:
    run, seen = demo.run_refused(installed(), wrong_key=False, cache_dir=CACHE, rollout_id=TRANSIENT_LOOKING_ID)
    assert run.exit_code != 0 and not run.timed_out, run
    assert len(seen) == 1, [r.index for r in seen]
    assert run.stderr_tail.count("Error in LLM interaction") == 1, run
    assert "this rollout has ended" in run.stderr_tail, run
    assert run.duration_s < 60, run


def test_the_install_is_pinned_and_reaches_only_pypi() -> None:
    spec = TERMINUS.spec
    assert spec.install is not None and f'R="harbor=={known.HARBOR_VERSION} litellm==' in spec.install
    assert spec.install_allow == ["pypi.org", "files.pythonhosted.org"]
    installed()
    folder = CACHE / f"harbor-{known.HARBOR_VERSION}"
    assert (folder / ".installed").read_text().startswith(f"harbor=={known.HARBOR_VERSION} ")
    assert (folder / "venv" / "bin" / "python").exists()


@pytest.mark.timeout(900)
def test_the_shell_the_policy_types_into_has_no_key_and_no_host(tokenizer: Any) -> None:
    """The tmux shell is the sandbox's: no rollout key in its environment, no grader's files, no
    host network (the model endpoint is only relayed into the agent's own namespace)."""
    hidden = demo.TERMINAL_DIR / "hidden"  # the grader's reference solutions, on the host
    probe = (
        f'echo "KEY=[${{OPENAI_API_KEY:-none}}] LD=[${{LD_LIBRARY_PATH:-none}}] HIDDEN=[$(ls {hidden} 2>&1 | head -1)] WHO=[$(id -u)]"; '
        'curl -sS -m 3 http://1.1.1.1 >/dev/null 2>&1 && echo "NET=[y""es]" || echo "NET=[n""o]"\n'
    )
    seen: list[str] = []

    def script(prompt: str) -> str:
        turn = prompt.count("<|im_start|>assistant") - 1
        if turn == 0:
            return terminus_turn("Look around.", [probe])
        seen.append(prompt)
        return DONE

    result, _, _ = run_terminus("count_log_files", script, tokenizer)
    assert result.agent_run is not None and result.agent_run.exit_code == 0, result.agent_run
    output = seen[0].rsplit("Look around.", 1)[-1]
    assert "KEY=[none]" in output and "LD=[none]" in output and "HIDDEN=[ls: cannot access" in output and "NET=[no]" in output, output
    assert "WHO=[0]" not in output and "WHO=[" in output, output


@pytest.mark.timeout(300)
def test_without_python_312_in_the_sandbox_the_install_says_so(tokenizer: Any) -> None:
    """Installed in the sandbox itself, where the image's only Python >= 3.12 (pyenv's, under
    /root) is not visible: the install fails at once with a message naming what is missing, and
    no model call is made."""
    with pytest.raises(AgentFailed, match="before its first model call") as failed:
        run_terminus("count_log_files", lambda prompt: DONE, tokenizer, preinstalled=False)
    run = failed.value.agent_run
    assert run is not None and run.install_exit_code == 127, run
    assert "needs Python >= 3.12" in run.stderr_tail, run


@pytest.mark.timeout(300)
def test_harbors_retries_come_back_when_asked() -> None:
    """`OPENENV_TERMINUS_MODEL_ATTEMPTS` (for a real provider): 2 attempts in the agent's layer
    (its litellm layer does not retry a 401); the default above makes exactly one."""
    spec = TERMINUS.spec.model_copy(update={"env": {**TERMINUS.spec.env, "OPENENV_TERMINUS_MODEL_ATTEMPTS": "2"}})
    installed()
    run, seen = demo.run_refused(demo.Agent(spec, "chat", TERMINUS.shell_call), wrong_key=True, cache_dir=CACHE)
    assert run.exit_code != 0 and seen == [], run
    assert run.stderr_tail.count("Error in LLM interaction") == 2, run
