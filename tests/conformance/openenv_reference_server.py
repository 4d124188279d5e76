"""An echo environment served by OpenEnv's own `create_app`: the reference the suite is checked against.

Run it with the interpreter that has the public `openenv` package installed (not this SDK):

    .bench/openenv-venv/bin/python tests/conformance/openenv_reference_server.py --port 8765

then run the suite against it with only the core checks:

    OPENENV_CONFORMANCE_URL=http://127.0.0.1:8765 OPENENV_CONFORMANCE_CORE_ONLY=1 \\
        .venv/bin/python -m pytest tests/conformance

The environment mirrors this SDK's echo: a plain `{"message": str}` action for `step`, and one
MCP tool, `echo`, registered on a FastMCP server (OpenEnv's way of exposing tools).
This file imports only `openenv` and its dependencies; pytest never collects it.
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State


class EchoAction(Action):
    """Say something; the environment says it back."""

    message: str


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoState(State):
    messages: list[str] = []


class ReferenceEchoEnvironment(MCPEnvironment):
    """Echoes every message back (OpenEnv reference server for the conformance suite)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("echo")

        @mcp.tool()
        def echo(message: str) -> str:
            """Return the message unchanged."""
            return message

        super().__init__(mcp)
        self._state = EchoState(episode_id="echo-0")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = EchoState(episode_id=episode_id or f"echo-{seed if seed is not None else 0}")
        return EchoObservation(echoed_message="Echo environment ready!")

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        if not isinstance(action, EchoAction):
            raise TypeError(f"expected EchoAction, got {type(action).__name__}")
        self._state.step_count += 1
        self._state.messages.append(action.message)
        return EchoObservation(
            echoed_message=action.message, message_length=len(action.message), reward=len(action.message) * 0.1
        )

    @property
    def state(self) -> EchoState:
        return self._state


app = create_app(
    ReferenceEchoEnvironment,
    EchoAction,
    EchoObservation,
    env_name="echo",
    max_concurrent_envs=8,
    state_cls=EchoState,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
