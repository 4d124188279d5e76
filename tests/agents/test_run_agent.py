"""The environment side of black-box agents: `run_agent`, an orchestrator-only call of `AgentHost`.

Runs for real in the terminal environment's sandbox (a local `openenv serve`); the agents here
are shell one-liners, so no model endpoint is involved (see trainers/tests/test_intercept.py
for agents whose model calls are intercepted).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.agents import BUILTIN_AGENT, AgentLaunch, AgentRun, AgentSpec
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import OpenEnvError, ToolCallError

TERMINAL_DIR = Path(__file__).resolve().parents[2] / "environments" / "terminal"
KEY = "sk-test-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def env() -> Iterator[GenericEnvClient]:
    with GenericEnvClient(env_dir=TERMINAL_DIR, timeout_s=60, startup_timeout_s=120) as client:
        yield client


def _launch(spec: AgentSpec, **kw: object) -> dict:
    return AgentLaunch(spec=spec, base_url="http://127.0.0.1:9/v1", api_key=KEY, **kw).to_wire()  # type: ignore[arg-type]


def test_the_agent_gets_its_task_config_and_endpoint_and_its_key_never_comes_back(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    spec = AgentSpec(
        name="probe",
        run='cat {task_file}; echo; cat "$HOME/.probe/config.toml"; echo "url=$OPENAI_BASE_URL key=$OPENAI_API_KEY"; '
        'echo "model=$OPENENV_MODEL extra=$EXTRA"; pwd; echo "$OPENAI_API_KEY" >&2',
        env={"EXTRA": "{model}@{base_url}"},
        config_path=".probe/config.toml",
        config='model = "{model}"\nbase_url = "{base_url}"\nkey_from = "{api_key_env}"\n',
    )
    run = AgentRun.model_validate(env.call("run_agent", launch=_launch(spec, model="m1", instruction="Do the thing.")))
    assert run.ok, run
    out = run.stdout_tail
    assert out.startswith("Do the thing.")
    # the endpoint as the sandbox reaches it: relayed in at 127.0.0.1, a port below 1024 moved up by 10000
    assert 'model = "m1"\nbase_url = "http://127.0.0.1:10009/v1"\nkey_from = "OPENAI_API_KEY"' in out
    assert "url=http://127.0.0.1:10009/v1 key=***" in out and "model=m1 extra=m1@http://127.0.0.1:10009/v1" in out
    assert out.rstrip().endswith("/work")  # it starts in the workspace
    assert KEY not in out + run.stderr_tail and run.stderr_tail.strip() == "***"
    assert KEY not in repr(AgentLaunch.model_validate(_launch(spec)))


def test_the_default_instruction_is_the_environments_task(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    run = env.call("run_agent", launch=_launch(AgentSpec(name="reader", run="cat {task_file}")))
    assert "Delete every file under project/" in run["stdout_tail"] and "no network" in run["stdout_tail"]


def test_install_runs_once_and_a_failed_install_is_reported(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    name = f"once-{uuid.uuid4().hex[:8]}"
    spec = AgentSpec(name=name, install="echo installing; touch installed-here", run="ls installed-here 2>&1; echo ran")
    first = env.call("run_agent", launch=_launch(spec))
    assert first["install_exit_code"] == 0 and "installed-here\nran" in first["stdout_tail"]
    env.call_tool("bash", command="rm installed-here")
    second = env.call("run_agent", launch=_launch(spec))
    assert "No such file" in second["stdout_tail"]  # not installed again
    changed = AgentSpec(name=name, install="touch installed-again", run="ls installed-again")
    assert env.call("run_agent", launch=_launch(changed))["exit_code"] == 0  # a changed install runs again
    keyless = AgentSpec(name=f"keyless-{uuid.uuid4().hex[:8]}", install='test -z "$OPENAI_API_KEY"', run="true")
    assert env.call("run_agent", launch=_launch(keyless))["install_exit_code"] == 0  # the install never sees the key
    broken = AgentSpec(name=f"broken-{uuid.uuid4().hex[:8]}", install="echo no such package >&2; exit 7", run="echo never")
    failed = env.call("run_agent", launch=_launch(broken))
    assert failed["install_exit_code"] == 7 and "never" not in failed["stdout_tail"] and "no such package" in failed["stderr_tail"]


def test_a_hung_agent_is_killed_at_its_timeout(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    run = env.call("run_agent", launch=_launch(AgentSpec(name="sleeper", run="echo started; sleep 600", timeout_s=1.5)))
    assert run["timed_out"] and run["stdout_tail"].startswith("started") and run["duration_s"] < 10
    assert env.call_tool("bash", command="echo alive").content[0].text.startswith("alive")


def test_bad_launches_get_clear_errors_and_run_agent_is_not_an_agent_tool(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    with pytest.raises(OpenEnvError, match=r"invalid agent launch: .*base_url"):
        env.call("run_agent", launch={**_launch(BUILTIN_AGENT), "base_url": "ftp://x"})
    with pytest.raises(OpenEnvError, match=r"invalid agent launch: spec.run"):
        env.call("run_agent", launch={**_launch(BUILTIN_AGENT), "spec": {"name": "x"}})
    assert "run_agent" not in {tool.name for tool in env.list_tools()}
    with pytest.raises(ToolCallError, match="Unknown tool 'run_agent'"):
        env.call_tool("run_agent", launch={})
    assert env.call_tool("bash", command="echo alive").content[0].text.startswith("alive")


def test_the_builtin_agent_reports_an_unreachable_model_api(env: GenericEnvClient) -> None:
    env.reset(task_id="clean_tmp_files")
    run = env.call("run_agent", launch=_launch(BUILTIN_AGENT))
    assert run["exit_code"] == 3 and "unreachable" in run["stderr_tail"], run
