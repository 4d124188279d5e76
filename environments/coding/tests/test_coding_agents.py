"""Agent programs in the coding sandbox: the orchestrator-only call `run_agent` (`AgentHost`).

The agents here are shell one-liners on a real local server (`openenv serve`), so no model
endpoint is involved: what is tested is where and as whom the program runs, that its work is
what the environment's tools and the grader see, and that it is held to the sandbox's limits
and kept away from the hidden tests like a tool call.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from coding_support import AS_ROOT, reference, tool_text

from openenv_sdk.agents import AgentLaunch, AgentRun, AgentSpec
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import OpenEnvError, ToolCallError
from openenv_sdk.rubric import grade

KEY = "sk-test-" + uuid.uuid4().hex

needs_root = pytest.mark.skipif(
    not AS_ROOT,
    reason="without root, agent commands run as the server's own user (documented limitation); run as root, "
    "or in the image, for this isolation",
)


def run_agent(env: GenericEnvClient, spec: AgentSpec, **kw: Any) -> AgentRun:
    launch = AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=KEY, **kw)  # type: ignore[arg-type]
    return AgentRun.model_validate(env.call("run_agent", launch=launch.to_wire()))


def test_the_agent_works_in_the_workspace_as_the_sandbox_user(session: GenericEnvClient, grader: Any) -> None:
    session.reset(task_id="fizzbuzz")
    spec = AgentSpec(
        name="shell",
        run='cat {task_file} > task-copy.md && echo "made by the agent" > agent_note.txt && '
        'cp "$HOME/ref.py" solution.py && touch "$HOME/.written" && pwd && id -u && echo "home=$HOME"',
        files={"ref.py": reference("fizzbuzz")},
    )
    run = run_agent(session, spec)
    assert run.ok, run
    workspace = session.state()["working_directory"]
    where, user, home = run.stdout_tail.splitlines()
    assert where == workspace  # it starts in the workspace
    assert user == tool_text(session.call_tool("run_shell", command="id -u")).split()[0]  # the session's user
    assert (user != "0") if AS_ROOT else (user == str(os.getuid()))
    assert home.startswith("home=") and home != f"home={workspace}"  # a HOME of its own, which it can write
    # Its work is what the tools see...
    assert tool_text(session.call_tool("read_file", path="agent_note.txt")) == "made by the agent\n"
    instruction = tool_text(session.call_tool("read_file", path="task-copy.md"))
    assert "Implement `fizzbuzz(n: int) -> list[str]` in `solution.py`." in instruction
    assert f"Your working directory is {workspace}" in instruction and "submit" not in instruction
    # ... and what the grader grades.
    assert grade(grader, session).value == 1.0


@needs_root
def test_the_agent_cannot_read_the_hidden_tests(
    session: GenericEnvClient, private_hidden: Path, served_dir: Path
) -> None:
    session.reset(task_id="lru_cache")
    snoop = f"cat {private_hidden}/lru_cache/test_lru_cache.py; ls {served_dir}/hidden; ls -A {served_dir}"
    spec = AgentSpec(name="snoop", run=snoop)
    run = run_agent(session, spec)
    out = run.stdout_tail + run.stderr_tail
    assert out.count("No such file or directory") == 3 and "coding_env.py" not in out  # none of it is mounted
    assert "def test_" not in out


def test_a_hung_agent_is_killed_and_the_episode_goes_on(session: GenericEnvClient) -> None:
    session.reset(task_id="fizzbuzz")
    run = run_agent(session, AgentSpec(name="sleeper", run="echo started; sleep 600", timeout_s=1.5))
    assert run.timed_out and not run.ok and run.stdout_tail.startswith("started") and run.duration_s < 10
    assert tool_text(session.call_tool("run_shell", command="echo alive")) == "alive\n[exit code 0]"
    left = tool_text(session.call_tool("run_shell", command="ps -u $(id -u) -o args | grep -c '[s]leep 600'; true"))
    assert left.startswith("0\n")  # nothing of it outlived the run
    assert "NotImplementedError" in tool_text(session.call_tool("read_file", path="solution.py"))


def test_run_agent_is_not_a_tool_and_needs_a_running_episode(session: GenericEnvClient) -> None:
    spec = AgentSpec(name="noop", run="true")
    with pytest.raises(OpenEnvError, match="orchestrator has not called reset"):
        run_agent(session, spec)
    session.reset(task_id="fizzbuzz")
    assert "run_agent" not in {tool.name for tool in session.list_tools()}
    with pytest.raises(ToolCallError, match="Unknown tool 'run_agent'"):
        session.call_tool("run_agent", launch={})
    assert run_agent(session, spec).ok
    session.call_tool("submit")
    with pytest.raises(OpenEnvError, match="the episode is over"):
        run_agent(session, spec)
