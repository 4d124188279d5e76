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
from .server import ServerConfig, create_app
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
