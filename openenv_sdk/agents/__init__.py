"""Agent programs in the sandbox: their spec, the environment side that runs them, and a built-in one."""

from pathlib import Path

from .host import AgentHost
from .spec import AgentLaunch, AgentMode, AgentRun, AgentSpec, render_agent_command

BUILTIN_AGENT = AgentSpec(
    name="openenv-builtin",
    files={".openenv/builtin_agent.py": (Path(__file__).parent / "builtin.py").read_text(encoding="utf-8")},
    run='python3 "$HOME/.openenv/builtin_agent.py" --task-file {task_file}',
    timeout_s=600.0,
)
"""The built-in tool-calling loop (`openenv_sdk.agents.builtin`), copied into the sandbox and run
with the sandbox's `python3` (standard library only, so any image with Python runs it)."""

__all__ = ["BUILTIN_AGENT", "AgentHost", "AgentLaunch", "AgentMode", "AgentRun", "AgentSpec", "render_agent_command"]
