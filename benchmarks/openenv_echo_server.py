"""The echo environment written the way OpenEnv users write it, for bench_echo.py.

This file runs under `.bench/openenv-venv` (see `setup_openenv_venv.sh`), never
under our dev venv: it imports the public `openenv` package.

It follows OpenEnv's own `envs/echo_env`: an `MCPEnvironment` subclass that
builds a `FastMCP` server with an `echo_message(message)` tool in `__init__`,
served by `create_app(...)`. It also accepts the plain action
`{"message": str}` through `_step_impl`, so the step benchmarks send the same
simplest action to both servers.

Usage:
    .bench/openenv-venv/bin/python benchmarks/openenv_echo_server.py --port 8001 --max-sessions 20000
"""

from __future__ import annotations

import argparse
from typing import Any
from uuid import uuid4

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class EchoAction(Action):
    """The plain action: a message to echo back."""

    message: str = Field(..., description="Message to echo back")


class EchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, description="Length of the echoed message")


class EchoEnvironment(MCPEnvironment):
    """OpenEnv's echo environment: MCP tools plus a plain `EchoAction`."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("echo_env")

        @mcp.tool
        def echo_message(message: str) -> str:
            """Echo back the provided message.

            Args:
                message: The message to echo back

            Returns:
                The same message that was provided
            """
            return message

        @mcp.tool
        def echo_with_length(message: str) -> dict:
            """Echo back the message with its length."""
            return {"message": message, "length": len(message)}

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", done=False, reward=0.0)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if not isinstance(action, EchoAction):
            return Observation(
                done=False,
                reward=0.0,
                metadata={"error": f"Unknown action type: {type(action).__name__}"},
            )
        self._state.step_count += 1
        message = action.message
        return EchoObservation(
            echoed_message=message,
            message_length=len(message),
            done=False,
            reward=min(len(message) * 0.1, 1.0),
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=20_000,
        help="max_concurrent_envs; set high so concurrency tests are not capped by config",
    )
    args = parser.parse_args()

    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        env_name="echo_env",
        max_concurrent_envs=args.max_sessions,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        # uvicorn's default backlog (2048) drops bursts of thousands of connects.
        backlog=16384,
        ws_max_queue=32,
    )


if __name__ == "__main__":
    main()
