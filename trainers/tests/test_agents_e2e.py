"""Third-party agents end to end: installed from their registry, run in the terminal environment's
sandbox, every model call intercepted in the agent's own API dialect and answered by a scripted
policy that produces tokens.

Per agent (`examples/agents/agents_intercepted.py`'s `AGENTS`): three terminal tasks driven to a
graded finish (the reference solution through the agent's own shell tool scores 1.0, doing
nothing 0.0); every model call's completion tokens in the rows are exactly the policy's, with
its logprobs, under mask 1, and the tool results the agent fed back are under mask 0; a wrong key
stops the agent at once, a closed rollout after its one refused call.

The installs go to `.cache/agents/` at the repository root (Pi: about 15 s from the npm registry
the first time, nothing after), found read-only by the sandbox (`OPENENV_AGENTS_DIR`).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from types import ModuleType
from typing import Any

import pytest
from openenv_trainers.errors import AgentFailed

from .conftest import REPO
from .tokens import mask_runs

DEMO_PATH = REPO / "examples" / "agents" / "agents_intercepted.py"
CACHE = REPO / ".cache" / "agents"


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agents_intercepted", DEMO_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


demo = _load_demo()
AGENT_NAMES = list(demo.AGENTS)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return demo.policy_tokenizer()


_installed: dict[str, float] = {}


def installed(name: str) -> Any:
    """The agent, installed once per test session (or found in the cache)."""
    agent = demo.AGENTS[name]
    if name not in _installed:
        _installed[name] = demo.install_agent(agent.spec, cache_dir=CACHE)
    return agent


def check_rows(run: Any, tokenizer: Any) -> None:
    """The rows hold the policy's tokens and logprobs under mask 1, one run per call, in order,
    and nothing else; the tool results are under mask 0."""
    result, policy = run.result, run.policy
    assert result.model_calls == len(policy.produced) >= 1
    runs, sampled_logprobs = [], []
    for segment in result.segments:
        mask = segment.completion_mask
        assert len(mask) == len(segment.completion_ids) == len(segment.completion_logprobs)
        for start, end in mask_runs(mask):
            runs.append(segment.completion_ids[start:end])
            sampled_logprobs.append(segment.completion_logprobs[start:end])
        assert all(math.isnan(x) for x, m in zip(segment.completion_logprobs, mask, strict=True) if not m)
        prompt = tokenizer.decode(segment.prompt_ids, skip_special_tokens=False)
        assert prompt.endswith("<|im_start|>assistant\n") and "working directory" in prompt  # the agent's prompt, the task in it
    assert sum(s.model_calls for s in result.segments) == result.model_calls
    assert runs == policy.produced, "the rows' sampled tokens are not exactly the policy's, call by call"
    assert sampled_logprobs == policy.produced_logprobs


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", AGENT_NAMES)
def test_reference_solutions_score_one_and_the_rows_are_the_policys(name: str, tokenizer: Any) -> None:
    agent = installed(name)
    for task_id in demo.TASKS:
        run = demo.run_task(agent, task_id, cache_dir=CACHE, tokenizer=tokenizer)
        result = run.result
        where = f"{name} on {task_id}"
        assert result.agent_run is not None and result.agent_run.exit_code == 0, (where, result.agent_run)
        assert result.reward == 1.0, (where, result.reward_components, result.agent_run.stderr_tail[-2000:])
        blocks = demo.solution_blocks(task_id)
        assert result.model_calls == len(blocks) + 1, where  # one call per block, then the final answer
        assert run.dialects == [agent.dialect] * result.model_calls, where
        assert len(result.segments) == 1, f"{where}: the agent's calls extend one conversation, one row"
        check_rows(run, tokenizer)
        (segment,) = result.segments
        text = tokenizer.decode(segment.prompt_ids + segment.completion_ids, skip_special_tokens=False)
        assert json.dumps(blocks[0])[1:30] in text and demo.FINAL in text  # the command, as the call's JSON holds it
        assert text.count("<tool_response>") == len(blocks), where  # each command's result went back to the policy
        unmasked = tokenizer.decode([t for t, m in zip(segment.completion_ids, segment.completion_mask, strict=True) if not m])
        assert "<tool_response>" in unmasked and demo.FINAL not in unmasked


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", AGENT_NAMES)
def test_doing_nothing_scores_zero(name: str, tokenizer: Any) -> None:
    agent = installed(name)
    for task_id in demo.TASKS:
        run = demo.run_task(agent, task_id, nothing=True, cache_dir=CACHE, tokenizer=tokenizer)
        assert run.result.agent_run is not None and run.result.agent_run.exit_code == 0
        assert run.result.reward == 0.0, (name, task_id)
        assert run.result.model_calls == 1 and run.dialects == [agent.dialect]
        check_rows(run, tokenizer)


# A rollout id holding every status code OpenCode takes for a transient error when it appears in
# an error's text (/429|500|502|503|504|524/: a minute of retries); ~4% of random hex ids hold one.
TRANSIENT_LOOKING_ID = "a429b500c502d503e504f524"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", AGENT_NAMES)
def test_a_wrong_key_stops_the_agent_at_once(name: str) -> None:
    run, seen = demo.run_refused(installed(name), wrong_key=True, cache_dir=CACHE, rollout_id=TRANSIENT_LOOKING_ID)
    assert run.exit_code != 0 and not run.timed_out, run
    assert seen == [], "a refused call never reaches the trainer"
    assert run.duration_s < 30, run
    assert "401" in run.stdout_tail + run.stderr_tail or "secret" in run.stdout_tail + run.stderr_tail, run


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", AGENT_NAMES)
def test_a_closed_rollout_stops_the_agent_after_one_refused_call(name: str) -> None:
    run, seen = demo.run_refused(installed(name), wrong_key=False, cache_dir=CACHE, rollout_id=TRANSIENT_LOOKING_ID)
    assert run.exit_code != 0 and not run.timed_out, run
    assert len(seen) == 1, [r.index for r in seen]
    assert run.duration_s < 30, run
    assert "410" in run.stdout_tail + run.stderr_tail or "ended" in run.stdout_tail + run.stderr_tail, run


def test_each_install_is_pinned_and_reaches_only_its_registry() -> None:
    from openenv_sdk.agents import known

    pinned = {
        "pi": f"@mariozechner/pi-coding-agent@{known.PI_VERSION}",
        "pi-responses": f"@mariozechner/pi-coding-agent@{known.PI_VERSION}",
        "pi-anthropic": f"@mariozechner/pi-coding-agent@{known.PI_VERSION}",
        "claude-code": f"@anthropic-ai/claude-code@{known.CLAUDE_CODE_VERSION}",
        "codex": f"@openai/codex@{known.CODEX_VERSION}",
        "opencode": f"opencode-ai@{known.OPENCODE_VERSION}",
    }
    assert set(pinned) == set(AGENT_NAMES)
    for name, package in pinned.items():
        spec = demo.AGENTS[name].spec
        assert spec.install is not None and f'R="{package}"' in spec.install, name
        assert spec.install_allow == ["registry.npmjs.org"], name
        installed(name)
        folder = next(p for p in CACHE.iterdir() if (p / ".installed").is_file() and (p / ".installed").read_text().strip() == package)
        assert (folder / "node_modules" / ".bin").is_dir(), name


@pytest.mark.timeout(900)
def test_pi_installs_in_the_sandbox_reaching_only_the_npm_registry(tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not pre-installed: the spec's install runs in the episode's sandbox, through the allowlist proxy."""
    import socket

    from openenv_sdk.agents.host import INSTALL_PINS_ENV

    # The registry at the address it has here (an operator's pin: some networks route it through
    # an internal address, which the proxy refuses unless pinned).
    monkeypatch.setenv(INSTALL_PINS_ENV, json.dumps({"registry.npmjs.org": socket.gethostbyname("registry.npmjs.org")}))
    run = demo.run_task(demo.AGENTS["pi"], "count_log_files", tokenizer=tokenizer, preinstalled=False, timeout_s=300)
    agent_run = run.result.agent_run
    assert agent_run is not None and agent_run.install_exit_code == 0, agent_run
    assert run.result.reward == 1.0 and agent_run.exit_code == 0
    check_rows(run, tokenizer)

    # The same install reaches nothing but its registry.
    probe = demo.AGENTS["pi"].spec.model_copy(
        update={"name": "egress-probe", "install": "curl -sS -m 10 -o /dev/null https://pypi.org/simple/ && echo REACHED", "run": "true"}
    )
    # A failed install is the agent's failure before any model call: an episode error, not a reward.
    with pytest.raises(AgentFailed) as failed:
        demo.run_task(demo.Agent(probe, "chat", demo.AGENTS["pi"].shell_call), "count_log_files", tokenizer=tokenizer, preinstalled=False)
    blocked = failed.value.agent_run
    assert blocked.install_exit_code not in (0, None) and blocked.exit_code == blocked.install_exit_code
    assert "REACHED" not in blocked.stdout_tail


@pytest.mark.timeout(900)
def test_pi_in_three_dialects_gives_the_same_rows(tokenizer: Any) -> None:
    """One agent, one task, three dialects: the same completions, masks and logprobs; the same
    prompt but for the episode's own folder (and, in Anthropic Messages, Pi's tool schemas, which
    it writes differently per API: no `additionalProperties`, another key order; kept as sent)."""
    rows = {}
    for name in ("pi", "pi-responses", "pi-anthropic"):
        run = demo.run_task(installed(name), "csv_column_sum", tokenizer=tokenizer)
        (segment,) = run.result.segments
        prompt = re.sub(r"openenv-terminal-[A-Za-z0-9_]+", "EPISODE", tokenizer.decode(segment.prompt_ids))
        rows[name] = (prompt, segment.completion_ids, segment.completion_mask, segment.completion_logprobs)
    assert _nan_equal(rows), "the completions, masks or logprobs differ between dialects"
    assert rows["pi-responses"][0] == rows["pi"][0]
    assert _tools_named(rows["pi-anthropic"][0]) == _tools_named(rows["pi"][0])


def _tools_named(prompt: str) -> str:
    """The prompt with each rendered tool schema reduced to its name (Pi words its schemas per API)."""
    lines = prompt.splitlines()
    return "\n".join(json.loads(x)["function"]["name"] if x.startswith('{"type": "function"') else x for x in lines)


def _nan_equal(rows: dict[str, Any]) -> bool:
    """The rows' ids and masks equal, and their logprobs equal with NaN (mask 0) matching NaN."""
    first = rows["pi"]
    for row in rows.values():
        if row[1:3] != first[1:3]:
            return False
        if [None if math.isnan(x) else x for x in row[3]] != [None if math.isnan(x) else x for x in first[3]]:
            return False
    return True
