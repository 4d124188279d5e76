"""openenv-sdk: one environment class becomes a server with MCP tools and reset/step/state."""

from .environment import Environment
from .errors import (
    CapacityError,
    ClientStateError,
    ContainerError,
    EnvironmentDefinitionError,
    InvalidActionError,
    ManifestError,
    OpenEnvError,
    ProviderError,
    RequestTimeout,
    ServerError,
    SessionError,
    ToolCallError,
    TransportError,
)
from .tools import orchestrator, tool
from .types import (
    Action,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Observation,
    State,
    ToolCallAction,
    ToolError,
    ToolErrorType,
)

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import ServerConfig, create_app


def __getattr__(name: str) -> Any:
    # The server pulls in FastAPI and the MCP server; clients that never serve skip that import.
    if name in ("ServerConfig", "create_app"):
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module 'openenv_sdk' has no attribute {name!r}")


__all__ = [
    "Action",
    "CallToolAction",
    "CallToolObservation",
    "CapacityError",
    "ClientStateError",
    "ContainerError",
    "Environment",
    "EnvironmentDefinitionError",
    "InvalidActionError",
    "ListToolsAction",
    "ListToolsObservation",
    "ManifestError",
    "Observation",
    "OpenEnvError",
    "ProviderError",
    "RequestTimeout",
    "ServerConfig",
    "ServerError",
    "SessionError",
    "State",
    "ToolCallAction",
    "ToolCallError",
    "ToolError",
    "ToolErrorType",
    "TransportError",
    "create_app",
    "orchestrator",
    "tool",
]
