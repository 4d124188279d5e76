"""Agent programs in mini_swe's sandbox: the orchestrator-only call `run_agent` (`AgentHost`).

The agents here are shell one-liners on a real local server (`openenv serve`), so no model
endpoint is involved: what is tested is where and as whom the program runs, that its work is
what the environment's tools and the host-side grader see, and that it is held to the
sandbox's limits and kept away from the hidden tests like a tool call.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mini_swe_testkit import ENV_DIR, IS_ROOT, call, load_grader_module, open_client

from openenv_sdk.agents import AgentLaunch, AgentRun, AgentSpec
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import OpenEnvError, ToolCallError
from openenv_sdk.rubric import grade

KEY = "sk-test-" + uuid.uuid4().hex

needs_root = pytest.mark.skipif(not IS_ROOT, reason="without root, agent commands run as the server's own user")


@pytest.fixture
def client(server_url: str) -> Iterator[GenericEnvClient]:
    with open_client(server_url, timeout_s=90) as c:
        yield c


def run_agent(env: GenericEnvClient, spec: AgentSpec, **kw: Any) -> AgentRun:
    launch = AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=KEY, **kw)  # type: ignore[arg-type]
    return AgentRun.model_validate(env.call("run_agent", launch=launch.to_wire()))


def test_the_agent_works_in_the_repository_as_the_sandbox_user(client: GenericEnvClient) -> None:
    first = client.reset(task_id="datekit-1")
    repo = first.observation["workdir"]
    spec = AgentSpec(
        name="shell",
        run='cp {task_file} TASK_COPY.md && echo "made by the agent" > AGENT_NOTE.txt && touch "$HOME/.written" '
        '&& pwd && id -u && echo "home=$HOME"',
    )
    run = run_agent(client, spec)
    assert run.ok, run
    where, user, home = run.stdout_tail.splitlines()
    assert where == repo  # it starts in the checkout
    assert int(user) not in ((0, os.getuid()) if IS_ROOT else ())  # the session's own uid
    assert home.startswith("home=") and home != f"home={repo}"  # the session's HOME, which it can write
    # Its work is what the tools see.
    assert "made by the agent" in call(client, "read_file", path="AGENT_NOTE.txt")
    assert "AGENT_NOTE.txt" in call(client, "run", command="git status --short")
    instruction = call(client, "read_file", path="TASK_COPY.md")
    assert first.observation["title"] in instruction and f"checked out at {repo}" in instruction
    assert "submit()" not in instruction and "FAIL_TO_PASS" not in instruction


def test_an_agent_applying_the_fix_is_graded_like_tool_calls(client: GenericEnvClient) -> None:
    """The agent never sees the gold patch: the test hands it over in the spec's `files` (written
    into the agent's HOME), and the agent applies it in its working directory."""
    client.reset(task_id="datekit-1")
    grader = load_grader_module().MiniSweGrader()
    spec = AgentSpec(
        name="patcher",
        run='git apply "$HOME/fix.patch" || patch -p1 < "$HOME/fix.patch"',
        files={"fix.patch": (ENV_DIR / "hidden" / "datekit-1" / "gold.patch").read_text(encoding="utf-8")},
    )
    assert run_agent(client, spec).ok
    score = grade(grader, client)
    assert score.value == 1.0, score.evidence
    assert "M datekit/calendar.py" in score.evidence["resolved"]["kept_changes"]


@needs_root
def test_the_agent_cannot_read_the_hidden_tests(client: GenericEnvClient) -> None:
    client.reset(task_id="datekit-1")
    hidden = ENV_DIR / "hidden"
    run = run_agent(client, AgentSpec(name="snoop", run=f"cat {hidden}/datekit-1/gold.patch; ls {hidden}"))
    out = run.stdout_tail + run.stderr_tail
    assert out.count("No such file or directory") == 2 and "+++" not in out and "datekit-1" not in run.stdout_tail


def test_a_hung_agent_is_killed_and_the_episode_goes_on(client: GenericEnvClient) -> None:
    client.reset(task_id="datekit-1")
    run = run_agent(client, AgentSpec(name="sleeper", run="echo started; sleep 600", timeout_s=1.5))
    assert run.timed_out and not run.ok and run.stdout_tail.startswith("started") and run.duration_s < 10
    assert call(client, "run", command="echo alive") == "alive\n[exit code 0]"
    assert call(client, "run", command="ps -u $(id -u) -o args | grep -c '[s]leep 600'; true").startswith("0\n")


def test_run_agent_is_not_a_tool_and_needs_a_running_episode(client: GenericEnvClient) -> None:
    spec = AgentSpec(name="noop", run="true")
    with pytest.raises(OpenEnvError, match="orchestrator has not called reset"):
        run_agent(client, spec)
    client.reset(task_id="datekit-1")
    assert "run_agent" not in {tool.name for tool in client.list_tools()}
    with pytest.raises(ToolCallError, match="Unknown tool 'run_agent'"):
        client.call_tool("run_agent", launch={})
    assert run_agent(client, spec).ok
    call(client, "submit")
    with pytest.raises(OpenEnvError, match="the episode is over"):
        run_agent(client, spec)
