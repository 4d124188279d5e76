"""`ClientOptions`: how a client talks to its server, one frozen object for every client class.

`EnvClient`, `AsyncEnvClient` and the generic pair take these as their constructor's keywords
(`EnvClient(url, timeout_s=5)`); the constructor builds one `ClientOptions`, which checks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "TOOL_TRANSPORTS",
    "ClientOptions",
    "ToolTransport",
    "check_timeout",
]

DEFAULT_TIMEOUT_S = 60.0
"""The longest wait, in seconds, for one reply."""
DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""The longest wait, in seconds, to open a connection."""
DEFAULT_STARTUP_TIMEOUT_S = 120.0
"""The longest wait, in seconds, for a provider's server to become healthy."""
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest WebSocket message the client accepts."""

ToolTransport = Literal["mcp", "websocket"]
TOOL_TRANSPORTS: tuple[ToolTransport, ...] = ("mcp", "websocket")


def check_timeout(name: str, value: float) -> float:
    """`value` as a float of seconds; `ValueError` unless it is positive and finite."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """A client's settings, checked once when the client is built; the same for sync and async."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    """The longest wait for one reply, in seconds (`request_timeout()` widens it for a block)."""
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    """The longest wait to open a connection (WebSocket, HTTP, MCP session), in seconds."""
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    """The longest wait for `env_dir`'s or `image`'s server to become healthy, in seconds."""
    auto_reconnect: bool = True
    """When the connection has dropped, the next call opens a new session once (and says the
    episode was lost) instead of failing."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """The largest reply accepted, in bytes."""
    orchestrator_token: str | None = None
    """The server's orchestrator token, sent as `Authorization: Bearer` on the WebSocket upgrade
    and HTTP requests. Unset, a provider's own token is sent (`LocalProcessProvider` and
    `DockerProvider` start their servers with one)."""
    tool_transport: ToolTransport = "mcp"
    """How `call_tool` and `list_tools` reach the session's tools. `"mcp"`: the official `mcp`
    client over streamable HTTP at `mcp_url`, as an agent's own MCP client connects.
    `"websocket"`: the same MCP JSON-RPC requests (`tools/call`, `tools/list`) on the session's
    WebSocket (OpenEnv's `{"type": "mcp"}` message): one round trip on the open connection, no
    second connection and no MCP handshake, for code that calls tools on the agent's behalf
    (trainers' rollouts). The server runs both through the same path: the session's episode,
    transcript and checks; results and refusals come back the same."""
    validate_actions: bool = True
    """Check each action before it is sent: a typed client checks a dict action against the
    action model, a generic client checks it against the server's `/schema`. Off, the action
    goes as given and the server checks it (e.g. a server without `/schema`)."""

    def __post_init__(self) -> None:
        for name in ("timeout_s", "connect_timeout_s", "startup_timeout_s"):
            object.__setattr__(self, name, check_timeout(name, getattr(self, name)))
        if isinstance(self.max_message_bytes, bool) or not isinstance(self.max_message_bytes, int) or self.max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be a positive whole number of bytes, got {self.max_message_bytes!r}")
        if self.tool_transport not in TOOL_TRANSPORTS:
            raise ValueError(f"tool_transport must be one of {TOOL_TRANSPORTS}, got {self.tool_transport!r}")
