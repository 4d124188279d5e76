"""What it takes to run an agent program inside an environment's sandbox.

An `AgentSpec` describes a CLI agent in a few lines: how to install it, how to run it, the
environment variables it reads, and where its configuration file goes. An `AgentLaunch` is one
run of it: the spec plus the OpenAI-compatible endpoint its model calls go to (the trainer's
interception server, or a real provider), the key for that endpoint, and the task.

The launch travels from the orchestrator to the environment over the orchestrator's channel
(`client.call("run_agent", ...)`), never through a tool: the agent cannot read another
episode's key, and `api_key` is a `SecretStr` so it never appears in a repr or a log line.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..sandbox._allowlist import parse_allow

__all__ = ["AgentLaunch", "AgentMode", "AgentRun", "AgentSpec", "render_agent_command"]

AgentMode = Literal["intercept", "black_box"]
"""`intercept`: model calls go to the trainer, which answers them with the policy (training);
`black_box`: model calls go straight to a real provider (evaluation and smoke runs)."""

PLACEHOLDERS = ("base_url", "anthropic_base_url", "api_key_env", "model", "task_file", "workdir", "python")
"""Names a spec's `run`, `install`, `env` values and `config` may use as `{name}`."""


class AgentSpec(BaseModel):
    """A CLI agent: install, run, environment, configuration.

    String fields may use the placeholders `{base_url}` (the OpenAI-compatible base URL, ending
    in `/v1`), `{anthropic_base_url}` (the same without `/v1`: Anthropic clients add `/v1/messages`
    themselves), `{model}`, `{task_file}` (a file holding the task's instruction), `{workdir}` (the
    episode's working directory), `{python}` (the server's interpreter: in an image the sandbox
    user can run it; a local server's may sit where the sandbox user cannot, so prefer `python3`)
    and `{api_key_env}` (the name of the variable that holds the key; the key itself is only ever
    in the agent's environment, never in the install's). In `run` and `install` the values are
    shell-quoted; in `env` and `config` they are inserted as is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="A short name, for logs and metrics.")
    run: str = Field(description="The shell command that runs the agent to completion on the task.")
    install: str | None = Field(
        default=None, description="A shell command run before the agent's first run in a sandbox (skipped once it succeeded)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables for the agent.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="The variable the agent reads its key from."
    )
    base_url_env: str | None = Field(
        default="OPENAI_BASE_URL", description="A variable the agent reads the base URL from (None: the spec passes it itself)."
    )
    config_path: str | None = Field(
        default=None, description="Where the agent's configuration file goes (relative to its HOME, or absolute)."
    )
    config: str | None = Field(default=None, description="The configuration file's content (placeholders filled in).")
    files: dict[str, str] = Field(
        default_factory=dict, repr=False, description="More files to write before the run (path relative to HOME -> content, written verbatim)."
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Wall-clock limit of one run; the agent is killed after it.")
    install_timeout_s: float = Field(default=300.0, gt=0, description="Wall-clock limit of the install command.")
    memory_bytes: int | None = Field(
        default=None,
        ge=64 * 1024**2,
        description="The address space (RLIMIT_AS) each of the agent's processes may reserve, where it needs more "
        "than the environment's per-command limit: node reserves several GiB of virtual memory it never "
        "touches (V8's heap cage, WebAssembly guard regions), and aborts under a 1 GiB limit. What the "
        "session's processes really use stays bounded by its cgroup; where the kernel gives the sandbox "
        "no cgroup (`isolation_report()` says so), this limit was the only memory bound of the agent's processes.",
    )
    install_allow: list[str] = Field(
        default_factory=list,
        description="Host names the install command may reach, through the allowlist proxy (e.g. `pypi.org`, "
        "`files.pythonhosted.org`); nothing else. The run reaches only its model endpoint.",
    )

    @field_validator("install_allow")
    @classmethod
    def _install_allow_names(cls, value: list[str]) -> list[str]:
        parse_allow(value)  # raises ValueError naming an entry that is not a host name
        return value

    @field_validator("config_path")
    @classmethod
    def _config_path_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("config_path is empty")
        return value


class AgentLaunch(BaseModel):
    """One run of an agent in one episode, as the orchestrator sends it to the environment."""

    model_config = ConfigDict(extra="forbid")

    spec: AgentSpec
    base_url: str = Field(description="The OpenAI-compatible base URL (ending in /v1) the agent's model calls go to.")
    api_key: SecretStr = Field(description="The key for `base_url`: a rollout's secret, or a provider key read on the host.")
    model: str = Field(default="policy", description="The model name the agent asks for.")
    mode: AgentMode = "intercept"
    instruction: str | None = Field(default=None, description="The task as the agent reads it; default the environment's.")
    timeout_s: float | None = Field(default=None, gt=0, description="Overrides `spec.timeout_s` for this run.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")

    @property
    def effective_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else self.spec.timeout_s

    def to_wire(self) -> dict[str, Any]:
        """The launch as JSON for `client.call("run_agent", launch=...)`, the key included (it is
        hidden in every other dump, repr and log)."""
        data = self.model_dump(mode="json")
        data["api_key"] = self.api_key.get_secret_value()
        return data


class AgentRun(BaseModel):
    """What one agent run did, as the environment reports it to the orchestrator."""

    agent: str
    exit_code: int = Field(description="The agent's exit status; -N when killed by signal N; 124 on timeout.")
    timed_out: bool = False
    duration_s: float
    stdout_tail: str = Field(default="", description="The end of the agent's output (secrets removed).")
    stderr_tail: str = Field(default="", description="The end of the agent's errors (secrets removed).")
    install_exit_code: int | None = Field(default=None, description="The install command's status when it ran.")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def _fill(template: str, values: dict[str, str]) -> str:
    out = template
    for name in PLACEHOLDERS:
        out = out.replace("{" + name + "}", values[name])
    return out


def render_agent_command(launch: AgentLaunch, *, workdir: str, task_file: str, python: str) -> tuple[str, str | None, dict[str, str], str | None]:
    """The agent's run command, install command, environment and config text, placeholders filled
    (shell-quoted in the two command lines, as is in the environment and the config).

    The key appears only in the returned environment, under `spec.api_key_env`.
    """
    spec = launch.spec
    raw = {
        "base_url": launch.base_url,
        "anthropic_base_url": launch.base_url.removesuffix("/v1"),
        "api_key_env": spec.api_key_env,
        "model": launch.model,
        "task_file": task_file,
        "workdir": workdir,
        "python": python,
    }
    # Shell command lines get every value quoted; environment values and the config file get them as is.
    quoted = {name: shlex.quote(value) for name, value in raw.items()}
    env = {name: _fill(value, raw) for name, value in spec.env.items()}
    env[spec.api_key_env] = launch.api_key.get_secret_value()
    if spec.base_url_env:
        env[spec.base_url_env] = launch.base_url
    env.setdefault("OPENENV_MODEL", launch.model)
    env.setdefault("OPENENV_TASK_FILE", task_file)
    run = _fill(spec.run, quoted)
    install = _fill(spec.install, quoted) if spec.install else None
    config = _fill(spec.config, raw) if spec.config is not None else None
    return run, install, env, config
