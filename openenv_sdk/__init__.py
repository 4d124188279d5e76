"""openenv-sdk: one environment class becomes a server with MCP tools and reset/step/state."""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from .environment import Environment
from .errors import (
    AuthenticationError,
    CapacityError,
    ClientStateError,
    ContainerError,
    EnvCheckError,
    EnvironmentDefinitionError,
    ExecutionError,
    InvalidActionError,
    ManifestError,
    OpenEnvError,
    ProviderError,
    RequestError,
    RequestTimeout,
    ServerError,
    ServerTimeout,
    SessionError,
    ToolCallError,
    ToolFailure,
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

try:
    __version__: str = _version("openenv-sdk")
    """The installed distribution's version (package metadata), e.g. `0.1.0`."""
except _PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from .checks import check_env
    from .client import AsyncEnvClient, AsyncGenericEnvClient, EnvClient, GenericEnvClient, StepResult
    from .providers import DockerProvider, LocalProcessProvider, Provider
    from .rubric import Grader, Score, agrade, grade, reward
    from .server import ServerConfig, create_app

# The names a user reaches for first, imported on first use so that `import openenv_sdk` stays
# light (the server pulls in FastAPI and the MCP server; the clients httpx and websockets).
_LAZY = {
    "ServerConfig": "server",
    "create_app": "server",
    "EnvClient": "client",
    "AsyncEnvClient": "client",
    "GenericEnvClient": "client",
    "AsyncGenericEnvClient": "client",
    "StepResult": "client",
    "Provider": "providers",
    "LocalProcessProvider": "providers",
    "DockerProvider": "providers",
    "Grader": "rubric",
    "Score": "rubric",
    "grade": "rubric",
    "agrade": "rubric",
    "reward": "rubric",
    "check_env": "checks",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'openenv_sdk' has no attribute {name!r}")


__all__ = [
    "Action",
    "AsyncEnvClient",
    "AsyncGenericEnvClient",
    "DockerProvider",
    "EnvClient",
    "GenericEnvClient",
    "Grader",
    "LocalProcessProvider",
    "Provider",
    "Score",
    "StepResult",
    "agrade",
    "grade",
    "reward",
    "CallToolAction",
    "CallToolObservation",
    "AuthenticationError",
    "CapacityError",
    "ClientStateError",
    "ContainerError",
    "EnvCheckError",
    "Environment",
    "EnvironmentDefinitionError",
    "ExecutionError",
    "InvalidActionError",
    "ListToolsAction",
    "ListToolsObservation",
    "ManifestError",
    "Observation",
    "OpenEnvError",
    "ProviderError",
    "RequestError",
    "RequestTimeout",
    "ServerConfig",
    "ServerError",
    "ServerTimeout",
    "SessionError",
    "State",
    "ToolCallAction",
    "ToolCallError",
    "ToolFailure",
    "ToolError",
    "ToolErrorType",
    "TransportError",
    "check_env",
    "create_app",
    "orchestrator",
    "tool",
]
