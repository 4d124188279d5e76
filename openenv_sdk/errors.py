"""The SDK's errors, one tree.

    OpenEnvError
    ├── EnvironmentDefinitionError   a class that breaks the authoring contract (raised at class definition)
    ├── ManifestError                openenv.yaml is missing, malformed or has wrong types
    ├── ServerError                  a server answered with a typed error (carries `code`)
    │   ├── InvalidActionError       VALIDATION_ERROR: the action failed its schema
    │   ├── CapacityError            CAPACITY_REACHED: the server holds its maximum of sessions
    │   ├── SessionError             SESSION_NOT_FOUND / SESSION_REQUIRED / SESSION_ERROR
    │   └── ToolCallError            an MCP tool call was refused (unknown tool, unbound session)
    ├── TransportError               the connection failed or closed under a request
    │   └── RequestTimeout           no answer within the client's `timeout_s`
    ├── ClientStateError             a closed client was used, or one used before `reset`
    ├── ProviderError                a provider could not start or keep a server
    └── ContainerError               the container engine is unreachable or a build failed

A bad action or a failing tool is data for the caller, not a crash of the server: servers
send these as typed errors and keep the session; clients raise them with the server's code.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CapacityError",
    "ClientStateError",
    "ContainerError",
    "EnvironmentDefinitionError",
    "InvalidActionError",
    "ManifestError",
    "OpenEnvError",
    "ProviderError",
    "RequestTimeout",
    "ServerError",
    "SessionError",
    "ToolCallError",
    "TransportError",
]


class OpenEnvError(Exception):
    """Base of every error the SDK raises on purpose."""


class EnvironmentDefinitionError(OpenEnvError, TypeError):
    """An environment class breaks the authoring contract (e.g. a tool named `reset`)."""


class ManifestError(OpenEnvError, ValueError):
    """An `openenv.yaml` manifest is missing, malformed or has a field of the wrong type."""


class ServerError(OpenEnvError):
    """A server answered a request with a typed error.

    Attributes:
        code: the wire error code (`openenv_sdk.types.ErrorCode`), e.g. `"VALIDATION_ERROR"`.
        details: the rest of the error payload (e.g. pydantic's field `errors`).
    """

    def __init__(self, message: str, *, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}

    def __str__(self) -> str:
        return f"[{self.code}] {self.args[0]}"


class InvalidActionError(ServerError):
    """The action did not validate against the environment's action schema."""


class CapacityError(ServerError):
    """The server already holds its maximum number of sessions."""


class SessionError(ServerError):
    """The session is missing, unknown, expired, or failed."""


class ToolCallError(ServerError):
    """A tool call could not be made (unknown tool, timeout)."""


class TransportError(OpenEnvError):
    """The connection to the server failed or closed while a request was in flight."""


class RequestTimeout(TransportError):
    """The server gave no answer within the client's timeout."""


class ClientStateError(OpenEnvError, RuntimeError):
    """The client was used in a state that does not allow it (closed, or never opened)."""


class ProviderError(OpenEnvError):
    """A provider could not start a server, or the server it started died."""


class ContainerError(ProviderError):
    """The container engine is unreachable, or building or running an image failed."""
