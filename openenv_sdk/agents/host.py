"""`AgentHost`: lets an environment run an agent program in the episode's sandbox.

A sandboxed environment mixes it in and says how its sandbox runs a command:

    class TerminalEnvironment(AgentHost, Environment[...]):
        def agent_exec(self, command, *, env, timeout_s, stdin=None) -> CommandResult: ...
        def agent_home(self) -> str: ...
        def agent_instruction(self) -> str: ...

The orchestrator then runs an agent with `client.call("run_agent", launch=AgentLaunch(...))`:
an orchestrator-only call (never an MCP tool, so the agent cannot start agents or read a
launch's key). The call writes the task and the agent's config file, installs the agent once,
runs it to completion under the sandbox's limits (killed after its timeout), and answers an
`AgentRun` with the end of its output, the key scrubbed from it.

Network: the program reaches its model endpoint and nothing else of the host. An `http://`
`base_url` is relayed into the command's own network namespace at `127.0.0.1:<port>` (the
program is given that URL; `openenv_sdk.sandbox` forwards it to the one address the launch
named); an `https://` one to a name goes through the allowlist proxy with only its host on the
list (to `localhost` or an address, it is relayed like `http://`). The
install command reaches only the spec's `install_allow` hosts, the files written before reach
nothing. Environments pass `network=True` to `Sandbox.run` in `agent_exec`, which adds the
phase's egress (`openenv_sdk.sandbox.launch_egress`) to the sandbox's own.
"""

from __future__ import annotations

import hashlib
import inspect
import shlex
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from ..errors import SandboxError
from ..sandbox import CommandResult, Egress, Isolation, isolation_mode, launch_egress, relay_url
from ..sandbox._allowlist import is_ip_literal
from ..sandbox._network import operator_pins
from ..tools import orchestrator
from .spec import AgentLaunch, AgentRun, render_agent_command

__all__ = ["AgentHost"]

TAIL_CHARS = 8000
# Per container (or host for a local server), keyed by the install command itself, so a changed
# install runs again. Installs must be idempotent all the same: the marker is only a shortcut.
_INSTALLED_MARKER = "/tmp/.openenv-agent-installed-{name}-{digest}"


class AgentHost:
    """Mixin: the orchestrator-only call `run_agent` (see the module docstring)."""

    def agent_exec(
        self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None, memory_bytes: int | None = None
    ) -> CommandResult:
        """Run a shell command as the agent would: in the episode's working directory, as the
        sandbox user, under the sandbox's limits, with `env` added to the sandbox's environment.
        `memory_bytes`: the per-process address space the agent's spec asks for (`AgentSpec.memory_bytes`),
        in place of the sandbox's per-command one; only passed when the spec sets it."""
        raise NotImplementedError(f"{type(self).__name__} must implement agent_exec() to host agents")

    def agent_home(self) -> str:
        """The agent's HOME (its config file's relative path starts here)."""
        raise NotImplementedError(f"{type(self).__name__} must implement agent_home() to host agents")

    def agent_workdir(self) -> str:
        """The directory the agent starts in; default its HOME."""
        return self.agent_home()

    def agent_instruction(self) -> str:
        """The task as the agent reads it, when the launch gives none."""
        raise NotImplementedError(f"{type(self).__name__} must implement agent_instruction() or launches must carry one")

    @orchestrator
    def run_agent(self, launch: dict[str, Any]) -> dict[str, Any]:
        """Run an agent (an `AgentLaunch`) in this episode's sandbox to completion; returns an `AgentRun`."""
        try:
            parsed = AgentLaunch.model_validate(launch)
        except ValidationError as e:
            where = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors(include_input=False))
            raise ValueError(f"invalid agent launch: {where}") from None
        return self._run_launch(parsed).model_dump()

    def _run_launch(self, launch: AgentLaunch) -> AgentRun:
        spec = launch.spec
        home = self.agent_home()
        task_file = f"{home}/.openenv/task.md"
        model_egress, inside_url = model_egress_of(launch.base_url)
        run, install, env, config = render_agent_command(
            launch.model_copy(update={"base_url": inside_url}), workdir=self.agent_workdir(), task_file=task_file, python=sys.executable
        )
        secret = launch.api_key.get_secret_value()
        instruction = launch.instruction if launch.instruction is not None else self.agent_instruction()
        files = [(task_file, instruction)]
        files += [(path if path.startswith("/") else f"{home}/{path}", text) for path, text in spec.files.items()]
        if spec.config_path is not None and config is not None:
            path = spec.config_path if spec.config_path.startswith("/") else f"{home}/{spec.config_path}"
            files.append((path, config))
        for path, text in files:
            wrote = self.agent_exec(
                f'mkdir -p "$(dirname {shlex.quote(path)})" && cat > {shlex.quote(path)}', env={}, timeout_s=30.0, stdin=text
            )
            if wrote.exit_code != 0:
                raise SandboxError(f"could not write {path} in the sandbox: {_scrub(wrote.stderr, secret)[-500:]}")
        # Only when the spec asks: environments written before `memory_bytes` existed still host other agents.
        memory: dict[str, Any] = {"memory_bytes": spec.memory_bytes} if spec.memory_bytes is not None else {}
        if memory and "memory_bytes" not in inspect.signature(self.agent_exec).parameters:
            raise ValueError(
                f"agent {spec.name!r} needs {spec.memory_bytes} bytes of address space per process (memory_bytes), "
                f"and {type(self).__name__}.agent_exec cannot give it (it takes no memory_bytes)"
            )
        install_code = None
        if install:
            marker = _INSTALLED_MARKER.format(name=spec.name, digest=hashlib.sha256(install.encode()).hexdigest()[:16])
            install_env = {k: v for k, v in env.items() if k != spec.api_key_env}  # the key is the run's only
            with launch_egress(Egress(allow=tuple(spec.install_allow), pins=install_pins(spec.install_allow))):
                done = self.agent_exec(
                    f"test -f {marker} || {{ ( {install} ) && touch {marker}; }}",
                    env=install_env,
                    timeout_s=spec.install_timeout_s,
                    **memory,
                )
            install_code = done.exit_code
            if done.exit_code != 0 or done.timed_out:
                return _report(spec.name, done, secret, install_code=install_code)
        with launch_egress(model_egress):
            result = self.agent_exec(run, env=env, timeout_s=launch.effective_timeout_s, **memory)
        return _report(spec.name, result, secret, install_code=install_code)


INSTALL_PINS_ENV = "OPENENV_AGENT_INSTALL_PINS"
"""The operator's pins for agent installs: JSON `{"registry.npmjs.org": "10.0.0.5", ...}` in the
environment server's environment, for a registry mirror (or a network that routes the registry
through an internal address): the allowlist proxy uses a pinned address as given instead of
refusing a name that resolves to an internal one. Only names on the spec's `install_allow` count."""


def install_pins(allow: list[str]) -> dict[str, str]:
    """The operator's pins (`INSTALL_PINS_ENV`) for the names an install may reach.

    Raises:
        ValueError: the variable is not a JSON object of names to addresses.
    """
    return operator_pins(INSTALL_PINS_ENV, allow)


def model_egress_of(base_url: str) -> tuple[Egress, str]:
    """What an agent program needs to reach its model endpoint, and the URL it uses for it.

    `http://`, or `https://` to `localhost` or an address: the endpoint relayed to
    `127.0.0.1:<port>` in the sandbox (the URL rewritten to it; `localhost` kept). `https://` to
    a name: its host through the allowlist proxy, pinned to the address it has here (the
    orchestrator chose it; the proxy would refuse an internal one otherwise), the URL kept, so
    TLS checks the real name. Under the opt-out there are no namespaces: the URL is kept.
    """
    parts = urlsplit(base_url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    if isolation_mode() is Isolation.NONE:
        return Egress(), base_url
    if parts.scheme == "http" or host == "localhost" or is_ip_literal(host):
        endpoint, inside = relay_url(base_url)
        return Egress(endpoints=(endpoint,)), inside
    try:
        address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
    except OSError as e:
        raise SandboxError(f"the launch's base_url host {host!r} does not resolve here: {e}") from None
    return Egress(allow=(f"{host}:{port}",), pins={host.lower(): str(address)}), base_url


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _report(name: str, result: CommandResult, secret: str, *, install_code: int | None) -> AgentRun:
    return AgentRun(
        agent=name,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=result.duration_s,
        stdout_tail=_scrub(result.stdout, secret)[-TAIL_CHARS:],
        stderr_tail=_scrub(result.stderr, secret)[-TAIL_CHARS:],
        install_exit_code=install_code,
    )
