"""verifiers (0.4, `verifiers.v1`; what prime-rl trains with): any openenv-sdk environment as a taskset.

    vf-eval openenv-trainers-verifiers --env.taskset.env-dir environments/wordle \\
        --env.taskset.split test -n 5 -m MODEL --client.base-url http://127.0.0.1:8000/v1

The plugin id `openenv-trainers-verifiers` is the top-level module `openenv_trainers_verifiers`,
which re-exports the three classes verifiers looks up in a taskset package's `__all__`:

- `OpenEnvTaskset`: the tasks, from the config (`tasks`: reset arguments and prompts) or from the
  server's Task API (`split`); its config names the environment (`env_dir`, `base_url` or `image`)
  and the grader.
- `OpenEnvEnv`: one episode per task: a session on the environment's server is reset with the
  task, the agent runs with that session's MCP endpoint as its only tool server (so the tools and
  their schemas are the server's own, and each call acts in this episode), then the host-side
  grader grades the session and its score is the trace's reward (`openenv_reward`; its components
  are metrics `openenv/<name>`). The session is closed whatever happens.
- `OpenEnvHarness`: the default agent, verifiers' tool-calling chat loop (`null` harness) with no
  local tools: the model sees only the environment's tools.

The grader runs in the eval (or prime-rl env-server) process, never where the agent runs.
Failures are typed: a bad config raises `ValueError` at load, an environment that cannot be
reset or graded raises `openenv_sdk.errors.OpenEnvError` inside `run()`, which verifiers records
as the episode's `EnvError`. A failure is never a reward (docs/failures.md): a reset that failed,
a sandbox killed while grading, a judge's HTTP 500 raise `EpisodeFailed`, whose message starts
with the cause (`judge failure at grading: ...`); the trace records no reward, is not `ok`, and
carries the metric `openenv/failure/<cause>` when it got that far. verifiers has no advantage
code of its own: a trainer must take only the traces that are `ok`, and
the group's advantages are those of its survivors (`openenv_trainers.advantages.surviving_advantages`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import BaseModel, ConfigDict, Field
from verifiers.v1.harnesses.null.harness import NullHarness
from verifiers.v1.mcp import SharedToolServer

from openenv_sdk.errors import EpisodeFailed
from openenv_sdk.failures import classify
from openenv_sdk.prompt import observation_text
from openenv_sdk.rubric import agrade

from ..sources import EnvSource
from ._common import make_source, resolve_grader

__all__ = [
    "REWARD_NAME",
    "TOOL_SERVER_NAME",
    "OpenEnvEnv",
    "OpenEnvEnvConfig",
    "OpenEnvHarness",
    "OpenEnvTask",
    "OpenEnvTaskData",
    "OpenEnvTaskSpec",
    "OpenEnvTaskset",
    "OpenEnvTasksetConfig",
]

REWARD_NAME = "openenv_reward"
"""The trace reward that carries the grader's score (the trace's only reward, so `trace.reward` is it)."""

TOOL_SERVER_NAME = ""
"""The session's MCP server name in the harness: empty, so tools keep the server's own names."""


class OpenEnvTaskSpec(BaseModel):
    """One task of the config: how to reset, and what to tell the agent."""

    model_config = ConfigDict(extra="forbid")

    reset: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the environment's `reset`."""
    prompt: str | None = None
    """The user prompt; default the reset observation's text (`prompt`/`message`, else its JSON)."""
    system_prompt: str | None = None
    name: str | None = None


class OpenEnvTasksetConfig(vf.TasksetConfig):
    """Which environment, which grader, which tasks (`--env.taskset.*`)."""

    env_dir: str | None = None
    """An environment folder, served in a local process for the run."""
    base_url: str | None = None
    """A running environment server."""
    image: str | None = None
    """An environment image, run as one container for the run."""
    grader: str | None = None
    """The host-side grader as `package.module:Name`; default the folder's `openenv.yaml` `grader:`."""
    tasks: list[OpenEnvTaskSpec] = Field(default_factory=list)
    """The tasks; default one task with no reset arguments (unless `split` is set)."""
    split: str | None = None
    """Read the tasks from the server's Task API (this split's records' `reset_kwargs` and `prompt`)."""
    system_prompt_text: str | None = None
    """A system prompt for every task that sets none."""
    startup_timeout_s: float = Field(120.0, gt=0)
    """The longest wait for a server this run starts, in seconds."""
    client_timeout_s: float = Field(60.0, gt=0)
    """Each environment call's longest wait, in seconds."""


class OpenEnvTaskData(vf.TaskData):
    reset: dict[str, Any] = Field(default_factory=dict)
    """The reset arguments of this task."""


class OpenEnvTask(vf.Task[OpenEnvTaskData]):
    """A task whose reward comes from the environment's grader (recorded by `OpenEnvEnv.run`)."""


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvTasksetConfig]):
    """The tasks of one openenv-sdk environment; owns the environment's server for the run."""

    def __init__(self, config: OpenEnvTasksetConfig) -> None:
        """Describe the environment's server (nothing starts yet).

        Raises:
            ValueError: not exactly one of `env_dir`, `base_url`, `image`; or both `tasks` and `split`.
        """
        # Checked here, not by a config validator: verifiers validates a bare `{"id": ...}` config
        # while it narrows the CLI's types.
        if config.tasks and config.split:
            raise ValueError("set --env.taskset.tasks or --env.taskset.split, not both")
        super().__init__(config)
        self.source: EnvSource = make_source(
            env_dir=config.env_dir,
            base_url=config.base_url,
            image=config.image,
            startup_timeout_s=config.startup_timeout_s,
            client_timeout_s=config.client_timeout_s,
        )
        """The environment's server: nothing starts until first use; views (shallow copies) share it."""

    def load(self) -> Iterator[OpenEnvTask]:
        config = self.config
        specs = list(config.tasks)
        if config.split is not None:
            with self.source.client() as env:
                records = env.tasks(config.split)
            specs = [
                OpenEnvTaskSpec(
                    reset=dict(r.reset_kwargs),
                    prompt=getattr(r, "prompt", None),
                    name=f"{config.split}/{r.id}",
                )
                for r in records
            ]
        elif not specs:
            specs = [OpenEnvTaskSpec()]
        for i, spec in enumerate(specs):
            yield OpenEnvTask(
                OpenEnvTaskData(
                    name=spec.name or f"{self.source.name}#{i}",
                    prompt=spec.prompt,
                    system_prompt=spec.system_prompt or config.system_prompt_text,
                    reset=spec.reset,
                ),
                config.task,
            )


class OpenEnvEnvConfig(vf.EnvConfig):
    """The env's one seat: `--env.agent.*` (model, harness, limits), as in a plain taskset's run.

    Its runtime defaults to a local subprocess (verifiers' default is a remote sandbox): the
    harness runs no code of its own, and it must reach the environment's MCP endpoint, which
    for a folder or an image is on this host.
    """

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class OpenEnvHarness(NullHarness):
    """verifiers' tool-calling chat loop with no local tools: the environment's MCP tools only."""


class OpenEnvEnv(vf.Env[OpenEnvEnvConfig]):
    """One episode per task, played over MCP in a fresh session and graded host-side."""

    taskset: OpenEnvTaskset  # `__init__` refuses any other

    def __init__(self, config: OpenEnvEnvConfig, *, grader: Any | None = None) -> None:
        super().__init__(config)
        if not isinstance(self.taskset, OpenEnvTaskset):
            raise TypeError(f"OpenEnvEnv plays an OpenEnvTaskset, not {type(self.taskset).__name__}")
        self.grader = resolve_grader(self.taskset.source, grader if grader is not None else self.taskset.config.grader)

    async def start(self) -> None:
        await asyncio.to_thread(self.taskset.source.start)

    async def stop(self) -> None:
        await asyncio.to_thread(self.taskset.source.close)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        reset = dict(getattr(data, "reset", {}) or {})
        source = self.taskset.source
        await asyncio.to_thread(source.start)
        async with source.async_client() as session:
            try:
                result = await session.reset(**reset)
            except Exception as e:  # no episode: a reset failure, never a reward
                raise EpisodeFailed(classify(e, stage="reset")) from e
            if data.prompt is None:
                task = task.with_data(prompt=observation_text(result.observation))
            await session.session()
            tools = {TOOL_SERVER_NAME: SharedToolServer(url=session.mcp_url, local=True, external=True)}
            trace = await agents.agent.run(task, tools=tools)
            try:
                score = await agrade(self.grader, session)
            except EpisodeFailed as e:  # no reward recorded: the trace's error says why
                trace.record_metrics({f"openenv/failure/{e.failure.cause.value}": 1.0})
                raise
        trace.record_reward(REWARD_NAME, score.value)
        trace.record_metrics({f"openenv/{name}": value for name, value in score.components.items()})
        trace.notify()  # live views (the dashboard, prime-rl's env-server stream) see the reward now
